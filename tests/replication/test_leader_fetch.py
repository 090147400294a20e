"""The leader's side of follower fetches: epoch fencing (KIP-320), divergence answers
(KIP-101/279), follower progress and the high-watermark rule (KIP-497, KIP-966)."""

from __future__ import annotations

import pytest

from replication.core import (
    BrokerStatus,
    CommittedPartitionState,
    DivergingEpoch,
    PendingExpandIsr,
    PendingShrinkIsr,
)
from storage.errors import ErrorCode
from tests.replication.builder import LAG_MS, LeaderContext, broker_epoch
from tests.replication.harness import MemoryLog, batch


def test_fetch_with_an_older_leader_epoch_is_fenced() -> None:
    ctx = LeaderContext(leader_epoch=5)
    answer = ctx.fetch(2, 0, current_leader_epoch=4)
    assert answer.error_code is ErrorCode.FENCED_LEADER_EPOCH
    assert ctx.leader.follower_state(2).log_end_offset == -1  # type: ignore[union-attr]


def test_fetch_with_a_newer_leader_epoch_is_unknown_leader_epoch() -> None:
    ctx = LeaderContext(leader_epoch=5)
    assert ctx.fetch(2, 0, current_leader_epoch=6).error_code is ErrorCode.UNKNOWN_LEADER_EPOCH


def test_fetch_without_a_leader_epoch_is_not_fenced() -> None:
    ctx = LeaderContext(leader_epoch=5)
    assert ctx.fetch(2, 0, current_leader_epoch=-1).error_code is ErrorCode.NONE


def test_fetch_from_a_broker_that_is_not_a_replica_is_rejected() -> None:
    ctx = LeaderContext(replicas=(1, 2, 3))
    assert ctx.fetch(4, 0).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ctx.fetch(1, 0).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_fetch_from_an_older_broker_incarnation_is_rejected() -> None:
    """KIP-380: the metadata knows a newer broker epoch than the fetch carries."""
    ctx = LeaderContext()
    answer = ctx.fetch(2, 0, broker_epoch_=broker_epoch(2) - 1)
    assert answer.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize(
    ("claimed_epoch", "expected"),
    [
        (-1, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # no epoch at all: once skipped every check
        (broker_epoch(2) - 1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (broker_epoch(2) + 1, ErrorCode.UNKNOWN_LEADER_EPOCH),
        (10**12, ErrorCode.UNKNOWN_LEADER_EPOCH),
    ],
)
def test_a_spoofed_follower_fetch_moves_neither_the_high_watermark_nor_the_isr(
    claimed_epoch: int, expected: ErrorCode
) -> None:
    """Issue 10, finding 7: a Fetch that claims replica 2 without replica 2's registered
    broker epoch (KIP-903) is refused: no records, no ISR expansion, no HW advance."""
    ctx = LeaderContext(replicas=(1, 2), isr=(1,))
    ctx.fill(4)
    ctx.produce(acks=-1)  # waits for the ISR
    hw = ctx.high_watermark
    answer = ctx.fetch(2, ctx.log.log_end_offset, broker_epoch_=claimed_epoch)
    assert answer.error_code is expected and answer.read_offset is None
    assert ctx.alter_sends == [] and ctx.leader.isr == {1}
    assert ctx.high_watermark == hw
    assert ctx.leader.follower_state(2).log_end_offset == -1  # type: ignore[union-attr]


def test_a_fetch_for_a_replica_the_metadata_has_no_registration_for_is_refused() -> None:
    ctx = LeaderContext(replicas=(1, 2, 3), brokers={1: BrokerStatus(broker_epoch=101)})
    assert ctx.fetch(2, 0).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def _log_with_epochs(*runs: tuple[int, int]) -> MemoryLog:
    """A log holding ``count`` records of ``epoch`` for each ``(epoch, count)``."""
    log = MemoryLog()
    for epoch, count in runs:
        for _ in range(count):
            log.append(batch(b"r"), leader_epoch=epoch)
    return log


def test_diverging_follower_is_answered_with_the_epoch_end_offset() -> None:
    """KIP-279: the follower's last epoch 2 ended at offset 3 on the leader, before the
    follower's fetch offset 5."""
    log = _log_with_epochs((1, 2), (2, 1), (4, 3))  # epoch 2 = [2, 3), epoch 4 = [3, 6)
    ctx = LeaderContext(leader_epoch=5, log=log, high_watermark=3)
    answer = ctx.fetch(2, 5, last_fetched_epoch=2)
    assert answer.error_code is ErrorCode.NONE
    assert answer.diverging_epoch == DivergingEpoch(epoch=2, end_offset=3)
    assert answer.read_offset is None
    assert ctx.leader.follower_state(2).log_end_offset == -1  # type: ignore[union-attr]


def test_follower_epoch_unknown_to_the_leader_is_answered_with_the_largest_epoch_below() -> None:
    log = _log_with_epochs((1, 2), (4, 3))
    ctx = LeaderContext(leader_epoch=5, log=log)
    answer = ctx.fetch(2, 3, last_fetched_epoch=3)
    assert answer.diverging_epoch == DivergingEpoch(epoch=1, end_offset=2)


def test_follower_whose_epoch_matches_is_not_diverging() -> None:
    log = _log_with_epochs((1, 2), (4, 3))
    ctx = LeaderContext(leader_epoch=5, log=log)
    answer = ctx.fetch(2, 2, last_fetched_epoch=1)
    assert answer.diverging_epoch is None and answer.read_offset == 2


def test_fetch_offset_past_the_log_end_is_out_of_range() -> None:
    ctx = LeaderContext()
    ctx.fill(2)
    answer = ctx.fetch(2, 3, last_fetched_epoch=-1)
    assert answer.error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert (answer.log_start_offset, answer.high_watermark) == (0, 0)


def test_fetch_answer_carries_the_high_watermark_from_before_the_fetch() -> None:
    """Kafka's ``readRecords`` answers ``initialHighWatermark``: a follower learns that its
    own fetch advanced the HW on its next fetch."""
    ctx = LeaderContext(replicas=(1, 2))
    ctx.fill(2)
    answer = ctx.fetch(2, 2)
    assert answer.high_watermark == 0 and ctx.high_watermark == 2
    assert ctx.fetch(2, 2).high_watermark == 2


def test_high_watermark_is_the_minimum_log_end_offset_over_the_isr() -> None:
    ctx = LeaderContext(replicas=(1, 2, 3))
    ctx.fill(5)
    ctx.fetch(2, 4)
    ctx.fetch(3, 2)
    assert ctx.high_watermark == 2
    ctx.fetch(3, 5)
    assert ctx.high_watermark == 4
    ctx.fetch(2, 5)
    assert ctx.high_watermark == 5


def test_high_watermark_ignores_a_lagging_follower_outside_the_isr() -> None:
    ctx = LeaderContext(replicas=(1, 2, 3), isr=(1, 2))
    ctx.fill(4)
    ctx.fetch(2, 4)
    assert ctx.high_watermark == 4
    ctx.fetch(3, 1)  # behind the HW: not joining the ISR
    assert isinstance(ctx.leader.partition_state, CommittedPartitionState)
    ctx.fill(2)
    ctx.fetch(2, 6)
    assert ctx.high_watermark == 6


def test_high_watermark_waits_for_a_caught_up_follower_about_to_join_the_isr() -> None:
    """Kafka's ``shouldWaitForReplicaToJoinIsr``: a follower outside the ISR that is caught up
    and eligible holds the HW, so it is not left behind it for ever."""
    ctx = LeaderContext(replicas=(1, 2, 3), isr=(1,))
    ctx.fetch(2, 0)  # joins: an expand to {1, 2} is in flight
    ctx.fetch(3, 0)  # caught up too, but must wait for the next AlterPartition
    assert ctx.leader.maximal_isr == {1, 2}
    ctx.fill(3)
    ctx.fetch(2, 3)
    assert ctx.high_watermark == 0, "follower 3 holds the HW"
    ctx.fetch(3, 2)
    assert ctx.high_watermark == 2
    ctx.tick(LAG_MS + 1)  # 3 is no longer caught up: it stops holding the HW
    assert ctx.high_watermark == 3


def test_high_watermark_does_not_advance_while_isr_is_below_min_insync_replicas() -> None:
    """KIP-966 (Kafka 3.7+): "The HW can only advance if the ISR size is equal or larger than
    the min ISR"."""
    ctx = LeaderContext(replicas=(1, 2, 3), isr=(1,), min_isr=2)
    ctx.fill(3)
    assert ctx.high_watermark == 0
    ctx.commit_metadata(isr=(1, 2))
    assert ctx.high_watermark == 0, "follower 2 has not fetched in this epoch"
    ctx.fetch(2, 3)
    assert ctx.high_watermark == 3


def test_pending_expand_counts_the_joining_follower_in_the_high_watermark() -> None:
    """KIP-497: the maximal ISR includes a replica the leader asked to add."""
    ctx = LeaderContext(replicas=(1, 2), isr=(1,))
    ctx.fill(2)
    ctx.fetch(2, 2)  # reaches the HW (2): expand requested
    assert isinstance(ctx.leader.partition_state, PendingExpandIsr)
    ctx.fill(2)
    assert ctx.high_watermark == 2, "waits for follower 2 although it is not committed yet"
    ctx.fetch(2, 4)
    assert ctx.high_watermark == 4


def test_pending_shrink_keeps_waiting_for_the_leaving_follower() -> None:
    ctx = LeaderContext(replicas=(1, 2, 3))
    ctx.fill(1)
    ctx.catch_up(2, 3)
    ctx.fill(2)
    ctx.tick(LAG_MS // 2)
    ctx.catch_up(3)
    assert ctx.high_watermark == 1
    ctx.tick(LAG_MS // 2 + 1)  # 2 has lagged for longer than the max: shrink requested
    assert isinstance(ctx.leader.partition_state, PendingShrinkIsr)
    ctx.fill(2)
    ctx.catch_up(3)
    assert ctx.high_watermark == 1, "the maximal ISR still holds follower 2"
    ctx.respond_alter()
    assert ctx.leader.isr == {1, 3}
    assert ctx.high_watermark == 5


def test_new_leader_keeps_its_old_high_watermark_and_starts_its_epoch_at_its_log_end() -> None:
    """KIP-101: a new leader starts its epoch at its LEO; its HW is the one it had as a
    follower (it does not move back, and moves up only as followers fetch)."""
    log = _log_with_epochs((1, 4))
    ctx = LeaderContext(leader_epoch=2, log=log, high_watermark=3)
    assert ctx.high_watermark == 3
    assert ctx.leader.epoch_start_offset == 4
    assert log.leader_epoch_cache.end_offset_for(1) == (1, 4)
    assert log.leader_epoch_cache.latest_epoch == 2
    ctx.catch_up(2, 3)
    assert ctx.high_watermark == 4


def test_new_leader_with_only_itself_in_the_isr_commits_its_whole_log() -> None:
    log = _log_with_epochs((1, 4))
    ctx = LeaderContext(leader_epoch=2, isr=(1,), log=log, high_watermark=1)
    assert ctx.high_watermark == 4


def test_leader_high_watermark_never_moves_back_when_the_isr_grows() -> None:
    ctx = LeaderContext(replicas=(1, 2), isr=(1,))
    ctx.fill(3)
    assert ctx.high_watermark == 3
    ctx.commit_metadata(isr=(1, 2))
    ctx.fetch(2, 1)
    assert ctx.high_watermark == 3
    assert isinstance(ctx.leader.partition_state, CommittedPartitionState)


def test_epoch_bump_while_leading_keeps_waiting_produces() -> None:
    ctx = LeaderContext(replicas=(1, 2))
    rid = ctx.produce(acks=-1)
    assert ctx.commit_metadata(new_epoch=True)
    assert ctx.leader.leader_epoch == 2 and ctx.log.leader_epoch_cache.latest_epoch == 2
    assert rid not in ctx.completions
    ctx.fetch(2, 1, last_fetched_epoch=1)
    assert ctx.completions[rid].error_code is ErrorCode.NONE
