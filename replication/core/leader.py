"""`PartitionLeader`: one partition this broker leads, as a deterministic state machine
(Kafka's ``Partition`` leader side plus ``ReplicaManager``'s produce decisions).

Theory of operation
-------------------
The leader does no I/O and reads no clock. The shell feeds it:

- produces (`handle_produce_request`): validated here (acks, min.insync.replicas, the batch
  as Kafka's LogValidator checks it (`storage.batch_validation`), producer sequence); an
  accepted batch comes back as a `LeaderAppend` the shell appends at once, reporting the base
  offset with `on_appended` (or `on_append_failed`);
- follower fetches (`handle_follower_fetch`): fenced by leader epoch (KIP-320), checked for
  divergence against the epoch cache (KIP-101/279), then recorded as the follower's LEO and
  caught-up time; the answer says what to read and which high watermark to send;
- AlterPartition results (`handle_alter_partition_response`), metadata
  (`handle_partition_change`, `update_brokers`) and time (`tick`).

and drains its output with `ready` / `advance`: `LeaderReady` holds the epoch-cache entry of a
new leader epoch, the high watermark, answered produces and the AlterPartition to send.

Rules, with their sources:

- HW = min LEO over the leader and the maximal ISR (KIP-497), never decreasing, and frozen
  while the committed ISR is below min.insync.replicas (KIP-966; see ``high_watermark.py``).
- acks=all: rejected before the append with NOT_ENOUGH_REPLICAS when the committed ISR is
  below min.insync.replicas; else it waits in the purgatory until HW passes its batch
  (``delayed_produce.py``).
- ISR shrink (`tick`): an ISR follower not caught up within ``replica.lag.time.max.ms``.
  ISR expand (on its fetch): a follower whose LEO is at least the HW and the start
  offset of this leader epoch, and that KIP-841 allows (unfenced, not shutting down, fetching
  with its registered broker epoch). Both go through one AlterPartition at a time
  (``isr_state.py``); the leader adopts an ISR only once the controller committed it. The
  follower states, the ISR and these decisions live in the leader's `IsrManager`
  (``isr_manager.py``); the leader feeds it fetches, metadata and time, and sends what it asks.
- A new leader starts its epoch at its LEO (an epoch-cache entry, KIP-101) and keeps the high
  watermark it had as a follower: it never moves back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import assert_never, final

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.controller.messages import AlterPartitionPartitionResult
from kraft.metadata.image import PartitionRegistration
from kraft.types import Epoch, Offset, TopicPartition
from replication.core.config import ReplicationConfig
from replication.core.delayed_produce import DelayedProduce, DelayedProducePurgatory
from replication.core.fetch_validation import fence_leader_epoch, validate_fetch_position
from replication.core.high_watermark import NEVER_MS, ReplicaState, effective_min_isr
from replication.core.isr_manager import IsrManager
from replication.core.isr_state import AlterPartitionVerdict, PartitionState
from replication.core.log_view import PartitionLogView
from replication.core.messages import (
    ACKS_ALL,
    VALID_ACKS,
    AlterPartitionSend,
    BrokerStatus,
    FollowerFetch,
    LeaderAppend,
    LeaderFetchAnswer,
    PartitionProduce,
    ProduceCompletion,
)
from replication.core.producer_state import (
    ProducerStateManager,
    SequenceAccepted,
    SequenceDuplicate,
    SequenceRejected,
)
from storage.batch_validation import apply_topic_policy, validate_produced_batch
from storage.config import LogConfig
from storage.errors import ErrorCode, KraftError
from storage.records import BatchHeader


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderReady:
    """Work for the shell, from `PartitionLeader.ready`. The ordering contract:

    1. If ``assign_epoch_start`` is set, ``(epoch, offset)``: assign it in the log's epoch
       cache (``log.leader_epoch_cache.assign(epoch, offset)``, durable on return) before the
       leader handles any fetch.
    2. Publish ``high_watermark`` (consumers read below it; checkpoint it now and then) and
       wake parked fetches when it rose.
    3. Send ``produce_completions`` to the waiting producers (none for acks=0).
    4. Send ``alter_partition`` to the controller if set.
    5. Call `PartitionLeader.advance` with this Ready. Apply every Ready before the next input.
    """

    assign_epoch_start: tuple[int, int] | None = None
    high_watermark: int
    produce_completions: tuple[ProduceCompletion, ...] = ()
    alter_partition: AlterPartitionSend | None = None


_DEFAULT_LOG_CONFIG = LogConfig()


@dataclass(frozen=True, slots=True)
class _Appending:
    produce: PartitionProduce
    header: BatchHeader


@final
class PartitionLeader:
    """The leader of one partition in ``registration.leader_epoch``.

    Args:
        topic_partition: the partition.
        local_id / local_broker_epoch: this broker and its registered epoch (KIP-841).
        registration: the partition's metadata; ``registration.leader`` must be ``local_id``.
        brokers: metadata about the replicas' brokers (missing: not registered).
        log: the shell's read-only view of the partition log.
        producer_state: the partition's producer state, shared with the shell (which loads
            and snapshots it) and with the follower core that ran before this one.
        high_watermark: the HW this replica had (as follower or from its checkpoint).
        now_ms: the shell's clock now.
        log_config: the topic's log settings produces are validated against
            (``max.message.bytes``, ``message.timestamp.*.max.ms``): `storage.batch_validation`.
    """

    def __init__(
        self,
        *,
        topic_partition: TopicPartition,
        local_id: int,
        local_broker_epoch: int,
        registration: PartitionRegistration,
        brokers: Mapping[int, BrokerStatus],
        log: PartitionLogView,
        producer_state: ProducerStateManager,
        config: ReplicationConfig,
        high_watermark: int,
        now_ms: int,
        log_config: LogConfig = _DEFAULT_LOG_CONFIG,
        logger: FilteringBoundLogger | None = None,
    ) -> None:
        assert registration.leader == local_id, "PartitionLeader for a partition led elsewhere"
        self._tp = topic_partition
        self._local_id = local_id
        self._isr = IsrManager(
            topic_partition=topic_partition,
            local_id=local_id,
            local_broker_epoch=local_broker_epoch,
            brokers=brokers,
        )
        self._log = log
        self._producer_state = producer_state
        self._config = config
        self._log_config = log_config
        base = logger if logger is not None else structlog.get_logger("replication.leader")
        self._base_logger = base.bind(topic_partition=str(topic_partition), node_id=local_id)
        self._logger = self._base_logger
        # Invariant: log_start_offset <= high_watermark <= log_end_offset
        self._high_watermark = min(max(high_watermark, log.log_start_offset), log.log_end_offset)
        self._published_high_watermark = -1
        self._purgatory = DelayedProducePurgatory()
        self._completions: list[ProduceCompletion] = []
        self._alter_send: AlterPartitionSend | None = None
        self._assign_epoch_start: tuple[int, int] | None = None
        self._appending: _Appending | None = None
        self._resigned = False
        # Time as `next_deadline_ms` sees it: a deadline at or before the last tick was seen
        # by that tick; an input that may give `tick` new work now asks for one at once.
        self._last_tick_ms = NEVER_MS
        self._tick_wanted_at_ms: int | None = None
        # Set by _become_leader:
        self._leader_epoch = -1
        self._epoch_start_offset = 0
        self._become_leader(registration, now_ms, is_new_leader=True)

    # --- accessors ----------------------------------------------------------------------------

    @property
    def topic_partition(self) -> TopicPartition:
        return self._tp

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self._isr.partition_epoch

    @property
    def replicas(self) -> tuple[int, ...]:
        return self._isr.replicas

    @property
    def partition_state(self) -> PartitionState:
        return self._isr.state

    @property
    def isr(self) -> frozenset[int]:
        """The committed ISR."""
        return self._isr.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self._isr.maximal_isr

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def epoch_start_offset(self) -> int:
        """Where this leader epoch began (the LEO when it became leader)."""
        return self._epoch_start_offset

    @property
    def min_isr(self) -> int:
        """The effective min.insync.replicas (capped at the replication factor)."""
        return effective_min_isr(self._config.min_insync_replicas, len(self._isr.replicas))

    @property
    def is_under_min_isr(self) -> bool:
        return len(self._isr.isr) < self.min_isr

    @property
    def is_resigned(self) -> bool:
        return self._resigned

    @property
    def waiting_produces(self) -> int:
        return len(self._purgatory)

    def follower_state(self, replica_id: int) -> ReplicaState | None:
        return self._isr.follower_state(replica_id)

    # --- produce ------------------------------------------------------------------------------

    def handle_produce_request(self, produce: PartitionProduce, now_ms: int) -> LeaderAppend | None:
        """Validate a produce (Kafka's ``ReplicaManager.appendRecords`` and
        ``Partition.appendRecordsToLeader`` checks, in their order).

        Returns:
            A `LeaderAppend` the shell must append before any other input, or None when the
            produce was answered or is waiting (its `ProduceCompletion` comes in a Ready).
        """
        assert self._appending is None, "the previous LeaderAppend was not acknowledged"
        request_id = produce.request_id
        if self._resigned:
            self._answer(request_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, "no longer the leader")
            return None
        if produce.acks not in VALID_ACKS:
            self._answer(request_id, ErrorCode.INVALID_REQUIRED_ACKS, f"acks={produce.acks}")
            return None
        if produce.acks == ACKS_ALL and self.is_under_min_isr:
            message = f"ISR {sorted(self._isr.isr)} is below min.insync.replicas={self.min_isr}"
            self._answer(request_id, ErrorCode.NOT_ENOUGH_REPLICAS, message)
            return None
        try:
            # Kafka's LogValidator: one valid batch a client may write (a pure function of
            # the bytes; ~0.5 us per record). A rejected batch is never appended.
            header = validate_produced_batch(produce.records, self._log_config, now_ms)
            # Kafka's LogValidator: a compacted topic refuses records without a key; a topic
            # whose compression.type is not `producer` stores the batch in its own codec
            # (offsets and producer fields kept, CRC recomputed).
            records = apply_topic_policy(produce.records, header, self._log_config)
        except KraftError as e:
            self._logger.debug("produced_batch_rejected", request_id=request_id, error=e.message)
            self._answer(request_id, e.code, e.message)
            return None
        check = self._producer_state.check(header)
        match check:
            case SequenceRejected(error_code=code, message=message):
                self._answer(request_id, code, message)
                return None
            case SequenceDuplicate(batch=batch):
                self._logger.info(
                    "duplicate_batch", request_id=request_id, base_offset=batch.first_offset
                )
                self._after_append(produce, batch.first_offset, batch.last_offset, now_ms)
                return None
            case SequenceAccepted():
                self._appending = _Appending(produce, header)
                return LeaderAppend(
                    request_id=request_id,
                    records=records,
                    leader_epoch=Epoch(self._leader_epoch),
                )
            case _:
                assert_never(check)

    def on_appended(self, request_id: int, base_offset: int, now_ms: int) -> None:
        """The shell appended the `LeaderAppend` of ``request_id`` at ``base_offset``."""
        appending = self._appending
        assert appending is not None and appending.produce.request_id == request_id
        self._appending = None
        last_offset = base_offset + appending.header.last_offset_delta
        assert self._log.log_end_offset > last_offset, "on_appended before the append"
        self._producer_state.update(appending.header, base_offset)
        if self._maybe_increment_high_watermark(now_ms):
            self._try_complete_delayed()
        self._after_append(appending.produce, base_offset, last_offset, now_ms)

    def on_append_failed(self, request_id: int, error_code: ErrorCode, now_ms: int) -> None:
        """The shell's append of ``request_id`` raised a `KraftError` with ``error_code``
        (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, KAFKA_STORAGE_ERROR, ...): nothing was appended."""
        appending = self._appending
        assert appending is not None and appending.produce.request_id == request_id
        self._appending = None
        self._answer(request_id, error_code, "append failed")

    def _after_append(
        self, produce: PartitionProduce, base_offset: int, last_offset: int, now_ms: int
    ) -> None:
        if produce.acks != ACKS_ALL:
            self._answer(produce.request_id, ErrorCode.NONE, base_offset=base_offset)
            return
        self._purgatory.add(
            DelayedProduce(
                request_id=produce.request_id,
                base_offset=Offset(base_offset),
                required_offset=last_offset + 1,
                deadline_ms=now_ms + produce.timeout_ms,
            )
        )
        self._try_complete_delayed()
        self._expire_delayed(now_ms)

    # --- follower fetch -----------------------------------------------------------------------

    def handle_follower_fetch(self, fetch: FollowerFetch, now_ms: int) -> LeaderFetchAnswer:
        """Answer one partition of a follower's fetch (Kafka's ``Partition.fetchRecords``
        for a follower). Never raises for a stale or bad fetch: the answer carries the error."""
        assert self._assign_epoch_start is None, "apply the Ready before handling fetches"
        if self._resigned:
            return LeaderFetchAnswer(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        fenced = fence_leader_epoch(fetch.current_leader_epoch, self._leader_epoch)
        if fenced is None:
            fenced = self._isr.fence_fetch(fetch.replica_id, fetch.broker_epoch)
        if fenced is not None:
            return LeaderFetchAnswer(error_code=fenced)
        replica_id = fetch.replica_id
        # NB: the answer carries the HW as of before this fetch (``initialHighWatermark``).
        answer = validate_fetch_position(
            self._log,
            fetch_offset=fetch.fetch_offset,
            last_fetched_epoch=fetch.last_fetched_epoch,
            high_watermark=Offset(self._high_watermark),
        )
        if answer.diverging_epoch is not None:
            self._logger.info(
                "diverging_follower_answered",
                replica_id=replica_id,
                fetch_offset=fetch.fetch_offset,
                last_fetched_epoch=fetch.last_fetched_epoch,
                epoch=answer.diverging_epoch.epoch,
                end_offset=answer.diverging_epoch.end_offset,
            )
        if answer.read_offset is None:
            return answer  # no progress to record: an error or a divergence
        moved = self._isr.record_fetch(
            replica_id,
            fetch_offset=fetch.fetch_offset,
            log_start_offset=fetch.log_start_offset,
            now_ms=now_ms,
            leader_log_end_offset=answer.log_end_offset,
            broker_epoch=fetch.broker_epoch,
        )
        if replica_id not in self._isr.isr:
            self._maybe_expand_isr(replica_id)
        if moved and self._maybe_increment_high_watermark(now_ms):
            self._try_complete_delayed()
        return answer

    # --- controller and metadata --------------------------------------------------------------

    def handle_alter_partition_response(
        self, alter_id: int, result: AlterPartitionPartitionResult, now_ms: int
    ) -> None:
        """Take the controller's result for the `AlterPartitionSend` ``alter_id``. A
        request-level error (NOT_CONTROLLER, STALE_BROKER_EPOCH, a transport failure) comes as
        a result carrying that code; such errors are retried after a backoff."""
        if self._resigned:
            return
        before = self._isr.state
        verdict = self._isr.handle_alter_partition_result(
            alter_id,
            result,
            leader_epoch=self._leader_epoch,
            now_ms=now_ms,
            retry_backoff_ms=self._config.alter_partition_retry_backoff_ms,
        )
        if verdict is not AlterPartitionVerdict.IGNORED:
            self._logger.info(
                "alter_partition_answered",
                verdict=verdict.value,
                error=result.error_code.name,
                isr=sorted(self._isr.isr),
                partition_epoch=self._isr.partition_epoch,
            )
        if verdict is not AlterPartitionVerdict.IGNORED:
            self._want_tick(now_ms)
        if verdict is AlterPartitionVerdict.ADOPTED:
            self._on_isr_committed(before, now_ms)

    def handle_partition_change(self, registration: PartitionRegistration, now_ms: int) -> bool:
        """Apply the partition's latest metadata (a PartitionChange or Partition record).

        Returns:
            False if this broker no longer leads the partition: the leader has resigned and
            the shell must replace it (with a `PartitionFollower`, or nothing).
        """
        if self._resigned:
            return False
        if registration.leader != self._local_id:
            self.resign(now_ms)
            return False
        if registration.leader_epoch < self._leader_epoch:
            return True  # stale metadata
        before = self._isr.state
        if registration.leader_epoch > self._leader_epoch:
            self._become_leader(registration, now_ms, is_new_leader=False)
            self._on_isr_committed(before, now_ms)
            return True
        if not self._isr.adopt_metadata(
            registration, leader_log_end_offset=self._log.log_end_offset, now_ms=now_ms
        ):
            return True
        self._alter_send = None  # if not sent yet: moot now
        self._want_tick(now_ms)
        self._logger.info(
            "isr_committed_by_metadata",
            isr=sorted(self._isr.isr),
            partition_epoch=self._isr.partition_epoch,
        )
        self._on_isr_committed(before, now_ms)
        return True

    def update_brokers(self, brokers: Mapping[int, BrokerStatus], now_ms: int) -> None:
        """Broker registrations changed (fencing, controlled shutdown, a new broker epoch)."""
        self._isr.update_brokers(brokers)
        if self._resigned:
            return
        self._want_tick(now_ms)
        if self._maybe_increment_high_watermark(now_ms):
            self._try_complete_delayed()

    def update_config(self, config: ReplicationConfig, now_ms: int) -> None:
        """The topic's config changed (a dynamic ``min.insync.replicas``): take it at once, as
        Kafka applies dynamic topic configs live. A lower minimum may let the high watermark
        move and complete waiting produces; a higher one freezes the high watermark, rejects
        new acks=all produces (NOT_ENOUGH_REPLICAS) and fails the waiting ones
        (NOT_ENOUGH_REPLICAS_AFTER_APPEND) while the ISR is below it."""
        if config == self._config:
            return
        old_min_isr = self.min_isr
        self._config = config
        if self._resigned:
            return
        self._want_tick(now_ms)
        self._logger.info(
            "replication_config_updated",
            min_insync_replicas=config.min_insync_replicas,
            effective_min_isr=self.min_isr,
            old_effective_min_isr=old_min_isr,
        )
        self._maybe_increment_high_watermark(now_ms)
        self._try_complete_delayed()

    def update_log_config(self, config: LogConfig) -> None:
        """The topic's log config changed (``max.message.bytes``, ...): produces validate
        against it from now on."""
        self._log_config = config

    def resign(self, now_ms: int) -> None:
        """Stop leading: every waiting produce fails with NOT_LEADER_OR_FOLLOWER."""
        if self._resigned:
            return
        assert self._appending is None
        self._resigned = True
        self._alter_send = None
        self._completions.extend(
            self._purgatory.fail_all(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                message="the leader changed",
                log_start_offset=self._log.log_start_offset,
            )
        )
        self._logger.info("resigned", leader_epoch=self._leader_epoch)

    # --- time ---------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Let time pass: expire produces, retry an AlterPartition, shrink the ISR, and let the
        HW pass a follower outside the ISR that is no longer caught up."""
        if self._resigned:
            return
        self._last_tick_ms = max(self._last_tick_ms, now_ms)
        self._tick_wanted_at_ms = None
        self._expire_delayed(now_ms)
        retry_at_ms = self._isr.retry_at_ms
        if retry_at_ms is not None and retry_at_ms <= now_ms:
            self._alter_send = self._isr.send_pending()
        self._maybe_shrink_isr(now_ms)
        # NB: expansion is decided on fetches only, as in Kafka (followers fetch continuously).
        if self._maybe_increment_high_watermark(now_ms):
            self._try_complete_delayed()

    def next_deadline_ms(self) -> int | None:
        """When `tick` next has work (absolute; at or before now: at once): a produce
        deadline, an AlterPartition retry, a follower's caught-up window ending after the last
        tick, or an input since then that changed what a tick decides on. None: no timer."""
        if self._resigned:
            return None
        times: list[int] = []
        if self._tick_wanted_at_ms is not None:
            times.append(self._tick_wanted_at_ms)
        deadline = self._purgatory.next_deadline_ms()
        if deadline is not None:
            times.append(deadline)
        if self._isr.retry_at_ms is not None:
            times.append(self._isr.retry_at_ms)
        times += self._isr.caught_up_deadlines(
            leader_log_end_offset=self._log.log_end_offset,
            after_ms=self._last_tick_ms,
            replica_lag_time_ms_max=self._config.replica_lag_time_ms_max,
        )
        return min(times, default=None)

    # --- ready / advance ----------------------------------------------------------------------

    def has_ready(self) -> bool:
        return bool(
            self._completions
            or self._alter_send is not None
            or self._assign_epoch_start is not None
            or self._high_watermark != self._published_high_watermark
        )

    def ready(self) -> LeaderReady:
        """What the shell must apply, publish and send now (see `LeaderReady`)."""
        return LeaderReady(
            assign_epoch_start=self._assign_epoch_start,
            high_watermark=self._high_watermark,
            produce_completions=tuple(self._completions),
            alter_partition=self._alter_send,
        )

    def advance(self, ready: LeaderReady) -> None:
        """The shell applied ``ready``."""
        del self._completions[: len(ready.produce_completions)]
        if self._alter_send is ready.alter_partition:
            self._alter_send = None
        if self._assign_epoch_start == ready.assign_epoch_start:
            self._assign_epoch_start = None
        self._published_high_watermark = ready.high_watermark

    # --- internals ----------------------------------------------------------------------------

    def _become_leader(
        self, registration: PartitionRegistration, now_ms: int, *, is_new_leader: bool
    ) -> None:
        self._leader_epoch = registration.leader_epoch
        self._alter_send = None
        log_end_offset = self._log.log_end_offset
        # KIP-101: this epoch starts at our LEO; followers ask where it (and older ones) ended.
        self._epoch_start_offset = log_end_offset
        if self._log.leader_epoch_cache.latest_epoch != self._leader_epoch:
            self._assign_epoch_start = (self._leader_epoch, log_end_offset)
        self._isr.become_leader(
            registration,
            leader_log_end_offset=log_end_offset,
            now_ms=now_ms,
            is_new_leader=is_new_leader,
        )
        self._logger = self._base_logger.bind(role="leader", leader_epoch=self._leader_epoch)
        self._logger.info(
            "became_leader",
            log_end_offset=log_end_offset,
            high_watermark=self._high_watermark,
            isr=sorted(self._isr.isr),
            partition_epoch=self._isr.partition_epoch,
        )
        self._maybe_increment_high_watermark(now_ms)
        self._want_tick(now_ms)

    def _want_tick(self, now_ms: int) -> None:
        """An input changed what `tick` decides on (the ISR state, the brokers, the config):
        `next_deadline_ms` asks for a tick at ``now_ms`` (a shrink the old state blocked may be
        due now)."""
        if self._tick_wanted_at_ms is None:
            self._tick_wanted_at_ms = now_ms

    def _maybe_increment_high_watermark(self, now_ms: int) -> bool:
        candidate = self._isr.high_watermark_candidate(
            leader_log_end_offset=self._log.log_end_offset,
            min_isr=self.min_isr,
            now_ms=now_ms,
            replica_lag_time_ms_max=self._config.replica_lag_time_ms_max,
        )
        if candidate is None or candidate <= self._high_watermark:
            return False
        assert candidate <= self._log.log_end_offset
        self._logger.debug("high_watermark_advanced", old=self._high_watermark, new=candidate)
        self._high_watermark = candidate
        return True

    def _try_complete_delayed(self) -> None:
        self._completions.extend(
            self._purgatory.recheck(
                self._high_watermark,
                maximal_isr_size=len(self._isr.maximal_isr),
                isr_size=len(self._isr.isr),
                min_isr=self.min_isr,
                log_start_offset=self._log.log_start_offset,
            )
        )

    def _expire_delayed(self, now_ms: int) -> None:
        self._completions.extend(
            self._purgatory.expire(now_ms, log_start_offset=self._log.log_start_offset)
        )

    def _answer(
        self, request_id: int, error: ErrorCode, message: str = "", *, base_offset: int = -1
    ) -> None:
        self._completions.append(
            ProduceCompletion(
                request_id=request_id,
                error_code=error,
                error_message=message,
                base_offset=Offset(base_offset),
                log_start_offset=Offset(self._log.log_start_offset),
            )
        )

    def _on_isr_committed(self, before: PartitionState, now_ms: int) -> None:
        if before.isr != self._isr.isr:
            self._logger.info("isr_changed", old=sorted(before.isr), new=sorted(self._isr.isr))
        self._maybe_increment_high_watermark(now_ms)
        self._try_complete_delayed()

    def _maybe_shrink_isr(self, now_ms: int) -> None:
        pending = self._isr.maybe_shrink(
            leader_epoch=self._leader_epoch,
            leader_log_end_offset=self._log.log_end_offset,
            now_ms=now_ms,
            replica_lag_time_ms_max=self._config.replica_lag_time_ms_max,
        )
        if pending is None:
            return
        self._logger.info(
            "isr_shrink_requested",
            out_of_sync=sorted(pending.out_of_sync_replica_ids),
            isr=sorted(pending.isr - pending.out_of_sync_replica_ids),
        )
        self._alter_send = self._isr.send_pending()

    def _maybe_expand_isr(self, replica_id: int) -> None:
        pending = self._isr.maybe_expand(
            replica_id,
            leader_epoch=self._leader_epoch,
            high_watermark=self._high_watermark,
            epoch_start_offset=self._epoch_start_offset,
        )
        if pending is None:
            return
        self._logger.info(
            "isr_expand_requested", replica_id=replica_id, isr=sorted(pending.maximal_isr)
        )
        self._alter_send = self._isr.send_pending()


__all__ = ["LeaderReady", "PartitionLeader"]
