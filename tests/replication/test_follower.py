"""The follower's fetch loop: what it asks for and what it does with each answer
(KIP-101/279 truncation, KIP-320 fencing, out-of-range handling, producer state)."""

from __future__ import annotations

from pathlib import Path

from kraft.metadata.image import PartitionRegistration
from replication.core import (
    DivergingEpoch,
    FollowerFetchRequest,
    FollowerFetchResponse,
    PartitionFollower,
    ProducerStateManager,
    ReplicationConfig,
    TruncationStrategy,
)
from storage.errors import ErrorCode
from storage.log import SegmentedLog
from tests.replication.harness import QUIET, TP, MemoryLog, batch

LOCAL, LEADER = 2, 1
BACKOFF_MS = 1_000


def _leader_batches(*runs: tuple[int, int], start: int = 0, producer_id: int = -1) -> bytes:
    """Batches as a leader serves them: ``(epoch, count)`` runs of single-record batches."""
    scratch = MemoryLog()
    scratch.truncate_fully_and_start_at(start)
    seq = 0
    for epoch, count in runs:
        for _ in range(count):
            records = batch(b"r", producer_id=producer_id, producer_epoch=0, base_sequence=seq)
            if producer_id >= 0:
                seq += 1
            scratch.append(records, leader_epoch=epoch)
    return scratch.read(start)


class FollowerContext:
    def __init__(
        self,
        *,
        log: MemoryLog | SegmentedLog | None = None,
        leader_epoch: int = 5,
        high_watermark: int = 0,
        strategy: TruncationStrategy = TruncationStrategy.LEADER_EPOCH,
    ) -> None:
        self.now_ms = 0
        self.log = log or MemoryLog()
        self.producer_state = ProducerStateManager()
        if isinstance(self.log, MemoryLog):
            self.producer_state.load_from_batches(self.log.headers())
        self.published: list[int] = []
        self.follower = PartitionFollower(
            topic_partition=TP,
            local_id=LOCAL,
            local_broker_epoch=77,
            leader_id=LEADER,
            leader_epoch=leader_epoch,
            log=self.log,
            producer_state=self.producer_state,
            config=ReplicationConfig(replica_fetch_backoff_ms=BACKOFF_MS),
            high_watermark=high_watermark,
            now_ms=self.now_ms,
            truncation_strategy=strategy,
            logger=QUIET,
        )
        self.drain()

    def drain(self) -> None:
        f = self.follower
        while f.has_ready():
            rd = f.ready()
            if rd.truncate_fully_and_start_at is not None:
                self.log.truncate_fully_and_start_at(rd.truncate_fully_and_start_at)
            if rd.truncate_to is not None:
                self.log.truncate_to(rd.truncate_to)  # as the shell: the log trims its epochs
            if rd.append:
                self.log.append_as_follower(rd.append)
            if rd.rebuild_producer_state:
                assert isinstance(self.log, MemoryLog)
                self.producer_state.reload(None, self.log.headers())
            self.published.append(rd.high_watermark)
            f.advance(rd)

    def request(self) -> FollowerFetchRequest:
        request = self.follower.build_fetch_request(self.now_ms)
        assert request is not None
        return request

    def answer(self, request: FollowerFetchRequest, **fields: object) -> None:
        response = FollowerFetchResponse(fetch_id=request.fetch_id, **fields)  # type: ignore[arg-type]
        self.follower.handle_fetch_response(response, self.now_ms)
        self.drain()


def _log(*runs: tuple[int, int]) -> MemoryLog:
    log = MemoryLog()
    log.append_as_follower(_leader_batches(*runs))
    return log


def test_fetch_asks_from_the_log_end_with_the_last_epoch_and_the_leader_epoch() -> None:
    ctx = FollowerContext(log=_log((1, 2), (3, 2)), leader_epoch=5)
    request = ctx.request()
    assert (request.fetch_offset, request.last_fetched_epoch) == (4, 3)
    assert (request.leader_id, request.current_leader_epoch) == (LEADER, 5)
    assert (request.replica_id, request.broker_epoch) == (LOCAL, 77)


def test_empty_log_fetches_without_an_epoch() -> None:
    assert FollowerContext().request().last_fetched_epoch == -1


def test_one_fetch_in_flight_and_stale_responses_are_dropped() -> None:
    ctx = FollowerContext()
    request = ctx.request()
    assert ctx.follower.build_fetch_request(ctx.now_ms) is None
    ctx.follower.handle_fetch_response(
        FollowerFetchResponse(fetch_id=request.fetch_id + 1, records=_leader_batches((5, 1))), 0
    )
    ctx.drain()
    assert ctx.log.log_end_offset == 0 and ctx.follower.fetch_in_flight is request


def test_records_are_appended_and_the_hw_is_min_of_leader_hw_and_own_log_end() -> None:
    ctx = FollowerContext()
    ctx.answer(ctx.request(), high_watermark=5, records=_leader_batches((5, 3)))
    assert ctx.log.log_end_offset == 3
    assert ctx.follower.high_watermark == 3
    ctx.answer(ctx.request(), high_watermark=2)
    assert ctx.follower.high_watermark == 2


def test_a_partial_trailing_batch_is_left_for_the_next_fetch() -> None:
    ctx = FollowerContext()
    data = _leader_batches((5, 2))
    ctx.answer(ctx.request(), high_watermark=0, records=data[:-5])
    assert ctx.log.log_end_offset == 1
    assert ctx.request().fetch_offset == 1


def test_diverging_epoch_truncates_to_the_leader_end_offset_not_the_high_watermark() -> None:
    """KIP-101: "truncate to the leader's epoch end offset, never to its own HW" -- here the
    HW (1) is below the divergence point (3): truncating to it would drop records the
    leader has."""
    ctx = FollowerContext(log=_log((1, 3), (3, 2)), high_watermark=1)
    request = ctx.request()
    assert request.last_fetched_epoch == 3
    ctx.answer(request, high_watermark=1, diverging_epoch=DivergingEpoch(epoch=1, end_offset=3))
    assert ctx.log.log_end_offset == 3
    assert ctx.log.leader_epoch_cache.latest_epoch == 1
    assert ctx.request().last_fetched_epoch == 1


def test_diverging_epoch_is_capped_by_the_follower_own_end_of_that_epoch() -> None:
    """KIP-279: truncate to min(leader end offset of E, own end offset of E)."""
    ctx = FollowerContext(log=_log((1, 1), (2, 1)))
    ctx.answer(
        ctx.request(), high_watermark=0, diverging_epoch=DivergingEpoch(epoch=1, end_offset=3)
    )
    assert ctx.log.log_end_offset == 1


def test_diverging_epoch_unknown_to_the_follower_truncates_to_its_own_epoch_below() -> None:
    """KIP-279: the leader answers epoch 3, which this log never had: cut back to the end of
    our largest epoch below 3 (epoch 2 ends at 4) and ask again."""
    ctx = FollowerContext(log=_log((2, 4), (4, 2)))
    ctx.answer(
        ctx.request(), high_watermark=0, diverging_epoch=DivergingEpoch(epoch=3, end_offset=5)
    )
    assert ctx.log.log_end_offset == 4
    assert ctx.request().last_fetched_epoch == 2


def test_stale_epoch_entry_without_batches_is_dropped_by_truncation() -> None:
    """A replica that led epoch 4 without appending keeps an entry (4, LEO); as Kafka's
    ``UnifiedLog.truncateTo``, a truncation to the log end removes it."""
    log = _log((2, 3))
    log.leader_epoch_cache.assign(4, 3)
    ctx = FollowerContext(log=log, leader_epoch=6)
    request = ctx.request()
    assert request.last_fetched_epoch == 4
    ctx.answer(request, high_watermark=0, diverging_epoch=DivergingEpoch(epoch=2, end_offset=7))
    assert ctx.log.log_end_offset == 3 and ctx.log.leader_epoch_cache.latest_epoch == 2


def test_empty_epoch_at_the_log_end_of_a_segmented_log_does_not_livelock_the_fetch(
    tmp_path: Path,
) -> None:
    """The soak's stall: a replica led epoch 4 at its log end (3) without appending; the
    leader has one more epoch-2 record. Diverging epoch (2, ends at 4) -> truncate to 3 (the
    log end, no offset removed). The real log must drop the entry (4, 3) then, or the next
    fetch says last epoch 4 again and the leader answers the same divergence forever."""
    log = SegmentedLog.open(tmp_path)
    log.append_as_follower(_leader_batches((2, 3)))
    log.assign_leader_epoch(4, 3)
    ctx = FollowerContext(log=log, leader_epoch=6)
    request = ctx.request()
    assert request.last_fetched_epoch == 4
    ctx.answer(request, high_watermark=0, diverging_epoch=DivergingEpoch(epoch=2, end_offset=4))
    request = ctx.request()
    assert (request.fetch_offset, request.last_fetched_epoch) == (3, 2)
    ctx.answer(request, high_watermark=4, records=_leader_batches((2, 1), start=3))
    assert ctx.log.log_end_offset == 4 and ctx.follower.high_watermark == 4


def test_fenced_leader_epoch_waits_for_metadata() -> None:
    ctx = FollowerContext()
    ctx.answer(ctx.request(), error_code=ErrorCode.FENCED_LEADER_EPOCH)
    assert ctx.follower.awaiting_metadata
    ctx.now_ms += 10 * BACKOFF_MS
    assert ctx.follower.build_fetch_request(ctx.now_ms) is None
    registration = PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=3, leader_epoch=6)
    assert ctx.follower.handle_partition_change(registration, ctx.now_ms)
    request = ctx.request()
    assert (request.leader_id, request.current_leader_epoch) == (3, 6)


def test_unknown_leader_epoch_retries_after_the_backoff() -> None:
    """The leader has not seen our epoch yet: Kafka retries (it is not our metadata that lags)."""
    ctx = FollowerContext()
    ctx.answer(ctx.request(), error_code=ErrorCode.UNKNOWN_LEADER_EPOCH)
    assert not ctx.follower.awaiting_metadata
    assert ctx.follower.build_fetch_request(BACKOFF_MS - 1) is None
    assert ctx.follower.next_deadline_ms() == BACKOFF_MS
    assert ctx.follower.build_fetch_request(BACKOFF_MS) is not None


def test_out_of_range_below_the_leader_log_start_truncates_fully() -> None:
    ctx = FollowerContext(log=_log((1, 2)), high_watermark=2)
    ctx.answer(ctx.request(), error_code=ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=10)
    assert (ctx.log.log_start_offset, ctx.log.log_end_offset) == (10, 10)
    assert ctx.follower.high_watermark == 10
    ctx.answer(ctx.request(), high_watermark=12, records=_leader_batches((5, 2), start=10))
    assert ctx.log.log_end_offset == 12


def test_out_of_range_above_the_leader_log_end_truncates_to_its_high_watermark() -> None:
    ctx = FollowerContext(log=_log((1, 5)))
    ctx.answer(
        ctx.request(),
        error_code=ErrorCode.OFFSET_OUT_OF_RANGE,
        log_start_offset=0,
        high_watermark=3,
    )
    assert ctx.log.log_end_offset == 3


def test_follower_becoming_leader_is_told_to_hand_over() -> None:
    ctx = FollowerContext()
    registration = PartitionRegistration(replicas=(1, 2), isr=(2,), leader=LOCAL, leader_epoch=6)
    assert not ctx.follower.handle_partition_change(registration, 0)


def test_high_watermark_strategy_truncates_to_the_hw_on_every_leader_change() -> None:
    """Kafka before KIP-101 (tests only): makeFollower truncated to the high watermark, and
    fetches carry no epoch."""
    ctx = FollowerContext(
        log=_log((1, 5)), high_watermark=2, strategy=TruncationStrategy.HIGH_WATERMARK
    )
    assert ctx.log.log_end_offset == 2
    assert ctx.request().last_fetched_epoch == -1


def test_appended_batches_update_the_producer_state() -> None:
    """KIP-98: followers keep producer state too, so it survives a failover."""
    ctx = FollowerContext()
    ctx.answer(ctx.request(), high_watermark=0, records=_leader_batches((5, 3), producer_id=42))
    entry = ctx.producer_state.entry(42)
    assert entry is not None and entry.last_sequence == 2
    assert [b.first_offset for b in entry.batches] == [0, 1, 2]


def test_truncation_rolls_the_producer_state_back() -> None:
    ctx = FollowerContext()
    ctx.answer(ctx.request(), high_watermark=0, records=_leader_batches((5, 3), producer_id=42))
    ctx.answer(
        ctx.request(), high_watermark=0, diverging_epoch=DivergingEpoch(epoch=5, end_offset=1)
    )
    entry = ctx.producer_state.entry(42)
    assert entry is not None and entry.last_sequence == 0
    assert ctx.producer_state.map_end_offset == 1


def test_inexact_producer_state_truncation_asks_the_shell_to_rebuild_it() -> None:
    ctx = FollowerContext()
    ctx.answer(ctx.request(), high_watermark=0, records=_leader_batches((5, 7), producer_id=42))
    ctx.answer(
        ctx.request(), high_watermark=0, diverging_epoch=DivergingEpoch(epoch=5, end_offset=1)
    )
    # The window held batches 2..6 only; the rebuild from the log restores batch 0.
    entry = ctx.producer_state.entry(42)
    assert entry is not None and entry.last_sequence == 0
    assert ctx.published[-1] == 0
