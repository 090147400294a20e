"""A broker reports replicas whose log failed (a disk error) in its heartbeats: the controller
moves their leadership and takes them out of the ISR, never elects them while reported, and
lets them rejoin once the broker stops reporting them (kraft.controller.offline_replicas)."""

from __future__ import annotations

from kraft.controller import (
    BrokerHeartbeatRequest,
    ControllerConfig,
    CreatableTopic,
    CreateTopicsRequest,
    ElectionType,
    ElectLeadersRequest,
    TopicIdPartition,
)
from kraft.metadata import NO_LEADER
from kraft.metadata.image import PartitionRegistration
from kraft.types import TopicPartition
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness


def cluster(
    rf: int = 3, configs: dict[str, str] | None = None, *, elr: bool = True
) -> ControllerHarness:
    """``elr=False``: eligible leader replicas off (KIP-841's rule: the last ISR member stays)."""
    h = ControllerHarness(config=ControllerConfig(eligible_leader_replicas_enable=elr))
    h.start_brokers(1, 2, 3)
    response = h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="t",
                    num_partitions=1,
                    replication_factor=rf,
                    configs=configs or {},
                ),
            )
        ),
    )
    assert response.topics[0].error_code is ErrorCode.NONE
    return h


def t0(h: ControllerHarness) -> PartitionRegistration:
    return h.partition("t", 0)


def heartbeat(h: ControllerHarness, broker_id: int, *offline: TopicPartition) -> int:
    """A heartbeat of ``broker_id`` reporting ``offline``; the number of records it wrote."""
    image = h.core.pending_image
    result = h.propose(
        h.core.handle_broker_heartbeat_request,
        BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=image.brokers[broker_id].broker_epoch,
            current_metadata_offset=h.image.last_offset,
            offline_replicas=tuple(
                TopicIdPartition(topic_id=image.topic_ids_by_name[tp.topic], partition=tp.partition)
                for tp in offline
            ),
        ),
    )
    assert result.response.error_code is ErrorCode.NONE
    h.commit()
    return len(result.records)


T0 = TopicPartition("t", 0)


def test_a_leader_reporting_its_replica_offline_loses_the_leadership_and_leaves_the_isr() -> None:
    h = cluster()
    before = t0(h)
    leader = before.leader
    assert len(before.isr) == 3

    assert heartbeat(h, leader, T0) == 1

    after = t0(h)
    assert after.leader not in (leader, NO_LEADER) and after.leader in before.isr
    assert leader not in after.isr and len(after.isr) == 2
    assert after.offline_replicas == (leader,)
    assert after.leader_epoch == before.leader_epoch + 1
    description = h.image.describe_topic("t")
    assert description is not None and description.partitions[0].offline_replicas == (leader,)
    assert heartbeat(h, leader, T0) == 0  # the same report again changes nothing


def test_an_offline_replica_is_never_elected_and_may_not_rejoin_the_isr_until_cleared() -> None:
    h = cluster()
    offline = t0(h).leader
    heartbeat(h, offline, T0)

    preferred = h.run(
        h.core.handle_elect_leaders_request,
        ElectLeadersRequest(election_type=ElectionType.PREFERRED, partitions=(T0,)),
    )
    assert t0(h).leader != offline
    if offline == t0(h).preferred_leader:
        code = preferred.replica_election_results[0].partition_results[0].error_code
        assert code is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE

    rejoin = h.alter_isr("t", 0, (*t0(h).isr, offline))
    assert rejoin.topics[0].partitions[0].error_code is ErrorCode.INELIGIBLE_REPLICA
    assert offline not in t0(h).isr

    # The broker reopened the log: it stops reporting it, and the leader may add it back.
    assert heartbeat(h, offline) == 1
    assert t0(h).offline_replicas == () and offline not in t0(h).isr
    rejoin = h.alter_isr("t", 0, (*t0(h).isr, offline))
    assert rejoin.topics[0].partitions[0].error_code is ErrorCode.NONE
    assert offline in t0(h).isr


def test_the_last_isr_member_stays_leaderless_while_offline_and_leads_again_when_cleared() -> None:
    h = cluster(rf=1, configs={"unclean.leader.election.enable": "true"}, elr=False)
    only = t0(h).leader

    heartbeat(h, only, T0)
    assert (t0(h).leader, t0(h).isr, t0(h).offline_replicas) == (NO_LEADER, (only,), (only,))
    h.tick(h.now_ms + 10)  # elections for leaderless partitions skip it too
    assert t0(h).leader == NO_LEADER

    heartbeat(h, only)
    assert (t0(h).leader, t0(h).isr, t0(h).offline_replicas) == (only, (only,), ())


def test_unclean_election_skips_an_offline_replica() -> None:
    h = cluster(configs={"unclean.leader.election.enable": "true"})
    first = t0(h).leader
    others = [b for b in t0(h).replicas if b != first]
    h.alter_isr("t", 0, (first,))  # the followers fell behind
    heartbeat(h, others[0], T0)
    heartbeat(h, first, T0)  # the leader's log fails too
    assert t0(h).leader == others[1]  # unclean, but never an offline replica
    assert t0(h).isr == (others[1],)
