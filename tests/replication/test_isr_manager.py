"""`IsrManager` on its own: follower fetch fencing and one AlterPartition in flight."""

from __future__ import annotations

import pytest

from kraft.controller.messages import AlterPartitionPartitionResult
from kraft.metadata.image import PartitionRegistration
from replication.core.isr_manager import IsrManager
from replication.core.isr_state import AlterPartitionVerdict, PendingShrinkIsr
from replication.core.messages import BrokerStatus
from storage.errors import ErrorCode
from tests.replication.harness import TP

LAG_MS = 100


def _manager(brokers: dict[int, BrokerStatus] | None = None) -> IsrManager:
    isr = IsrManager(
        topic_partition=TP,
        local_id=1,
        local_broker_epoch=10,
        brokers=brokers or {2: BrokerStatus(broker_epoch=20), 3: BrokerStatus(broker_epoch=30)},
    )
    registration = PartitionRegistration(
        replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=1, partition_epoch=1
    )
    isr.become_leader(registration, leader_log_end_offset=0, now_ms=0, is_new_leader=True)
    return isr


@pytest.mark.parametrize(
    ("replica_id", "broker_epoch", "expected"),
    [
        (2, 20, None),
        (1, 10, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # the leader itself
        (4, 40, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # not a replica
        (2, 19, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # an older incarnation (KIP-903)
        (2, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (2, 21, ErrorCode.UNKNOWN_LEADER_EPOCH),  # metadata has not caught up (retriable)
    ],
)
def test_a_fetch_counts_only_from_a_follower_at_its_registered_broker_epoch(
    replica_id: int, broker_epoch: int, expected: ErrorCode | None
) -> None:
    assert _manager().fence_fetch(replica_id, broker_epoch) == expected


def test_a_fetch_from_an_unregistered_follower_is_fenced() -> None:
    isr = _manager(brokers={2: BrokerStatus(broker_epoch=20)})
    assert isr.fence_fetch(3, 30) is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_no_second_change_is_proposed_while_one_is_in_flight() -> None:
    isr = _manager()
    pending = isr.maybe_shrink(
        leader_epoch=1, leader_log_end_offset=5, now_ms=LAG_MS + 1, replica_lag_time_ms_max=LAG_MS
    )
    assert isinstance(pending, PendingShrinkIsr)
    assert pending.out_of_sync_replica_ids == {2, 3}
    assert isr.isr == {1, 2, 3}, "not adopted before the controller commits it"
    send = isr.send_pending()
    assert send is not None and send.data.new_isr == (1,)
    assert (
        isr.maybe_shrink(
            leader_epoch=1,
            leader_log_end_offset=5,
            now_ms=10 * LAG_MS,
            replica_lag_time_ms_max=LAG_MS,
        )
        is None
    )


def test_a_retriable_error_resends_the_same_change_as_a_new_attempt() -> None:
    isr = _manager()
    isr.maybe_shrink(
        leader_epoch=1, leader_log_end_offset=5, now_ms=LAG_MS + 1, replica_lag_time_ms_max=LAG_MS
    )
    first = isr.send_pending()
    assert first is not None
    verdict = isr.handle_alter_partition_result(
        first.alter_id,
        AlterPartitionPartitionResult(partition=TP.partition, error_code=ErrorCode.NOT_CONTROLLER),
        leader_epoch=1,
        now_ms=200,
        retry_backoff_ms=50,
    )
    assert verdict is AlterPartitionVerdict.RETRY
    assert isr.retry_at_ms == 250
    again = isr.send_pending()
    assert again is not None and again.alter_id != first.alter_id and again.data == first.data
    assert isr.retry_at_ms is None
