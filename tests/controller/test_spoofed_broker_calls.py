"""Inter-node calls from someone who is not the broker they claim to be (issue 10, finding 7).

Until TLS binds a caller to a broker, the controller checks what Kafka's ClusterControlManager
and ReplicationControlManager check: a registration must look like a broker's, a live
registration cannot be taken over by another incarnation (and nothing publishes the live
incarnation id), heartbeats and AlterPartition must carry the registered broker epoch, and
AlterPartition must come from the partition's leader at its current epochs.
"""

from __future__ import annotations

import pytest

from kraft.controller import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerEpochState,
    CreatableTopic,
    CreateTopicsRequest,
    RegisterBrokerRequest,
)
from kraft.metadata import Endpoint
from kraft.metadata.image import BrokerState
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness

LISTENER = Endpoint(name="PLAINTEXT", host="127.0.0.1", port=9092)


def register(h: ControllerHarness, request: RegisterBrokerRequest) -> tuple[ErrorCode, str]:
    before = h.core.next_offset
    response = h.run(h.core.handle_register_broker_request, request)
    if response.error_code is not ErrorCode.NONE:
        assert h.core.next_offset == before, "a refused registration writes nothing"
    return response.error_code, response.error_message


def test_an_empty_registration_is_invalid_request_and_registers_nothing() -> None:
    """An all-defaults request (broker 0, no incarnation id) once registered broker 0."""
    h = ControllerHarness()
    code, _ = register(h, RegisterBrokerRequest(broker_id=0, incarnation_id=""))
    assert code is ErrorCode.INVALID_REQUEST
    assert h.image.broker(0) is None


def test_a_negative_broker_id_is_invalid_request() -> None:
    h = ControllerHarness()
    code, _ = register(h, RegisterBrokerRequest(broker_id=-1, incarnation_id="a"))
    assert code is ErrorCode.INVALID_REQUEST


def test_broker_id_0_with_an_incarnation_id_registers_as_in_kafka() -> None:
    h = ControllerHarness()
    code, _ = register(
        h, RegisterBrokerRequest(broker_id=0, incarnation_id="a", listeners=(LISTENER,))
    )
    assert code is ErrorCode.NONE and h.image.broker(0) is not None


@pytest.mark.parametrize(
    "request_",
    [
        RegisterBrokerRequest(broker_id=1, incarnation_id="i" * 65),
        RegisterBrokerRequest(broker_id=1, incarnation_id="a", listeners=(LISTENER,) * 17),
        RegisterBrokerRequest(
            broker_id=1, incarnation_id="a", listeners=(Endpoint(name="P", host="h" * 256, port=1),)
        ),
        RegisterBrokerRequest(
            broker_id=1, incarnation_id="a", listeners=(Endpoint(name="P", host="h", port=70000),)
        ),
        RegisterBrokerRequest(broker_id=1, incarnation_id="a", rack="r" * 1_000_000),
    ],
)
def test_registration_fields_beyond_what_a_broker_sends_are_invalid_request(
    request_: RegisterBrokerRequest,
) -> None:
    h = ControllerHarness()
    code, message = register(h, request_)
    assert code is ErrorCode.INVALID_REQUEST and len(message) < 300
    assert h.image.broker(1) is None


def test_a_refused_duplicate_registration_does_not_reveal_the_live_incarnation_id() -> None:
    """The error once named the live incarnation id, and registering again with it took the
    broker id over (the same incarnation re-registering is a retry, as in Kafka)."""
    h = ControllerHarness()
    h.register(1, incarnation="secret-incarnation")
    code, message = register(h, RegisterBrokerRequest(broker_id=1, incarnation_id="impostor"))
    assert code is ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert "secret-incarnation" not in message
    assert h.image.brokers[1].incarnation_id == "secret-incarnation"


def test_heartbeats_without_the_registered_epoch_do_not_keep_a_dead_broker_unfenced() -> None:
    """A fake broker kept a dead broker unfenced with heartbeats; without its epoch it can't."""
    h = ControllerHarness(session_timeout_ms=3000)
    h.start_brokers(1, 2)
    epoch = h.image.brokers[1].broker_epoch
    for now in range(500, 4500, 500):
        h.now_ms = now
        h.heartbeat(2)  # broker 2 is alive; broker 1 died at 0
        # NB: a broker epoch is a log offset; one that guesses it right is not stopped here.
        for spoofed in (-1, epoch - 1, epoch + 1, epoch + 1000):
            assert h.heartbeat(1, broker_epoch=spoofed).error_code is ErrorCode.STALE_BROKER_EPOCH
    h.tick(4500)
    assert h.image.brokers[1].state is BrokerState.FENCED
    assert h.image.brokers[2].state is BrokerState.UNFENCED


def _cluster_with_topic() -> ControllerHarness:
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(
            topics=(CreatableTopic(name="t", num_partitions=1, replication_factor=3),)
        ),
    )
    return h


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("sender_is_a_follower", ErrorCode.INVALID_REQUEST),
        ("sender_epoch_is_stale", ErrorCode.STALE_BROKER_EPOCH),
        ("sender_epoch_is_made_up", ErrorCode.STALE_BROKER_EPOCH),
        ("leader_epoch_is_old", ErrorCode.FENCED_LEADER_EPOCH),
        ("partition_epoch_is_old", ErrorCode.INVALID_UPDATE_VERSION),
        ("isr_member_is_not_a_replica", ErrorCode.INVALID_REQUEST),
        ("isr_lacks_the_leader", ErrorCode.INVALID_REQUEST),
    ],
)
def test_a_spoofed_alter_partition_is_refused_and_leaves_the_isr(
    change: str, expected: ErrorCode
) -> None:
    """An AlterPartition that shrinks the ISR to one broker, from anyone but the leader at its
    registered epoch and the partition's current epochs, changes nothing."""
    h = _cluster_with_topic()
    p = h.partition("t")
    img = h.core.pending_image
    follower = next(r for r in p.replicas if r != p.leader)
    sender, sender_epoch = p.leader, img.brokers[p.leader].broker_epoch
    leader_epoch, partition_epoch = p.leader_epoch, p.partition_epoch
    isr = (p.leader,)
    if change == "sender_is_a_follower":
        sender, sender_epoch, isr = follower, img.brokers[follower].broker_epoch, (follower,)
    elif change == "sender_epoch_is_stale":
        sender_epoch -= 1
    elif change == "sender_epoch_is_made_up":
        sender_epoch = 10**12
    elif change == "leader_epoch_is_old":
        leader_epoch -= 1
    elif change == "partition_epoch_is_old":
        h.alter_isr("t", 0, p.replicas[:2])
        partition_epoch = h.partition("t").partition_epoch - 1
    elif change == "isr_member_is_not_a_replica":
        isr = (p.leader, 99)
    elif change == "isr_lacks_the_leader":
        isr = (follower,)
    before = h.partition("t")
    response = h.run(
        h.core.handle_alter_partition_request,
        AlterPartitionRequest(
            broker_id=sender,
            broker_epoch=sender_epoch,
            topics=(
                AlterPartitionTopic(
                    topic_id=img.topic("t").topic_id,  # type: ignore[union-attr]
                    partitions=(
                        AlterPartitionData(
                            partition=0,
                            leader_epoch=leader_epoch,
                            partition_epoch=partition_epoch,
                            new_isr_with_epochs=tuple(BrokerEpochState(broker_id=b) for b in isr),
                        ),
                    ),
                ),
            ),
        ),
    )
    code = response.error_code
    if code is ErrorCode.NONE:
        code = response.topics[0].partitions[0].error_code
    assert code is expected
    assert h.partition("t") == before
