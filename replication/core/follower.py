"""`PartitionFollower`: one partition this broker follows, as a deterministic state machine
(Kafka's ``ReplicaFetcherThread`` / ``AbstractFetcherThread`` decisions for one partition).

Theory of operation
-------------------
The follower pulls: `build_fetch_request` asks for the records after its log end offset,
with the epoch of its last batch (``last_fetched_epoch``) and the leader epoch it believes in;
`handle_fetch_response` decides what to do with the answer, and `ready` / `advance` hand the
decision to the shell, which applies it to the real log. One fetch is in flight at a time, and
no new fetch is built until the previous decision is applied.

Answers and what they lead to:

- records: append them as they are (offsets and leader epochs kept), then
  HW = min(leader HW, own LEO). Every appended batch is folded into the producer state, so a
  follower that becomes leader already knows every idempotent producer (KIP-98).
- ``diverging_epoch = (E, end)``: the logs split after ``end`` of epoch E. Truncate to
  ``min(end, own end offset of E)`` (KIP-101, KIP-279), never to the own high watermark: the HW
  of a follower can lag (losing committed records when truncating to it, KIP-101 scenario 1)
  or lead what a new leader kept (leaving divergent records below it, scenario 2). If this
  log has no epoch E, truncate to the end of its largest epoch below E and ask again
  (KIP-279's fast double failover).
- FENCED_LEADER_EPOCH: our leader epoch is stale: fetch nothing until metadata brings a new
  one. UNKNOWN_LEADER_EPOCH (the leader has not seen our epoch yet) and other errors: retry
  after ``replica.fetch.backoff.ms``, as Kafka does.
- OFFSET_OUT_OF_RANGE: if the leader's log starts after our log end, truncate fully and start
  at its log start offset (Kafka's ``fetchOffsetAndTruncate``); otherwise our log runs past the
  leader's: truncate to its high watermark. NB: Kafka asks ListOffsets for the leader's log end
  offset and truncates to that; the HW is at or below it, so this only refetches more.

`TruncationStrategy.HIGH_WATERMARK` replays Kafka before KIP-101 for tests that show its data
loss: fetch without epochs and truncate to the own HW whenever the leader changes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import final

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.metadata.image import PartitionRegistration
from kraft.types import Epoch, NodeId, Offset, TopicPartition
from replication.core.config import ReplicationConfig
from replication.core.log_view import UNDEFINED_EPOCH, PartitionLogView
from replication.core.messages import (
    DivergingEpoch,
    FollowerFetchRequest,
    FollowerFetchResponse,
)
from replication.core.producer_state import ProducerStateManager
from storage.errors import CorruptRecordError, ErrorCode
from storage.records import BatchHeader, iter_batches

NO_LEADER = -1


class TruncationStrategy(enum.Enum):
    """How a follower finds where its log stops matching the leader's."""

    LEADER_EPOCH = "leader_epoch"
    """KIP-101/279 (Kafka >= 2.0; via the fetch since KIP-320): the leader's epoch end offset."""
    HIGH_WATERMARK = "high_watermark"
    """Kafka before KIP-101: the own high watermark. For tests only: it loses and diverges
    data (see tests/replication/test_scenarios.py)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowerReady:
    """Work for the shell, from `PartitionFollower.ready`. The ordering contract:

    1. If ``truncate_fully_and_start_at`` is set: ``log.truncate_fully_and_start_at(it)``.
       If ``truncate_to`` is set: ``log.truncate_to(it)``, then
       ``log.leader_epoch_cache.truncate_from_end(log.log_end_offset)`` (as Kafka's
       ``UnifiedLog.truncateTo``, this drops an epoch entry that has no batch, e.g. one this
       replica assigned as a leader that never appended, even when no batch is removed).
    2. If ``append`` is non-empty: ``log.append_as_follower(append)``. If that raises a
       `KraftError` (a corrupt batch from the wire), call `PartitionFollower.on_append_failed`
       instead of `advance`.
    3. If ``rebuild_producer_state`` is set: ``producer_state.reload(...)`` from the latest
       snapshot at or below the log end offset and the batch headers after it.
    4. Publish ``high_watermark`` (checkpoint it now and then).
    5. Call `PartitionFollower.advance` with this Ready.
    """

    truncate_to: int | None = None
    truncate_fully_and_start_at: int | None = None
    append: bytes = b""
    append_end_offset: int = -1
    """The log end offset once ``append`` is appended."""
    high_watermark: int
    rebuild_producer_state: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class _Decision:
    truncate_to: int | None = None
    truncate_fully_and_start_at: int | None = None
    append: bytes = b""
    headers: tuple[BatchHeader, ...] = ()
    append_end_offset: int = -1
    leader_high_watermark: int | None = None


@final
class PartitionFollower:
    """A follower of ``leader_id`` in ``leader_epoch``.

    Args:
        local_id / local_broker_epoch: this broker and its registered epoch (sent in fetches).
        leader_id / leader_epoch: from the partition's metadata.
        log: the shell's read-only view of the partition log.
        producer_state: the partition's producer state, shared with the shell.
        high_watermark: this replica's last known HW (from its checkpoint or its leader role).
        truncation_strategy: keep `TruncationStrategy.LEADER_EPOCH` outside tests.
    """

    def __init__(
        self,
        *,
        topic_partition: TopicPartition,
        local_id: int,
        local_broker_epoch: int,
        leader_id: int,
        leader_epoch: int,
        log: PartitionLogView,
        producer_state: ProducerStateManager,
        config: ReplicationConfig,
        high_watermark: int,
        now_ms: int,
        truncation_strategy: TruncationStrategy = TruncationStrategy.LEADER_EPOCH,
        logger: FilteringBoundLogger | None = None,
    ) -> None:
        assert leader_id != local_id, "PartitionFollower of itself"
        self._tp = topic_partition
        self._local_id = local_id
        self._local_broker_epoch = local_broker_epoch
        self._log = log
        self._producer_state = producer_state
        self._config = config
        self._strategy = truncation_strategy
        base = logger if logger is not None else structlog.get_logger("replication.follower")
        self._base_logger = base.bind(topic_partition=str(topic_partition), node_id=local_id)
        self._logger = self._base_logger
        # Invariant: log_start_offset <= high_watermark <= log_end_offset
        self._high_watermark = min(max(high_watermark, log.log_start_offset), log.log_end_offset)
        self._published_high_watermark = -1
        self._in_flight: FollowerFetchRequest | None = None
        self._next_fetch_id = 1
        self._backoff_until_ms = now_ms
        self._last_build_ms = now_ms  # when the shell last asked for a fetch
        self._awaiting_metadata = False
        self._staged: _Decision | None = None
        self._handed: tuple[FollowerReady, _Decision | None] | None = None
        self._rebuild_producer_state = False
        self._leader_id = NO_LEADER
        self._leader_epoch = -1
        self._become_follower(leader_id, leader_epoch, now_ms)

    # --- accessors ----------------------------------------------------------------------------

    @property
    def topic_partition(self) -> TopicPartition:
        return self._tp

    @property
    def leader_id(self) -> int:
        return self._leader_id

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def truncation_strategy(self) -> TruncationStrategy:
        return self._strategy

    @property
    def awaiting_metadata(self) -> bool:
        return self._awaiting_metadata

    @property
    def fetch_in_flight(self) -> FollowerFetchRequest | None:
        return self._in_flight

    # --- inputs -------------------------------------------------------------------------------

    def build_fetch_request(self, now_ms: int) -> FollowerFetchRequest | None:
        """The next fetch to send, or None: one is in flight, a decision awaits the shell, the
        follower backs off, or it waits for metadata (no leader, or a fenced epoch)."""
        self._last_build_ms = max(self._last_build_ms, now_ms)
        if (
            self._leader_id == NO_LEADER
            or self._awaiting_metadata
            or self._in_flight is not None
            or self._handed is not None
            or self.has_ready()
            or now_ms < self._backoff_until_ms
        ):
            return None
        log = self._log
        if self._strategy is TruncationStrategy.HIGH_WATERMARK:
            last_fetched_epoch = UNDEFINED_EPOCH  # the pre-KIP-101 fetch knows no epochs
        else:
            latest = log.leader_epoch_cache.latest_epoch
            last_fetched_epoch = UNDEFINED_EPOCH if latest is None else latest
        request = FollowerFetchRequest(
            fetch_id=self._next_fetch_id,
            topic_partition=self._tp,
            leader_id=NodeId(self._leader_id),
            replica_id=NodeId(self._local_id),
            broker_epoch=self._local_broker_epoch,
            fetch_offset=Offset(log.log_end_offset),
            last_fetched_epoch=Epoch(last_fetched_epoch),
            current_leader_epoch=Epoch(self._leader_epoch),
            log_start_offset=Offset(log.log_start_offset),
        )
        self._next_fetch_id += 1
        self._in_flight = request
        return request

    def handle_fetch_response(self, response: FollowerFetchResponse, now_ms: int) -> None:
        """Take the leader's answer to the fetch in flight (others are dropped)."""
        request = self._in_flight
        if request is None or response.fetch_id != request.fetch_id:
            self._logger.debug("dropped_stale_fetch_response", fetch_id=response.fetch_id)
            return
        self._in_flight = None
        code = response.error_code
        if code is ErrorCode.NONE:
            if response.diverging_epoch is not None:
                self._on_diverging_epoch(response.diverging_epoch, response.high_watermark)
            else:
                self._on_records(request, response, now_ms)
        elif code is ErrorCode.OFFSET_OUT_OF_RANGE:
            self._on_offset_out_of_range(response, now_ms)
        elif code is ErrorCode.FENCED_LEADER_EPOCH:
            self._awaiting_metadata = True
            self._logger.info("fenced_awaiting_metadata")
        else:
            # UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, transport errors: retry later.
            self._logger.info("fetch_failed", error=code.name)
            self._backoff(now_ms)

    def handle_partition_change(self, registration: PartitionRegistration, now_ms: int) -> bool:
        """Apply the partition's latest metadata.

        Returns:
            False if this broker is now the leader: the shell must replace this follower with
            a `PartitionLeader` (after applying any pending Ready).
        """
        if registration.leader == self._local_id:
            return False
        if registration.leader_epoch > self._leader_epoch:
            self._become_follower(registration.leader, registration.leader_epoch, now_ms)
        return True

    def on_append_failed(self, ready: FollowerReady, now_ms: int) -> None:
        """The shell's append of ``ready`` failed; refetch after a backoff."""
        assert self._handed is not None and self._handed[0] is ready
        self._handed = None
        self._logger.warning("append_failed", append_end_offset=ready.append_end_offset)
        self._backoff(now_ms)

    def next_deadline_ms(self) -> int | None:
        """When a fetch may be built again after a backoff that held back the last
        `build_fetch_request` (absolute; None: no backoff pending)."""
        return self._backoff_until_ms if self._backoff_until_ms > self._last_build_ms else None

    # --- ready / advance ----------------------------------------------------------------------

    def has_ready(self) -> bool:
        if self._handed is not None:
            return False
        return (
            self._staged is not None
            or self._rebuild_producer_state
            or self._published_high_watermark != self._high_watermark
        )

    def ready(self) -> FollowerReady:
        assert self._handed is None, "the previous FollowerReady was not advanced"
        decision = self._staged
        self._staged = None
        high_watermark = self._high_watermark
        if decision is None:
            ready = FollowerReady(
                high_watermark=high_watermark, rebuild_producer_state=self._rebuild_producer_state
            )
        else:
            target = decision.truncate_to
            if decision.truncate_fully_and_start_at is not None:
                high_watermark = decision.truncate_fully_and_start_at
            elif target is not None:
                high_watermark = min(high_watermark, target)
            elif decision.leader_high_watermark is not None:
                end = decision.append_end_offset if decision.append else self._log.log_end_offset
                high_watermark = max(min(decision.leader_high_watermark, end), 0)
            ready = FollowerReady(
                truncate_to=target,
                truncate_fully_and_start_at=decision.truncate_fully_and_start_at,
                append=decision.append,
                append_end_offset=decision.append_end_offset,
                high_watermark=high_watermark,
                rebuild_producer_state=self._rebuild_producer_state,
            )
        self._handed = (ready, decision)
        return ready

    def advance(self, ready: FollowerReady) -> None:
        """The shell applied ``ready``."""
        assert self._handed is not None and self._handed[0] is ready
        _, decision = self._handed
        self._handed = None
        log = self._log
        if ready.rebuild_producer_state:
            self._rebuild_producer_state = False
        if ready.truncate_fully_and_start_at is not None:
            self._producer_state.truncate_fully_and_start_at(ready.truncate_fully_and_start_at)
        if ready.truncate_to is not None and not self._producer_state.truncate_to(
            log.log_end_offset
        ):
            self._rebuild_producer_state = True
        if decision is not None and decision.append:
            assert log.log_end_offset == ready.append_end_offset, "append not applied"
            for header in decision.headers:
                self._producer_state.update(header, header.base_offset)
        # Kafka's UnifiedLog.updateHighWatermark: clamp into [log start, log end].
        self._high_watermark = min(
            max(ready.high_watermark, log.log_start_offset), log.log_end_offset
        )
        self._published_high_watermark = ready.high_watermark

    # --- internals ----------------------------------------------------------------------------

    def _become_follower(self, leader_id: int, leader_epoch: int, now_ms: int) -> None:
        self._leader_id = leader_id
        self._leader_epoch = leader_epoch
        self._in_flight = None
        self._awaiting_metadata = False
        self._backoff_until_ms = now_ms
        self._staged = None  # decided on the old leader's answer: decide again on the new one
        self._logger = self._base_logger.bind(
            role="follower", leader_id=leader_id, leader_epoch=leader_epoch
        )
        self._logger.info(
            "became_follower",
            log_end_offset=self._log.log_end_offset,
            high_watermark=self._high_watermark,
        )
        # Kafka before KIP-101: makeFollower truncated the log to the high watermark.
        if (
            self._strategy is TruncationStrategy.HIGH_WATERMARK
            and self._high_watermark < self._log.log_end_offset
        ):
            self._stage(_Decision(truncate_to=self._high_watermark))

    def _stage(self, decision: _Decision) -> None:
        assert self._staged is None, "a decision is already waiting for the shell"
        self._staged = decision

    def _backoff(self, now_ms: int) -> None:
        self._backoff_until_ms = now_ms + self._config.replica_fetch_backoff_ms

    def _on_records(
        self, request: FollowerFetchRequest, response: FollowerFetchResponse, now_ms: int
    ) -> None:
        records = response.records
        headers: list[BatchHeader] = []
        expected: int = request.fetch_offset
        end = 0
        try:
            for position, header in iter_batches(records):
                if header.base_offset != expected:
                    self._logger.warning(
                        "dropped_out_of_order_batch",
                        base_offset=header.base_offset,
                        expected=expected,
                    )
                    break
                headers.append(header)
                expected = header.next_offset
                end = position + header.size_bytes
        except CorruptRecordError as e:
            self._logger.warning("dropped_corrupt_batch", reason=e.message)
        if not headers:
            if records:
                self._backoff(now_ms)
            self._stage(_Decision(leader_high_watermark=response.high_watermark))
            return
        self._stage(
            _Decision(
                append=records[:end],
                headers=tuple(headers),
                append_end_offset=expected,
                leader_high_watermark=response.high_watermark,
            )
        )

    def _on_diverging_epoch(self, diverging: DivergingEpoch, leader_high_watermark: int) -> None:
        log = self._log
        log_end = log.log_end_offset
        own_epoch, own_end = log.leader_epoch_cache.end_offset_for(diverging.epoch)
        if own_epoch == UNDEFINED_EPOCH:
            target: int = min(diverging.end_offset, log_end)
        elif own_epoch != diverging.epoch:
            # KIP-279: we have no epoch E; cut back to the end of our largest epoch below it and
            # let the leader tell us again where that one ended.
            target = min(own_end, log_end)
        else:
            # KIP-101/279: the leader's end offset for E, capped by ours for E.
            target = min(diverging.end_offset, own_end, log_end)
        self._logger.info(
            "diverging_epoch_truncation",
            epoch=diverging.epoch,
            leader_end_offset=diverging.end_offset,
            own_epoch=own_epoch,
            own_end_offset=own_end,
            truncate_to=target,
        )
        # NB: target may be below our high watermark after an unclean election; that is what
        # the leader has, and keeping more would diverge.
        self._stage(_Decision(truncate_to=target))

    def _on_offset_out_of_range(self, response: FollowerFetchResponse, now_ms: int) -> None:
        log_end = self._log.log_end_offset
        if response.log_start_offset > log_end:
            self._logger.info("truncated_fully", leader_log_start_offset=response.log_start_offset)
            self._stage(_Decision(truncate_fully_and_start_at=response.log_start_offset))
        elif 0 <= response.high_watermark < log_end:
            self._logger.info("out_of_range_truncation", truncate_to=response.high_watermark)
            self._stage(_Decision(truncate_to=response.high_watermark))
        else:
            self._backoff(now_ms)


__all__ = ["NO_LEADER", "FollowerReady", "PartitionFollower", "TruncationStrategy"]
