"""Partition reassignment (KIP-455) in the controller core: add the new replicas, wait until
they are in the ISR, then drop the old ones; cancel; never below min.insync.replicas."""

from __future__ import annotations

import pytest

from kraft.controller import ControllerConfig
from kraft.controller.messages import (
    AlterableConfig,
    AlterConfigsResource,
    AlterPartitionReassignmentsRequest,
    CreatableTopic,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kraft.controller.reassignment import complete_reassignments
from kraft.metadata import MetadataImage, decode_record, encode_record
from kraft.metadata.records import ConfigResourceType, PartitionChangeRecord
from kraft.types import TopicPartition
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness


def _cluster(
    replicas: tuple[int, ...] = (1, 2, 3), *, configs: dict[str, str] | None = None
) -> ControllerHarness:
    h = ControllerHarness(config=ControllerConfig(broker_session_timeout_ms=600_000))
    h.start_brokers(1, 2, 3, 4, 5)
    response = h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(
            topics=(CreatableTopic(name="t", assignments=(replicas,), configs=configs or {}),)
        ),
    )
    assert response.topics[0].error_code is ErrorCode.NONE
    return h


def _reassign(
    h: ControllerHarness, target: tuple[int, ...] | None, topic: str = "t", index: int = 0
) -> tuple[ErrorCode, str]:
    response = h.run(
        h.core.handle_alter_partition_reassignments_request,
        AlterPartitionReassignmentsRequest(
            topics=(
                ReassignableTopic(
                    name=topic,
                    partitions=(ReassignablePartition(partition_index=index, replicas=target),),
                ),
            )
        ),
    )
    assert response.error_code is ErrorCode.NONE
    (result,) = response.responses[0].partitions
    return result.error_code, result.error_message


def _set_topic_config(h: ControllerHarness, key: str, value: str) -> None:
    response = h.run(
        h.core.handle_incremental_alter_configs_request,
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name="t",
                    configs=(AlterableConfig(name=key, value=value),),
                ),
            )
        ),
    )
    assert response.responses[0].error_code is ErrorCode.NONE


def test_a_reassignment_adds_the_target_replicas_and_keeps_the_old_ones_until_in_sync() -> None:
    h = _cluster()
    assert _reassign(h, (2, 3, 4)) == (ErrorCode.NONE, "")
    p = h.partition("t")
    assert p.replicas == (2, 3, 4, 1), "the union, target first"
    assert p.adding_replicas == (4,) and p.removing_replicas == (1,)
    assert p.isr == (1, 2, 3) and p.leader == 1, "nothing leaves before 4 is in sync"
    assert p.target_replicas == (2, 3, 4) and p.original_replicas == (2, 3, 1)


def test_the_reassignment_completes_only_once_every_adding_replica_is_in_the_isr() -> None:
    h = _cluster()
    _reassign(h, (2, 3, 4, 5))
    h.alter_isr("t", 0, (1, 2, 3, 4))
    p = h.partition("t")
    assert p.is_reassigning and p.replicas == (2, 3, 4, 5, 1), "5 has not caught up yet"
    h.alter_isr("t", 0, (1, 2, 4))  # 3 falls behind: still not complete
    assert h.partition("t").is_reassigning
    h.alter_isr("t", 0, (1, 2, 4, 5))
    assert h.partition("t").is_reassigning, "3 is a target replica and is out of sync"
    h.alter_isr("t", 0, (1, 2, 3, 4, 5))
    p = h.partition("t")
    assert not p.is_reassigning
    assert p.replicas == (2, 3, 4, 5) and p.isr == (2, 3, 4, 5)


def test_completion_moves_leadership_off_a_removed_leader_in_the_same_batch() -> None:
    h = _cluster()
    _reassign(h, (2, 3, 4))
    before = h.partition("t")
    result = h.propose(
        h.core.handle_alter_partition_request, h.alter_isr_request("t", 0, (1, 2, 3, 4))
    )
    h.commit()
    assert len(result.records) == 2, "the ISR change and the completion, one batch"
    assert result.response.topics[0].partitions[0].isr == (1, 2, 3, 4)
    p = h.partition("t")
    assert p.leader == 2, "the first target replica in the ISR"
    assert p.leader_epoch == before.leader_epoch + 1
    assert p.replicas == (2, 3, 4) and p.isr == (2, 3, 4)
    assert 1 not in p.isr


def test_a_leader_that_stays_keeps_leading_through_the_move() -> None:
    h = _cluster()
    _reassign(h, (1, 2, 4))
    epoch = h.partition("t").leader_epoch
    h.alter_isr("t", 0, (1, 2, 3, 4))
    p = h.partition("t")
    assert (p.replicas, p.isr, p.leader, p.leader_epoch) == ((1, 2, 4), (1, 2, 4), 1, epoch)


def test_a_target_inside_the_isr_completes_at_once() -> None:
    h = _cluster()
    assert _reassign(h, (3, 2))[0] is ErrorCode.NONE
    p = h.partition("t")
    assert (p.replicas, p.isr, p.is_reassigning) == ((3, 2), (2, 3), False)
    assert p.leader == 3, "leader 1 was removed: the first target replica leads"


def test_a_target_smaller_than_min_insync_replicas_is_refused() -> None:
    h = _cluster(configs={"min.insync.replicas": "2"})
    code, message = _reassign(h, (4,))
    assert code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert "min.insync.replicas=2" in message
    assert not h.partition("t").is_reassigning


def test_completion_waits_while_it_would_shrink_the_isr_below_min_insync_replicas() -> None:
    h = _cluster(configs={"min.insync.replicas": "2"})
    _reassign(h, (3, 4))
    _set_topic_config(h, "min.insync.replicas", "3")  # raised during the move
    h.alter_isr("t", 0, (1, 2, 3, 4))
    p = h.partition("t")
    assert p.is_reassigning and p.isr == (1, 2, 3, 4), "completing would leave 2 < 3 in sync"
    _set_topic_config(h, "min.insync.replicas", "2")
    h.tick(h.now_ms)  # the config change asks for a completion check
    p = h.partition("t")
    assert (p.replicas, p.isr, p.is_reassigning) == ((3, 4), (3, 4), False)


def test_cancel_reverts_to_the_original_replicas_and_drops_the_adding_ones_from_the_isr() -> None:
    h = _cluster()
    _reassign(h, (2, 3, 4))
    h.alter_isr("t", 0, (1, 2, 3))  # unchanged; 4 not in sync yet
    p = h.partition("t")
    assert p.is_reassigning
    assert _reassign(h, None) == (ErrorCode.NONE, "")
    p = h.partition("t")
    assert (p.replicas, p.isr, p.leader, p.is_reassigning) == ((2, 3, 1), (1, 2, 3), 1, False)
    assert set(p.replicas) == {1, 2, 3}, "as before the reassignment (Kafka keeps this order)"


def test_cancel_moves_leadership_off_an_adding_replica() -> None:
    h = _cluster()
    _reassign(h, (4, 5, 1, 2, 3))  # only adds: nothing is removed
    h.alter_isr("t", 0, (1, 2, 3, 4))
    assert h.partition("t").is_reassigning
    # 4 becomes leader by a preferred election while the move runs
    from kraft.controller.messages import ElectionType, ElectLeadersRequest

    h.run(
        h.core.handle_elect_leaders_request,
        ElectLeadersRequest(
            election_type=ElectionType.PREFERRED, partitions=(TopicPartition("t", 0),)
        ),
    )
    assert h.partition("t").leader == 4
    assert _reassign(h, None)[0] is ErrorCode.NONE
    p = h.partition("t")
    assert p.replicas == (1, 2, 3) and p.isr == (1, 2, 3) and p.leader == 1


def test_cancel_is_refused_when_it_would_shrink_the_isr_below_min_insync_replicas() -> None:
    h = _cluster(configs={"min.insync.replicas": "2"})
    _reassign(h, (1, 4, 5))
    h.alter_isr("t", 0, (1, 4))  # 2 and 3 fell behind; 4 joined
    code, message = _reassign(h, None)
    assert code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "below min.insync.replicas" in message
    assert h.partition("t").is_reassigning, "nothing changed"


def test_cancel_without_a_reassignment_is_no_reassignment_in_progress() -> None:
    h = _cluster()
    assert _reassign(h, None)[0] is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ((), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ((2, 2, 3), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ((2, 3, 99), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ],
)
def test_a_bad_target_is_refused_with_a_typed_error(
    target: tuple[int, ...], code: ErrorCode
) -> None:
    h = _cluster()
    assert _reassign(h, target)[0] is code
    assert not h.partition("t").is_reassigning


def test_an_unknown_partition_is_unknown_topic_or_partition() -> None:
    h = _cluster()
    assert _reassign(h, (1, 2), topic="nope")[0] is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _reassign(h, (1, 2), index=7)[0] is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_quorum_mode_partition_is_refused() -> None:
    h = _cluster(configs={"replication.mode": "quorum"})
    code, message = _reassign(h, (2, 3, 4))
    assert code is ErrorCode.INVALID_REQUEST
    assert "quorum-mode" in message


def test_a_new_target_replaces_the_reassignment_in_progress() -> None:
    h = _cluster()
    _reassign(h, (2, 3, 4))
    _reassign(h, (2, 3, 5))
    p = h.partition("t")
    assert p.target_replicas == (2, 3, 5)
    assert p.adding_replicas == (5,) and set(p.removing_replicas) == {1, 4}
    h.alter_isr("t", 0, (1, 2, 3, 5))
    p = h.partition("t")
    assert (p.replicas, p.isr, p.leader) == ((2, 3, 5), (2, 3, 5), 2)


def test_list_shows_only_partitions_being_reassigned() -> None:
    h = _cluster()
    h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(topics=(CreatableTopic(name="u", assignments=((1, 2),)),)),
    )
    _reassign(h, (2, 3, 4))
    listed = h.run(
        h.core.handle_list_partition_reassignments_request, ListPartitionReassignmentsRequest()
    )
    assert [t.name for t in listed.topics] == ["t"]
    (ongoing,) = listed.topics[0].partitions
    assert (ongoing.replicas, ongoing.adding_replicas, ongoing.removing_replicas) == (
        (2, 3, 4, 1),
        (4,),
        (1,),
    )
    named = h.run(
        h.core.handle_list_partition_reassignments_request,
        ListPartitionReassignmentsRequest(
            partitions=(TopicPartition("u", 0), TopicPartition("gone", 3))
        ),
    )
    assert named.topics == ()


def test_a_new_active_controller_completes_a_reassignment_whose_isr_is_complete() -> None:
    h = _cluster()
    _reassign(h, (2, 3, 4))
    # The ISR change committed, but its completion record was lost with the old controller.
    request = h.alter_isr_request("t", 0, (1, 2, 3, 4))
    result = h.core.handle_alter_partition_request(request, h.now_ms)
    isr_change = result.records[0]
    h.core.resign()
    image = h.core.committed_image.apply(
        decode_record(encode_record(isr_change)), h.core.committed_image.last_offset + 1
    )
    successor = ControllerHarness(image, config=ControllerConfig(broker_session_timeout_ms=600_000))
    assert successor.partition("t").is_reassigning
    successor.tick(0)
    p = successor.partition("t")
    assert (p.replicas, p.isr, p.leader, p.is_reassigning) == ((2, 3, 4), (2, 3, 4), 2, False)


def test_a_reassigning_partition_survives_a_snapshot_and_the_record_codec() -> None:
    h = _cluster()
    _reassign(h, (2, 3, 4))
    image = h.core.committed_image
    assert MetadataImage.from_snapshot(image.to_snapshot()) == image
    assert complete_reassignments(image) == []


def test_no_reassignment_step_shrinks_the_isr_below_min_insync_replicas() -> None:
    """Every record a reassignment writes keeps ISR >= min(min.insync.replicas, ISR before),
    over a grid of targets and ISR states."""
    for target in [(4,), (4, 5), (1, 4), (2, 4, 5), (3, 4, 5), (5, 4, 3, 2)]:
        for isr in [(1, 2, 3), (1, 2), (1,)]:
            h = _cluster(configs={"min.insync.replicas": "2"})
            if isr != (1, 2, 3):
                h.alter_isr("t", 0, isr)
            result = h.propose(
                h.core.handle_alter_partition_reassignments_request,
                AlterPartitionReassignmentsRequest(
                    topics=(
                        ReassignableTopic(
                            name="t",
                            partitions=(ReassignablePartition(partition_index=0, replicas=target),),
                        ),
                    )
                ),
            )
            h.commit()
            for new_isr in [(*isr, *[r for r in target if r not in isr])]:
                p = h.partition("t")
                if p.is_reassigning and set(new_isr) <= set(p.replicas) and p.leader in new_isr:
                    before = len(p.isr)
                    h.alter_isr("t", 0, new_isr)
                    after = h.partition("t")
                    assert len(after.isr) >= min(2, before), (target, isr, after)
            if result.records:
                assert all(isinstance(r, PartitionChangeRecord) for r in result.records)
            p = h.partition("t")
            if p.is_reassigning:
                before = len(p.isr)
                code, _ = _reassign(h, None)
                if code is ErrorCode.NONE:
                    assert len(h.partition("t").isr) >= min(2, before)


def test_a_cancel_and_an_empty_target_stay_apart_on_the_wire() -> None:
    from kraft.transport.controller_codec import decode, encode

    request = AlterPartitionReassignmentsRequest(
        topics=(
            ReassignableTopic(
                name="t",
                partitions=(
                    ReassignablePartition(partition_index=0, replicas=None),
                    ReassignablePartition(partition_index=1, replicas=()),
                    ReassignablePartition(partition_index=2, replicas=(2, 3, 4)),
                ),
            ),
        )
    )
    assert decode(encode(request), AlterPartitionReassignmentsRequest) == request
    listing = ListPartitionReassignmentsRequest(partitions=(TopicPartition("t", 0),))
    assert decode(encode(listing), ListPartitionReassignmentsRequest) == listing
    assert decode(
        encode(ListPartitionReassignmentsRequest()), ListPartitionReassignmentsRequest
    ) == (ListPartitionReassignmentsRequest())
