"""ISR shrink and expand through AlterPartition (KIP-497, KIP-841), one request at a time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kraft.controller.messages import (
    AlterPartitionData,
    AlterPartitionPartitionResult,
    BrokerEpochState,
)
from replication.core import (
    AlterPartitionVerdict,
    BrokerStatus,
    CommittedPartitionState,
    PartitionState,
    PendingExpandIsr,
    PendingShrinkIsr,
    handle_alter_partition_result,
)
from storage.errors import ErrorCode
from tests.replication.builder import LAG_MS, LeaderContext, broker_epoch

# --- shrink -----------------------------------------------------------------------------------


def test_isr_shrinks_a_follower_not_caught_up_within_replica_lag_time_max() -> None:
    ctx = LeaderContext(replicas=(1, 2, 3))
    ctx.fill(1)
    ctx.catch_up(2, 3)
    ctx.fill(1)
    ctx.tick(LAG_MS)
    assert ctx.alter_sends == [], "exactly the max lag is still in sync"
    ctx.catch_up(3)
    ctx.tick(1)
    assert len(ctx.alter_sends) == 1
    sent = ctx.alter_sends[0].data
    assert sent.new_isr == (1, 3)
    assert (sent.leader_epoch, sent.partition_epoch) == (1, 1)
    assert ctx.leader.isr == {1, 2, 3}, "not adopted before the controller commits it"
    ctx.respond_alter()
    assert ctx.leader.isr == {1, 3}
    assert ctx.leader.partition_epoch == 2


def test_follower_at_the_leader_log_end_is_never_shrunk() -> None:
    ctx = LeaderContext(replicas=(1, 2))
    ctx.fill(2)
    ctx.catch_up(2)
    ctx.tick(10 * LAG_MS)
    assert ctx.alter_sends == []


def test_follower_that_caught_up_to_the_previous_fetch_log_end_stays_in_sync() -> None:
    """Kafka's Replica.updateFetchState: under steady appends a follower never equals the
    leader's LEO, but each fetch reaching the LEO as of the previous fetch counts as caught up
    at that previous fetch's time."""
    ctx = LeaderContext(replicas=(1, 2))
    for _ in range(10):
        had = ctx.log.log_end_offset  # the follower got everything up to the previous fetch
        ctx.fill(1)
        ctx.fetch(2, had)
        assert ctx.log.log_end_offset > had
        ctx.tick(LAG_MS // 3)
    assert ctx.alter_sends == []


def test_follower_that_stops_fetching_is_shrunk_even_if_it_was_caught_up() -> None:
    ctx = LeaderContext(replicas=(1, 2, 3))
    ctx.catch_up(2, 3)
    ctx.fill(1)
    ctx.catch_up(3)
    ctx.tick(LAG_MS + 1)
    assert ctx.alter_sends[-1].data.new_isr == (1, 3)


def test_alter_partition_carries_the_broker_epochs_of_the_isr_members() -> None:
    """KIP-841: each proposed member with the broker epoch the leader saw (-1 if unknown)."""
    ctx = LeaderContext(replicas=(1, 2, 3), isr=(1, 2))
    ctx.fetch(3, 0)  # caught up: expand
    members = ctx.alter_sends[-1].data.new_isr_with_epochs
    assert members == (
        BrokerEpochState(broker_id=1, broker_epoch=broker_epoch(1)),
        BrokerEpochState(broker_id=2, broker_epoch=-1),  # has not fetched in this epoch
        BrokerEpochState(broker_id=3, broker_epoch=broker_epoch(3)),
    )


# --- expand -----------------------------------------------------------------------------------


def test_follower_reaching_the_high_watermark_joins_the_isr() -> None:
    ctx = LeaderContext(replicas=(1, 2), isr=(1,))
    ctx.fill(4)
    assert ctx.high_watermark == 4
    ctx.fetch(2, 3)
    assert ctx.alter_sends == []
    ctx.fetch(2, 4)
    assert ctx.alter_sends[-1].data.new_isr == (1, 2)
    assert isinstance(ctx.leader.partition_state, PendingExpandIsr)
    ctx.respond_alter()
    assert ctx.leader.isr == {1, 2}


def test_follower_must_also_reach_the_start_of_the_leader_epoch_to_join() -> None:
    """Kafka's isFollowerInSync: a follower below this epoch's start may still hold records
    of an older epoch that this leader does not have."""
    from tests.replication.test_leader_fetch import _log_with_epochs

    ctx = LeaderContext(replicas=(1, 2), isr=(1,), leader_epoch=2, log=_log_with_epochs((1, 3)))
    assert ctx.leader.epoch_start_offset == 3 and ctx.high_watermark == 3
    ctx.fetch(2, 2, last_fetched_epoch=1)
    assert ctx.alter_sends == []
    ctx.fetch(2, 3, last_fetched_epoch=1)
    assert ctx.alter_sends[-1].data.new_isr == (1, 2)


def test_fenced_shutting_down_or_stale_brokers_do_not_join_the_isr() -> None:
    """KIP-841: only an unfenced broker, not in controlled shutdown, fetching with its
    registered epoch, may join."""
    brokers = {
        1: BrokerStatus(broker_epoch=broker_epoch(1)),
        2: BrokerStatus(broker_epoch=broker_epoch(2), fenced=True),
        3: BrokerStatus(broker_epoch=broker_epoch(3), in_controlled_shutdown=True),
        4: BrokerStatus(broker_epoch=broker_epoch(4) + 5),
    }
    ctx = LeaderContext(replicas=(1, 2, 3, 4), isr=(1,), brokers=brokers)
    for replica in (2, 3, 4):
        ctx.fetch(replica, 0)
    assert ctx.alter_sends == []
    ctx.leader.update_brokers({**brokers, 2: BrokerStatus(broker_epoch=broker_epoch(2))}, 0)
    ctx.fetch(2, 0)
    assert ctx.alter_sends[-1].data.new_isr == (1, 2)


# --- one request at a time --------------------------------------------------------------------


def test_at_most_one_alter_partition_is_in_flight() -> None:
    ctx = LeaderContext(replicas=(1, 2, 3), isr=(1,))
    ctx.fetch(2, 0)
    ctx.fetch(3, 0)
    ctx.tick(LAG_MS * 3)
    assert len(ctx.alter_sends) == 1
    ctx.respond_alter()
    ctx.fetch(3, 0)
    assert len(ctx.alter_sends) == 2
    assert ctx.alter_sends[-1].data.new_isr == (1, 2, 3)
    assert ctx.alter_sends[-1].data.partition_epoch == 2


def test_metadata_commit_clears_the_pending_state() -> None:
    """The PartitionChange record wins over a response still in flight (KIP-497)."""
    ctx = LeaderContext(replicas=(1, 2, 3), isr=(1,))
    ctx.fetch(2, 0)
    stale = ctx.alter_sends[-1]
    ctx.commit_metadata(isr=(1, 2))
    assert ctx.leader.partition_state == CommittedPartitionState(isr=frozenset({1, 2}))
    ctx.respond_alter(send=stale)  # the late response changes nothing
    assert ctx.leader.partition_epoch == 2 and ctx.leader.isr == {1, 2}


def test_invalid_update_version_waits_for_newer_metadata() -> None:
    ctx = LeaderContext(replicas=(1, 2), isr=(1,))
    ctx.fetch(2, 0)
    ctx.respond_alter(ErrorCode.INVALID_UPDATE_VERSION)
    assert isinstance(ctx.leader.partition_state, PendingExpandIsr)
    ctx.tick(LAG_MS * 10)
    ctx.fetch(2, 0)
    assert len(ctx.alter_sends) == 1, "nothing is re-sent before metadata arrives"
    ctx.commit_metadata()
    assert isinstance(ctx.leader.partition_state, CommittedPartitionState)
    ctx.fetch(2, 0)
    assert len(ctx.alter_sends) == 2


def test_fenced_leader_epoch_waits_for_newer_metadata() -> None:
    ctx = LeaderContext(replicas=(1, 2), isr=(1,))
    ctx.fetch(2, 0)
    ctx.respond_alter(ErrorCode.FENCED_LEADER_EPOCH)
    ctx.tick(LAG_MS)
    assert len(ctx.alter_sends) == 1
    assert isinstance(ctx.leader.partition_state, PendingExpandIsr)


def test_retriable_error_resends_the_same_change_after_a_backoff() -> None:
    ctx = LeaderContext(replicas=(1, 2), isr=(1,))
    ctx.fetch(2, 0)
    first = ctx.alter_sends[-1]
    ctx.respond_alter(ErrorCode.NOT_CONTROLLER)
    ctx.tick(ctx.config.alter_partition_retry_backoff_ms - 1)
    assert len(ctx.alter_sends) == 1
    assert ctx.leader.next_deadline_ms() == ctx.now_ms + 1
    ctx.tick(1)
    assert len(ctx.alter_sends) == 2
    retry = ctx.alter_sends[-1]
    assert retry.data == first.data and retry.alter_id != first.alter_id
    ctx.respond_alter()
    assert ctx.leader.isr == {1, 2}


def test_ineligible_replica_resets_to_the_last_committed_isr() -> None:
    ctx = LeaderContext(replicas=(1, 2), isr=(1,))
    ctx.fetch(2, 0)
    ctx.respond_alter(ErrorCode.INELIGIBLE_REPLICA)
    assert ctx.leader.partition_state == CommittedPartitionState(isr=frozenset({1}))


# --- the response table, exhaustively ---------------------------------------------------------

_DATA = AlterPartitionData(
    partition=0,
    leader_epoch=3,
    new_isr_with_epochs=(BrokerEpochState(broker_id=1), BrokerEpochState(broker_id=2)),
    partition_epoch=7,
)
_COMMITTED = CommittedPartitionState(isr=frozenset({1, 3}))
_STATES: list[PartitionState] = [
    _COMMITTED,
    PendingExpandIsr(new_in_sync_replica_id=2, sent=_DATA, alter_id=5, last_committed=_COMMITTED),
    PendingShrinkIsr(
        out_of_sync_replica_ids=frozenset({3}), sent=_DATA, alter_id=5, last_committed=_COMMITTED
    ),
    PendingExpandIsr(
        new_in_sync_replica_id=2,
        sent=_DATA,
        alter_id=5,
        last_committed=_COMMITTED,
        retry_at_ms=50,
    ),
]


@given(
    state=st.sampled_from(_STATES),
    error=st.sampled_from(list(ErrorCode)),
    alter_id=st.sampled_from([4, 5]),
    result_leader_epoch=st.sampled_from([2, 3, 4]),
    result_partition_epoch=st.sampled_from([6, 7, 8]),
)
def test_alter_partition_result_table(
    state: PartitionState,
    error: ErrorCode,
    alter_id: int,
    result_leader_epoch: int,
    result_partition_epoch: int,
) -> None:
    """Every (state, result) pair: a committed state or another request's result changes
    nothing; an error never adopts; success adopts only a result for our leader epoch and a
    partition epoch not older than ours; a reset returns the last committed state; a retry
    keeps the proposal and schedules it."""
    result = AlterPartitionPartitionResult(
        partition=0,
        error_code=error,
        leader_id=1,
        leader_epoch=result_leader_epoch,
        isr=(1, 2),
        partition_epoch=result_partition_epoch,
    )
    out = handle_alter_partition_result(
        state,
        alter_id=alter_id,
        result=result,
        leader_epoch=3,
        partition_epoch=7,
        now_ms=100,
        retry_backoff_ms=10,
    )
    answered = (
        not isinstance(state, CommittedPartitionState)
        and state.alter_id == alter_id
        and state.retry_at_ms is None
    )
    if not answered:
        assert out.verdict is AlterPartitionVerdict.IGNORED
        assert (out.state, out.partition_epoch) == (state, 7)
        return
    assert not isinstance(state, CommittedPartitionState)
    match out.verdict:
        case AlterPartitionVerdict.ADOPTED:
            assert error is ErrorCode.NONE
            assert result_leader_epoch == 3 and result_partition_epoch >= 7
            assert out.state == CommittedPartitionState(isr=frozenset({1, 2}))
            assert out.partition_epoch == result_partition_epoch
        case AlterPartitionVerdict.RESET:
            assert error is ErrorCode.INELIGIBLE_REPLICA
            assert out.state == state.last_committed
        case AlterPartitionVerdict.RETRY:
            assert error is not ErrorCode.NONE
            assert out.state.is_inflight and out.state.maximal_isr == state.maximal_isr
            assert getattr(out.state, "retry_at_ms", None) == 110
        case AlterPartitionVerdict.AWAIT_METADATA:
            assert out.state == state
        case AlterPartitionVerdict.IGNORED:
            raise AssertionError("a matching response is never ignored")
    if out.verdict is not AlterPartitionVerdict.ADOPTED:
        assert out.partition_epoch == 7


def test_maximal_isr_of_each_state() -> None:
    expand, shrink = _STATES[1], _STATES[2]
    assert _COMMITTED.maximal_isr == {1, 3} and not _COMMITTED.is_inflight
    assert expand.maximal_isr == {1, 2, 3} and expand.isr == {1, 3}
    assert shrink.maximal_isr == {1, 3} and shrink.isr == {1, 3}
