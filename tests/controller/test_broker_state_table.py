"""Every (broker state, heartbeat) pair against the lifecycle table (STYLE §3, §7).

The table is the specification (Kafka's ``BrokerHeartbeatManager.calculateNextBrokerState``):
(state, want_fence, want_shutdown, caught_up, leads_partitions) -> (next state, should_shut_down).
"""

from __future__ import annotations

import itertools

import pytest

from kraft.controller import BrokerHeartbeatManager, BrokerHeartbeatRequest
from kraft.controller.cluster_control import handle_broker_heartbeat
from kraft.metadata import NO_LEADER, BrokerState
from kraft.types import TopicPartition
from storage.errors import ErrorCode
from tests.metadata.builders import ImageBuilder

F, U, CS = BrokerState.FENCED, BrokerState.UNFENCED, BrokerState.CONTROLLED_SHUTDOWN


def expected(
    state: BrokerState, want_fence: bool, want_shutdown: bool, caught_up: bool, leads: bool
) -> tuple[BrokerState, bool]:
    if state is F:
        if want_shutdown:
            return F, True
        return (U, False) if caught_up and not want_fence else (F, False)
    if state is U:
        if want_fence:
            return F, False
        if want_shutdown:
            return (CS, False) if leads else (F, True)
        return U, False
    return (CS, False) if leads else (F, True)  # a broker cannot leave controlled shutdown


CASES = list(
    itertools.product([F, U, CS], [False, True], [False, True], [False, True], [False, True])
)


@pytest.mark.parametrize(("state", "want_fence", "want_shutdown", "caught_up", "leads"), CASES)
def test_heartbeat_moves_broker_through_the_lifecycle_table(
    state: BrokerState, want_fence: bool, want_shutdown: bool, caught_up: bool, leads: bool
) -> None:
    builder = ImageBuilder().with_brokers(
        1, 2, fenced=[1] if state is F else [], shutting_down=[1] if state is CS else []
    )
    builder.with_topic("t", assignments=[(1, 2) if leads else (2, 1)])
    if state is F:
        # Reachable fenced states: out of every ISR, or the kept last ISR member (KIP-841).
        builder.with_partition("t", 0, isr=[1] if leads else [2], leader=NO_LEADER if leads else 2)
    elif state is CS:
        builder.with_partition("t", 0, isr=[1] if leads else [2], leader=1 if leads else 2)
    image = builder.build()
    epoch = image.brokers[1].broker_epoch
    result = handle_broker_heartbeat(
        image,
        BrokerHeartbeatRequest(
            broker_id=1,
            broker_epoch=epoch,
            current_metadata_offset=image.last_offset if caught_up else epoch - 1,
            want_fence=want_fence,
            want_shutdown=want_shutdown,
        ),
        heartbeats=BrokerHeartbeatManager(3000),
        now_ms=0,
    )
    response = result.response
    after = image.apply_batch(result.records, image.last_offset + 1) if result.records else image
    next_state, should_shut_down = expected(state, want_fence, want_shutdown, caught_up, leads)
    assert response.error_code is ErrorCode.NONE
    assert (after.brokers[1].state, response.should_shut_down) == (next_state, should_shut_down)
    assert response.is_fenced == (next_state is F)
    if state is U and next_state is not U:
        assert after.partitions_led_by(1) == []  # leaderships moved in the same batch
    if state is F and next_state is U and leads:
        assert after.partitions_led_by(1) == [TopicPartition("t", 0)]  # re-elected on unfence
