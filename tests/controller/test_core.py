"""ControllerCore: pending vs committed images, leadership changes, elections, NOT_CONTROLLER."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from kraft.controller import (
    AllocateProducerIdsRequest,
    AlterConfigsResource,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    ControllerCore,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectionType,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    RegisterBrokerRequest,
    UnregisterBrokerRequest,
)
from kraft.metadata import (
    ConfigResourceType,
    MetadataImage,
    NoOpRecord,
    decode_record,
    encode_record,
)
from kraft.types import TopicPartition
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness
from tests.metadata.builders import ImageBuilder

STANDBY_CASES: list[tuple[str, Any, Callable[[Any], list[ErrorCode]]]] = [
    (
        "register_broker",
        RegisterBrokerRequest(broker_id=1, incarnation_id="a"),
        lambda r: [r.error_code],
    ),
    (
        "broker_heartbeat",
        BrokerHeartbeatRequest(broker_id=1, broker_epoch=0, current_metadata_offset=0),
        lambda r: [r.error_code],
    ),
    ("unregister_broker", UnregisterBrokerRequest(broker_id=1), lambda r: [r.error_code]),
    (
        "create_topics",
        CreateTopicsRequest(topics=(CreatableTopic(name="a"), CreatableTopic(name="b"))),
        lambda r: [t.error_code for t in r.topics],
    ),
    (
        "delete_topics",
        DeleteTopicsRequest(topic_names=("a",), topic_ids=("x",)),
        lambda r: [t.error_code for t in r.topics],
    ),
    (
        "create_partitions",
        CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="a", count=2),)),
        lambda r: [t.error_code for t in r.results],
    ),
    (
        "incremental_alter_configs",
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=ConfigResourceType.TOPIC, resource_name="a", configs=()
                ),
            )
        ),
        lambda r: [x.error_code for x in r.responses],
    ),
    (
        "alter_partition",
        AlterPartitionRequest(broker_id=1, broker_epoch=0, topics=()),
        lambda r: [r.error_code],
    ),
    ("elect_leaders", ElectLeadersRequest(), lambda r: [r.error_code]),
    (
        "allocate_producer_ids",
        AllocateProducerIdsRequest(broker_id=1, broker_epoch=0),
        lambda r: [r.error_code],
    ),
]


@pytest.mark.parametrize(
    ("api", "request_", "codes"), STANDBY_CASES, ids=[c[0] for c in STANDBY_CASES]
)
def test_standby_controller_answers_not_controller_and_writes_nothing(
    api: str, request_: Any, codes: Callable[[Any], list[ErrorCode]]
) -> None:
    core = ControllerCore(rng=random.Random(0))
    assert not core.is_active
    result = getattr(core, f"handle_{api}_request")(request_, 0)
    assert result.records == ()
    assert codes(result.response) and set(codes(result.response)) == {ErrorCode.NOT_CONTROLLER}
    assert core.tick(10**9) == ()


def test_decisions_see_records_that_are_produced_but_not_yet_committed() -> None:
    h = ControllerHarness()
    h.start_brokers(1)
    request = CreateTopicsRequest(topics=(CreatableTopic(name="t"),))
    first = h.propose(h.core.handle_create_topics_request, request)
    second = h.propose(h.core.handle_create_topics_request, request)
    assert first.response.topics[0].error_code is ErrorCode.NONE
    assert second.response.topics[0].error_code is ErrorCode.TOPIC_ALREADY_EXISTS
    assert h.core.committed_image.topic("t") is None and h.core.pending_image.topic("t") is not None
    h.commit()
    assert h.core.committed_image.topic("t") is not None and h.core.inflight_count == 0


def test_in_flight_registrations_get_the_offsets_of_their_own_records_as_epochs() -> None:
    h = ControllerHarness()
    base = h.core.next_offset
    a = h.propose(
        h.core.handle_register_broker_request,
        RegisterBrokerRequest(broker_id=1, incarnation_id="a"),
    )
    b = h.propose(
        h.core.handle_register_broker_request,
        RegisterBrokerRequest(broker_id=2, incarnation_id="b"),
    )
    assert (a.response.broker_epoch, b.response.broker_epoch) == (base, base + 1)
    h.commit()
    assert h.image.brokers[2].broker_epoch == base + 1


def test_resign_drops_uncommitted_records_and_rolls_back_to_the_committed_image() -> None:
    h = ControllerHarness()
    h.start_brokers(1)
    committed = h.core.committed_image
    h.propose(
        h.core.handle_create_topics_request, CreateTopicsRequest(topics=(CreatableTopic(name="t"),))
    )
    assert h.core.pending_image.topic("t") is not None
    h.core.resign()
    h.uncommitted.clear()  # the Raft log lost them too
    assert not h.core.is_active and h.core.pending_image is committed
    h.core.become_active(epoch=2, next_offset=committed.last_offset + 5, now_ms=0)
    h.epoch = 2
    response = h.run(
        h.core.handle_create_topics_request, CreateTopicsRequest(topics=(CreatableTopic(name="t"),))
    )
    assert response.topics[0].error_code is ErrorCode.NONE


def test_committing_a_record_this_controller_did_not_produce_is_an_invariant_violation() -> None:
    h = ControllerHarness()
    with pytest.raises(AssertionError):
        h.core.replay(NoOpRecord(), h.core.next_offset, 1)


def test_standby_replay_keeps_pending_equal_to_committed() -> None:
    core = ControllerCore(rng=random.Random(0))
    image = ImageBuilder().with_brokers(1, 2).with_topic("t", rf=2).build()
    core.replay_batch(ImageBuilder().with_brokers(1, 2).with_topic("t", rf=2).records(), 0, 1)
    assert core.committed_image == image and core.pending_image is core.committed_image
    core.load_snapshot(MetadataImage.from_snapshot(image.to_snapshot()))
    assert core.pending_image == image


def test_a_standby_replaying_the_log_converges_to_the_active_image() -> None:
    h = ControllerHarness(seed=3, finalized=False)  # the standby replays every record
    standby = ControllerCore(rng=random.Random(99))
    log: list[tuple[int, bytes]] = []
    original_commit = h.commit

    def commit_and_ship() -> None:
        for base, records in h.uncommitted:
            log.extend((base + i, encode_record(r)) for i, r in enumerate(records))
        original_commit()

    h.commit = commit_and_ship  # type: ignore[method-assign]
    h.start_brokers(1, 2, 3)
    h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(
            topics=(CreatableTopic(name="t", num_partitions=4, replication_factor=3),)
        ),
    )
    h.heartbeat(1, want_shutdown=True)
    h.tick(10_000)
    for offset, data in log:
        standby.replay(decode_record(data), offset, 1)
    assert standby.committed_image == h.core.committed_image


def test_preferred_leader_election_moves_leadership_back() -> None:
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(topics=(CreatableTopic(name="t", assignments=((1, 2),)),)),
    )
    h.heartbeat(1, want_fence=True)
    assert h.partition("t").leader == 2
    not_available = h.run(
        h.core.handle_elect_leaders_request,
        ElectLeadersRequest(partitions=(TopicPartition("t", 0),)),
    )
    code = not_available.replica_election_results[0].partition_results[0].error_code
    assert code is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    h.heartbeat(1)  # unfenced again, but not yet back in the ISR
    h.alter_isr("t", 0, (2, 1))
    elected = h.run(
        h.core.handle_elect_leaders_request,
        ElectLeadersRequest(partitions=(TopicPartition("t", 0),)),
    )
    assert elected.replica_election_results[0].partition_results[0].error_code is ErrorCode.NONE
    assert h.partition("t").leader == 1
    again = h.run(
        h.core.handle_elect_leaders_request,
        ElectLeadersRequest(partitions=(TopicPartition("t", 0), TopicPartition("nope", 0))),
    )
    results = {r.topic: r.partition_results[0].error_code for r in again.replica_election_results}
    assert results == {
        "t": ErrorCode.ELECTION_NOT_NEEDED,
        "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_elect_all_partitions_reports_only_partitions_that_needed_it() -> None:
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(
            topics=(CreatableTopic(name="t", num_partitions=4, replication_factor=2),)
        ),
    )
    response = h.run(h.core.handle_elect_leaders_request, ElectLeadersRequest())
    assert response.replica_election_results == ()


def test_unclean_elect_leaders_revives_an_offline_partition_from_an_out_of_sync_replica() -> None:
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(topics=(CreatableTopic(name="t", assignments=((1, 2),)),)),
    )
    h.alter_isr("t", 0, (1,))
    h.now_ms = 2_000
    h.heartbeat(2)
    h.tick(3_500)  # broker 1 expires; ISR [1] is kept, no leader
    assert h.partition("t").leader == -1
    request = ElectLeadersRequest(
        election_type=ElectionType.UNCLEAN, partitions=(TopicPartition("t", 0),)
    )
    response = h.run(h.core.handle_elect_leaders_request, request)
    assert response.replica_election_results[0].partition_results[0].error_code is ErrorCode.NONE
    assert h.partition("t").leader == 2
    again = h.run(h.core.handle_elect_leaders_request, request)
    assert (
        again.replica_election_results[0].partition_results[0].error_code
        is ErrorCode.ELECTION_NOT_NEEDED
    )


def test_unclean_elect_leaders_without_live_replicas_is_eligible_leaders_not_available() -> None:
    h = ControllerHarness()
    h.start_brokers(1)
    h.run(
        h.core.handle_create_topics_request, CreateTopicsRequest(topics=(CreatableTopic(name="t"),))
    )
    h.tick(3_001)
    request = ElectLeadersRequest(
        election_type=ElectionType.UNCLEAN, partitions=(TopicPartition("t", 0),)
    )
    response = h.run(h.core.handle_elect_leaders_request, request)
    code = response.replica_election_results[0].partition_results[0].error_code
    assert code is ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_next_deadline_is_the_next_session_expiry() -> None:
    h = ControllerHarness(session_timeout_ms=1000)
    h.start_brokers(1, 2)
    h.tick(0)
    h.now_ms = 400
    h.heartbeat(2)
    assert h.core.next_deadline_ms() == 1_001  # broker 1 last heard at 0: expires after 1000
    assert h.tick(1_000) == ()
    assert h.tick(1_001) != ()


def test_a_control_batch_raft_appended_moves_the_cores_next_offset() -> None:
    """A KIP-853 voter change is a control batch the core did not make: the next batch lands
    one offset later, and the core must count it (else the replay's offset check killed the
    controller: found by the dynamic-quorum process test in a fresh-clone run)."""
    from kraft.controller.messages import RegisterBrokerRequest
    from kraft.metadata import decode_record, encode_record
    from tests.controller.harness import ControllerHarness

    h = ControllerHarness()
    h.register(1)
    control_offset = h.core.next_offset  # Raft put a VotersRecord here
    h.core.skip_to(control_offset + 1)
    result = h.core.handle_register_broker_request(
        RegisterBrokerRequest(broker_id=2, incarnation_id="inc-2"), h.now_ms
    )
    decoded = [decode_record(encode_record(r)) for r in result.records]
    h.core.replay_batch(decoded, control_offset + 1, h.epoch)  # where Raft put them
    assert h.core.committed_image.broker(2) is not None
    assert h.core.inflight_count == 0
