"""Eligible leader replicas (KIP-966) in the controller core: one test per rule of
`kraft.controller.eligible_leaders`, through `ControllerCore` as the server drives it."""

from __future__ import annotations

import pytest

from kraft.controller import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    BrokerHeartbeatRequest,
    ControllerConfig,
    ElectionType,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    RegisterBrokerRequest,
)
from kraft.controller.eligible_leaders import ElrPolicy
from kraft.controller.messages import TopicIdPartition
from kraft.controller.partition_change import PartitionChangeBuilder
from kraft.metadata import NO_LEADER, LeaderRecoveryState
from kraft.metadata.image import MetadataImage, PartitionRegistration
from kraft.metadata.records import ConfigResourceType, PartitionChangeRecord
from kraft.types import TopicPartition
from storage.errors import ErrorCode, InvariantViolation
from tests.controller.harness import ControllerHarness
from tests.controller.test_broker_lifecycle import cluster_with_topic


def t0(h: ControllerHarness) -> PartitionRegistration:
    return h.partition("t", 0)


def three_replicas(
    *, elr: bool = True, unclean: bool = False
) -> tuple[ControllerHarness, int, int, int]:
    """RF 3, min.insync.replicas 2; returns the harness, the leader and the two followers."""
    configs = {"min.insync.replicas": "2"}
    if unclean:
        configs["unclean.leader.election.enable"] = "true"
    h = cluster_with_topic(1, 2, 3, rf=3, configs=configs, elr=elr)
    p = t0(h)
    first, second = (r for r in p.replicas if r != p.leader)
    return h, p.leader, first, second


def shrink_to_leader(h: ControllerHarness, leader: int, first: int, second: int) -> None:
    """The leader drops ``second`` (ISR still at min ISR), then ``first`` (below it)."""
    assert h.alter_isr("t", 0, (leader, first)).topics[0].partitions[0].error_code is ErrorCode.NONE
    assert t0(h).elr == ()
    assert h.alter_isr("t", 0, (leader,)).topics[0].partitions[0].error_code is ErrorCode.NONE


def fence(h: ControllerHarness, broker: int) -> None:
    assert h.heartbeat(broker, want_fence=True).is_fenced


def reregister(h: ControllerHarness, broker: int, *, clean: bool) -> None:
    """A new incarnation of ``broker`` registers and unfences; ``clean``: it names the epoch
    it had (a clean shutdown), else none (KIP-966's unclean shutdown)."""
    old = h.core.pending_image.brokers[broker].broker_epoch
    if not h.core.pending_image.brokers[broker].fenced:
        fence(h, broker)
    assert h.heartbeat(broker, want_shutdown=True).should_shut_down  # its session ends
    response = h.run(
        h.core.handle_register_broker_request,
        RegisterBrokerRequest(
            broker_id=broker,
            incarnation_id=f"again-{broker}",
            previous_broker_epoch=old if clean else None,
        ),
    )
    assert response.error_code is ErrorCode.NONE
    assert not h.heartbeat(broker).is_fenced


def test_a_replica_leaving_the_isr_below_min_isr_joins_the_elr() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    p = t0(h)
    # `second` left while the ISR was still at min ISR (the HW moved on without it): not
    # eligible; `first` left as the ISR fell below it (the HW stopped): eligible.
    assert (p.isr, p.elr) == ((leader,), (first,))


def test_the_elr_is_cleared_once_the_isr_is_back_at_min_isr() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    h.alter_isr("t", 0, (leader, second))
    assert (t0(h).isr, t0(h).elr) == ((leader, second), ())


def test_fencing_the_last_isr_member_elects_an_unfenced_elr_member() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    fence(h, leader)
    p = t0(h)
    assert (p.leader, p.isr, p.elr) == (first, (first,), (leader,))
    assert p.leader_recovery_state is LeaderRecoveryState.RECOVERED  # a clean election


def test_without_elr_the_stale_last_isr_member_is_the_only_candidate() -> None:
    """The difference ELR makes: without it the in-sync `first` is forgotten, the partition
    waits for the fenced leader, and re-elects it whatever its log lost."""
    h, leader, first, second = three_replicas(elr=False)
    shrink_to_leader(h, leader, first, second)
    fence(h, leader)
    assert (t0(h).leader, t0(h).isr, t0(h).elr) == (NO_LEADER, (leader,), ())
    reregister(h, leader, clean=False)
    assert t0(h).leader == leader


def test_an_unclean_shutdown_takes_the_broker_out_of_every_elr() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    fence(h, first)  # the ELR member goes down; the leader stays
    assert t0(h).elr == (first,)
    reregister(h, first, clean=False)
    assert t0(h).elr == ()
    fence(h, leader)  # nobody eligible is left: offline rather than a stale leader
    assert (t0(h).leader, t0(h).isr, t0(h).elr) == (NO_LEADER, (), (leader,))


def test_a_retried_registration_of_the_same_process_keeps_the_broker_eligible() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    fence(h, first)
    assert h.heartbeat(first, want_shutdown=True).should_shut_down
    for _ in range(2):  # the first answer was lost: the same incarnation registers again
        response = h.run(
            h.core.handle_register_broker_request,
            RegisterBrokerRequest(broker_id=first, incarnation_id="again"),
        )
        assert response.error_code is ErrorCode.NONE
    assert t0(h).elr == ()  # the first registration named no clean shutdown: out
    h2, leader, first, second = three_replicas()
    shrink_to_leader(h2, leader, first, second)
    fence(h2, first)
    assert h2.heartbeat(first, want_shutdown=True).should_shut_down
    old = h2.image.brokers[first].broker_epoch
    for _ in range(2):
        h2.run(
            h2.core.handle_register_broker_request,
            RegisterBrokerRequest(
                broker_id=first, incarnation_id="again", previous_broker_epoch=old
            ),
        )
    assert t0(h2).elr == (first,)  # clean, and its retry is the same process: still eligible


def test_a_clean_shutdown_keeps_the_broker_eligible() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    fence(h, first)
    reregister(h, first, clean=True)
    assert t0(h).elr == (first,)
    fence(h, leader)
    assert (t0(h).leader, t0(h).isr) == (first, (first,))


def test_the_last_replica_standing_after_an_unclean_restart_is_not_elected_over_the_elr() -> None:
    """KIP-966's scenario: the leader alone in the ISR loses power and restarts; the replica
    that left the ISR with every committed record leads instead of it."""
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    fence(h, first)  # both down: the ISR empties into the ELR
    fence(h, leader)
    assert (t0(h).leader, t0(h).isr, set(t0(h).elr)) == (NO_LEADER, (), {first, leader})
    assert t0(h).last_known_elr == (leader,)
    reregister(h, leader, clean=False)  # lost its unflushed tail: not eligible any more
    assert (t0(h).leader, t0(h).elr) == (NO_LEADER, (first,))
    reregister(h, first, clean=True)
    assert (t0(h).leader, t0(h).isr, t0(h).elr) == (first, (first,), ())
    assert t0(h).last_known_elr == ()


def test_with_isr_and_elr_empty_the_last_known_leader_leads_again_uncleanly() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    fence(h, first)
    fence(h, leader)
    fence(h, second)
    reregister(h, first, clean=False)
    reregister(h, second, clean=False)
    assert t0(h).leader == NO_LEADER  # not the last known leader: nobody is eligible
    reregister(h, leader, clean=False)
    p = t0(h)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (leader, (leader,), (), ())
    assert p.leader_recovery_state is LeaderRecoveryState.RECOVERING  # KIP-704: unclean


def test_the_isr_is_preferred_over_the_elr() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    h.run(
        h.core.handle_elect_leaders_request,
        ElectLeadersRequest(
            election_type=ElectionType.PREFERRED, partitions=(TopicPartition("t", 0),)
        ),
    )
    assert (t0(h).leader, t0(h).isr, t0(h).elr) == (leader, (leader,), (first,))


def test_unclean_election_comes_after_the_elr() -> None:
    h, leader, first, second = three_replicas(unclean=True)
    shrink_to_leader(h, leader, first, second)
    fence(h, leader)
    p = t0(h)
    assert (p.leader, p.isr) == (first, (first,))
    assert p.leader_recovery_state is LeaderRecoveryState.RECOVERED


def test_a_fenced_elr_member_is_not_elected_until_it_is_back() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    fence(h, first)
    fence(h, leader)
    assert t0(h).leader == NO_LEADER
    assert not h.heartbeat(second).is_fenced  # an out-of-sync replica, never eligible
    assert t0(h).leader == NO_LEADER
    reregister(h, first, clean=True)
    assert t0(h).leader == first


def test_changing_min_insync_replicas_clears_the_elr() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    response = h.run(
        h.core.handle_incremental_alter_configs_request,
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name="t",
                    configs=(
                        AlterableConfig(
                            name="min.insync.replicas", op=AlterConfigOp.SET, value="1"
                        ),
                    ),
                ),
            )
        ),
    )
    assert response.responses[0].error_code is ErrorCode.NONE
    # With min ISR 1 the leader's HW moves on alone: `first` is no longer a safe leader.
    assert t0(h).elr == ()


def test_a_replica_reported_offline_leaves_the_elr() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    topic_id = h.image.topic_ids_by_name["t"]
    h.run(
        h.core.handle_broker_heartbeat_request,
        _heartbeat_with_offline(h, first, TopicIdPartition(topic_id=topic_id, partition=0)),
    )
    assert t0(h).elr == ()


def _heartbeat_with_offline(
    h: ControllerHarness, broker: int, tp: TopicIdPartition
) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(
        broker_id=broker,
        broker_epoch=h.image.brokers[broker].broker_epoch,
        current_metadata_offset=h.image.last_offset,
        offline_replicas=(tp,),
    )


def test_with_elr_off_the_elr_fields_are_cleared_on_the_next_change() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    off = ControllerHarness(
        h.image, config=ControllerConfig(eligible_leader_replicas_enable=False), epoch=2
    )
    fence(off, leader)
    p = off.partition("t", 0)
    assert (p.leader, p.isr, p.elr) == (NO_LEADER, (leader,), ())


def test_elr_fields_survive_the_record_codec_and_snapshots() -> None:
    h, leader, first, second = three_replicas()
    shrink_to_leader(h, leader, first, second)
    fence(h, first)
    fence(h, leader)
    again = MetadataImage.from_snapshot(h.image.to_snapshot())
    p = again.partition_by_name(TopicPartition("t", 0))
    assert p is not None and (p.elr, p.last_known_elr) == (t0(h).elr, t0(h).last_known_elr)
    description = again.describe_topic("t")
    assert description is not None
    assert set(description.partitions[0].elr) == {first, leader}
    assert description.partitions[0].last_known_elr == (leader,)


def test_a_change_record_with_elr_overlapping_the_isr_is_refused_on_replay() -> None:
    h, leader, _, _ = three_replicas()
    topic_id = h.image.topic_ids_by_name["t"]
    with pytest.raises(InvariantViolation):
        h.image.apply(
            PartitionChangeRecord(
                topic_id=topic_id, partition=0, eligible_leader_replicas=(leader,)
            ),
            h.image.last_offset + 1,
        )


def test_an_elr_leader_that_alone_meets_min_isr_clears_the_other_eligible_replicas() -> None:
    current = PartitionRegistration(replicas=(1, 2, 3), isr=(), leader=NO_LEADER, elr=(1, 2))
    record = PartitionChangeBuilder(
        current, "id", 0, is_acceptable_leader=lambda r: r in (1, 2), elr=ElrPolicy(min_isr=1)
    ).build()
    assert record is not None
    assert (record.leader, record.isr, record.eligible_leader_replicas) == (1, (1,), ())
