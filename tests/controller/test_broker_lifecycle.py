"""Broker registration, heartbeats, fencing and controlled shutdown (KIP-631, KIP-841)."""

from __future__ import annotations

from kraft.controller import (
    AllocateProducerIdsRequest,
    AlterableConfig,
    AlterConfigsResource,
    ControllerConfig,
    CreatableTopic,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
    RegisterBrokerRequest,
    UnregisterBrokerRequest,
)
from kraft.metadata import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    BrokerState,
    ConfigResourceType,
    LeaderRecoveryState,
    PartitionChangeRecord,
    RegisterBrokerRecord,
)
from kraft.metadata.image import PartitionRegistration
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness


def cluster_with_topic(
    *brokers: int, rf: int, configs: dict[str, str] | None = None, elr: bool = True
) -> ControllerHarness:
    """``elr=False``: eligible leader replicas off (KIP-841's rule: the last ISR member stays)."""
    h = ControllerHarness(config=ControllerConfig(eligible_leader_replicas_enable=elr))
    h.start_brokers(*brokers)
    response = h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="t", num_partitions=1, replication_factor=rf, configs=configs or {}
                ),
            )
        ),
    )
    assert response.topics[0].error_code is ErrorCode.NONE
    return h


def t0(h: ControllerHarness) -> PartitionRegistration:
    return h.partition("t", 0)


def test_registration_starts_fenced_with_broker_epoch_equal_to_its_record_offset() -> None:
    h = ControllerHarness()
    base = h.core.next_offset
    result = h.propose(
        h.core.handle_register_broker_request,
        RegisterBrokerRequest(broker_id=1, incarnation_id="a"),
    )
    assert result.response.broker_epoch == base
    assert isinstance(result.records[0], RegisterBrokerRecord)
    h.commit()
    registration = h.image.brokers[1]
    assert registration.state is BrokerState.FENCED and registration.broker_epoch == base


def test_broker_is_unfenced_only_once_its_metadata_offset_reaches_its_registration() -> None:
    h = ControllerHarness()
    h.run(
        h.core.handle_register_broker_request,
        RegisterBrokerRequest(broker_id=1, incarnation_id="a"),
    )
    h.run(
        h.core.handle_register_broker_request,
        RegisterBrokerRequest(broker_id=2, incarnation_id="b"),
    )
    epoch = h.image.brokers[2].broker_epoch
    behind = h.heartbeat(2, metadata_offset=epoch - 1)
    assert behind.is_fenced and not behind.is_caught_up
    caught_up = h.heartbeat(2, metadata_offset=epoch)
    assert not caught_up.is_fenced and caught_up.is_caught_up
    assert h.image.brokers[2].state is BrokerState.UNFENCED


def test_caught_up_broker_that_wants_fence_stays_fenced() -> None:
    h = ControllerHarness()
    h.register(1)
    assert h.heartbeat(1, want_fence=True).is_fenced


def test_heartbeat_from_unknown_broker_is_broker_id_not_registered() -> None:
    h = ControllerHarness()
    assert h.heartbeat(7, broker_epoch=0).error_code is ErrorCode.BROKER_ID_NOT_REGISTERED


def test_heartbeat_with_stale_broker_epoch_is_rejected() -> None:
    h = ControllerHarness()
    epoch = h.register(1)
    response = h.heartbeat(1, broker_epoch=epoch - 1)
    assert response.error_code is ErrorCode.STALE_BROKER_EPOCH


def test_new_incarnation_of_a_live_broker_is_duplicate_broker_registration() -> None:
    h = ControllerHarness()
    h.start_brokers(1)
    response = h.run(
        h.core.handle_register_broker_request,
        RegisterBrokerRequest(broker_id=1, incarnation_id="other"),
    )
    assert response.error_code is ErrorCode.DUPLICATE_BROKER_REGISTRATION


def test_new_incarnation_after_the_session_expired_gets_a_larger_broker_epoch() -> None:
    h = ControllerHarness()
    h.start_brokers(1)
    old_epoch = h.image.brokers[1].broker_epoch
    h.now_ms = 10_000
    new_epoch = h.register(1, incarnation="restarted")
    assert new_epoch > old_epoch
    assert h.image.brokers[1].incarnation_id == "restarted"
    assert h.image.brokers[1].state is BrokerState.FENCED


def test_same_incarnation_re_registering_gets_a_new_epoch() -> None:
    h = ControllerHarness()
    first = h.register(1, incarnation="x")
    assert h.register(1, incarnation="x") > first


def test_re_registration_moves_leadership_off_the_old_incarnation_in_the_same_batch() -> None:
    h = cluster_with_topic(1, 2, 3, rf=3)
    leader = t0(h).leader
    h.now_ms = 10_000
    for b in (1, 2, 3):
        if b != leader:
            h.heartbeat(b)
    result = h.propose(
        h.core.handle_register_broker_request,
        RegisterBrokerRequest(broker_id=leader, incarnation_id="restarted"),
    )
    assert isinstance(result.records[0], RegisterBrokerRecord)
    assert any(isinstance(r, PartitionChangeRecord) for r in result.records)
    h.commit()
    assert t0(h).leader not in (leader, NO_LEADER) and leader not in t0(h).isr


def test_fencing_removes_broker_from_isr_and_moves_leadership_atomically() -> None:
    """Reference: KIP-841 — the fence and its partition changes are one batch."""
    h = cluster_with_topic(1, 2, 3, rf=3)
    before = t0(h)
    leader = before.leader
    survivors = [b for b in (1, 2, 3) if b != leader]
    h.now_ms = 2_000
    for b in survivors:
        h.heartbeat(b)
    batch = h.tick(3_500)
    assert batch[0] == BrokerRegistrationChangeRecord(
        broker_id=leader, broker_epoch=h.image.brokers[leader].broker_epoch, fenced=True
    )
    assert batch[1:] == (
        PartitionChangeRecord(
            topic_id=h.image.topic("t").topic_id,  # type: ignore[union-attr]
            partition=0,
            isr=tuple(b for b in before.isr if b != leader),
            leader=next(r for r in before.replicas if r != leader),
        ),
    )
    after = t0(h)
    assert after.leader_epoch == before.leader_epoch + 1
    assert after.partition_epoch == before.partition_epoch + 1


def test_heartbeats_keep_the_session_alive() -> None:
    h = cluster_with_topic(1, 2, rf=2)
    h.now_ms = 2_500
    h.heartbeat(1)
    h.heartbeat(2)
    assert h.tick(5_000) == ()
    # One broker per tick (Kafka's maybeFenceOneStaleBroker); the next tick comes at once.
    fenced = h.tick(5_501) + h.tick(5_501)
    assert {r.broker_id for r in fenced if isinstance(r, BrokerRegistrationChangeRecord)} == {1, 2}


def test_fencing_the_last_isr_member_keeps_it_in_the_isr_without_leader() -> None:
    h = cluster_with_topic(1, rf=1, elr=False)
    h.tick(3_001)
    p = t0(h)
    assert (p.leader, p.isr) == (NO_LEADER, (1,))
    assert h.image.offline_partitions()


def test_last_isr_member_coming_back_is_re_elected_in_its_unfence_batch() -> None:
    h = cluster_with_topic(1, 2, rf=2, elr=False)
    h.tick(3_001)
    h.tick(3_001)  # both fenced, one per tick: ISR keeps the last one
    p = t0(h)
    assert p.leader == NO_LEADER and len(p.isr) == 1
    last = p.isr[0]
    other = 2 if last == 1 else 1
    h.now_ms = 4_000
    assert not h.heartbeat(other).is_fenced
    assert t0(h).leader == NO_LEADER  # not in the ISR, unclean disabled
    assert not h.heartbeat(last).is_fenced
    assert t0(h).leader == last


def _leader_alone_in_isr_then_dead(h: ControllerHarness) -> tuple[int, int]:
    """Shrink t-0's ISR to its leader, then let only the leader's session expire."""
    p = t0(h)
    leader, follower = p.leader, next(r for r in p.replicas if r != p.leader)
    assert h.alter_isr("t", 0, (leader,)).topics[0].partitions[0].error_code is ErrorCode.NONE
    h.now_ms = 1_000
    h.heartbeat(follower)
    h.tick(3_500)
    return leader, follower


def test_fencing_with_unclean_election_enabled_elects_an_out_of_sync_replica() -> None:
    h = cluster_with_topic(1, 2, rf=2, configs={"unclean.leader.election.enable": "true"})
    _, follower = _leader_alone_in_isr_then_dead(h)
    after = t0(h)
    assert after.leader == follower and after.isr == (follower,)
    assert after.leader_recovery_state is LeaderRecoveryState.RECOVERING


def test_without_unclean_election_the_partition_stays_offline() -> None:
    h = cluster_with_topic(1, 2, rf=2, elr=False)
    leader, _ = _leader_alone_in_isr_then_dead(h)
    assert (t0(h).leader, t0(h).isr) == (NO_LEADER, (leader,))


def test_enabling_unclean_election_lets_tick_revive_an_offline_partition() -> None:
    h = cluster_with_topic(1, 2, rf=2)
    _, follower = _leader_alone_in_isr_then_dead(h)
    h.now_ms = 3_600
    h.heartbeat(follower)
    response = h.run(
        h.core.handle_incremental_alter_configs_request,
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name="t",
                    configs=(AlterableConfig(name="unclean.leader.election.enable", value="true"),),
                ),
            )
        ),
    )
    assert response.responses[0].error_code is ErrorCode.NONE
    assert t0(h).leader == NO_LEADER  # the config change alone elects nobody...
    # ...so the core asks for a tick at once, not at the next session expiry...
    assert h.core.next_deadline_ms() == 3_600
    h.tick(3_700)  # ...which does
    assert t0(h).leader == follower
    assert t0(h).leader_recovery_state is LeaderRecoveryState.RECOVERING


def test_a_tick_asks_for_no_other_tick_until_an_input_or_a_session_expiry() -> None:
    h = cluster_with_topic(1, 2, rf=2)
    h.tick(100)
    h.now_ms = 2_000
    h.heartbeat(1)  # no records: the pending image is unchanged
    assert h.core.next_deadline_ms() == 3_001  # broker 2, last heard at 0
    h.register(3)  # a new record: a tick is wanted at once
    assert h.core.next_deadline_ms() == 2_000
    assert h.tick(2_000) == ()
    assert h.core.next_deadline_ms() == 3_001


def test_a_standby_controller_has_no_deadline() -> None:
    h = cluster_with_topic(1, 2, rf=2)
    h.core.resign()
    assert h.core.next_deadline_ms() is None


def test_controlled_shutdown_moves_leaders_first_then_lets_the_broker_go() -> None:
    h = cluster_with_topic(1, 2, 3, rf=3)
    leader = t0(h).leader
    first = h.heartbeat(leader, want_shutdown=True)
    assert not first.should_shut_down and not first.is_fenced
    assert h.image.brokers[leader].state is BrokerState.CONTROLLED_SHUTDOWN
    assert t0(h).leader != leader and leader not in t0(h).isr
    second = h.heartbeat(leader, want_shutdown=True)
    assert second.should_shut_down and second.is_fenced
    assert h.image.brokers[leader].state is BrokerState.FENCED


def test_controlled_shutdown_of_a_broker_that_leads_nothing_is_immediate() -> None:
    h = ControllerHarness()
    h.start_brokers(1)
    response = h.heartbeat(1, want_shutdown=True)
    assert response.should_shut_down and response.is_fenced


def test_fenced_broker_wanting_shutdown_may_go_right_away() -> None:
    h = ControllerHarness()
    h.register(1)
    response = h.heartbeat(1, want_shutdown=True)
    assert response.should_shut_down and not h.core.inflight_count


def test_want_fence_from_an_unfenced_broker_fences_it_and_moves_its_leaderships() -> None:
    h = cluster_with_topic(1, 2, rf=2)
    leader = t0(h).leader
    assert h.heartbeat(leader, want_fence=True).is_fenced
    assert t0(h).leader not in (leader, NO_LEADER)


def test_fencing_two_members_of_one_isr_in_successive_ticks_keeps_a_consistent_isr() -> None:
    h = cluster_with_topic(1, 2, 3, rf=3)
    h.now_ms = 2_000
    h.heartbeat(3)
    h.tick(3_500)  # 1 and 2 expire together: one per tick
    h.tick(3_500)
    p = t0(h)
    assert p.isr == (3,) and p.leader == 3


def test_becoming_active_gives_every_broker_a_fresh_session() -> None:
    h = cluster_with_topic(1, 2, rf=2)
    h.core.resign()
    h.core.become_active(epoch=2, next_offset=h.core.committed_image.last_offset + 1, now_ms=50_000)
    h.epoch = 2
    assert h.tick(52_000) == ()
    assert h.core.next_deadline_ms() == 53_001


def test_unregister_moves_leadership_then_removes_the_broker() -> None:
    h = cluster_with_topic(1, 2, rf=2)
    leader = t0(h).leader
    response = h.run(
        h.core.handle_unregister_broker_request, UnregisterBrokerRequest(broker_id=leader)
    )
    assert response.error_code is ErrorCode.NONE
    assert h.image.broker(leader) is None and t0(h).leader not in (leader, NO_LEADER)
    missing = h.run(h.core.handle_unregister_broker_request, UnregisterBrokerRequest(broker_id=99))
    assert missing.error_code is ErrorCode.BROKER_ID_NOT_REGISTERED


def test_producer_ids_are_allocated_in_blocks_of_1000() -> None:
    h = ControllerHarness()
    h.start_brokers(1)
    epoch = h.image.brokers[1].broker_epoch
    first = h.run(
        h.core.handle_allocate_producer_ids_request,
        AllocateProducerIdsRequest(broker_id=1, broker_epoch=epoch),
    )
    second = h.run(
        h.core.handle_allocate_producer_ids_request,
        AllocateProducerIdsRequest(broker_id=1, broker_epoch=epoch),
    )
    assert (first.producer_id_start, first.producer_id_len) == (0, 1000)
    assert second.producer_id_start == 1000 and h.image.next_producer_id == 2000
    stale = h.run(
        h.core.handle_allocate_producer_ids_request,
        AllocateProducerIdsRequest(broker_id=1, broker_epoch=epoch + 1),
    )
    assert stale.error_code is ErrorCode.STALE_BROKER_EPOCH


def test_a_new_incarnation_may_register_right_after_a_completed_controlled_shutdown() -> None:
    h = ControllerHarness()
    h.start_brokers(1)
    assert h.heartbeat(1, want_shutdown=True).should_shut_down
    assert h.register(1, incarnation="next") > 0
    assert h.image.brokers[1].incarnation_id == "next"


def test_a_fenced_broker_that_still_heartbeats_is_protected_from_a_duplicate() -> None:
    h = ControllerHarness()
    h.register(1, incarnation="first")
    h.heartbeat(1, want_fence=True)
    response = h.run(
        h.core.handle_register_broker_request,
        RegisterBrokerRequest(broker_id=1, incarnation_id="impostor"),
    )
    assert response.error_code is ErrorCode.DUPLICATE_BROKER_REGISTRATION


def test_a_follower_only_broker_shuts_down_at_once_and_leaves_every_isr() -> None:
    h = cluster_with_topic(1, 2, rf=2)
    follower = next(r for r in t0(h).replicas if r != t0(h).leader)
    response = h.heartbeat(follower, want_shutdown=True)
    assert response.should_shut_down and response.is_fenced
    assert follower not in t0(h).isr


def test_a_fenced_dead_broker_has_no_session_on_a_new_controller_so_its_restart_registers() -> None:
    """Before: every new active controller gave every registered broker a fresh session, so
    after each controller change a restarted incarnation of a dead, already fenced broker got
    DUPLICATE_BROKER_REGISTRATION for another session timeout (61 s of a 63 s restart in
    ``kraft bench metadata`` at 10,000 partitions, with the quorum changing leader meanwhile).
    Kafka's new controller gives a fenced broker no valid session."""
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.now_ms = 2_000
    h.heartbeat(2)
    while not h.image.brokers[1].fenced:  # broker 1 died: fenced on its session timeout
        h.tick(3_500)
    successor = ControllerHarness(h.image, now_ms=3_600, epoch=h.epoch + 1)
    response = successor.run(
        successor.core.handle_register_broker_request,
        RegisterBrokerRequest(broker_id=1, incarnation_id="restarted"),
    )
    assert response.error_code is ErrorCode.NONE
    # a live broker keeps its fresh session: another incarnation is still a duplicate
    duplicate = successor.run(
        successor.core.handle_register_broker_request,
        RegisterBrokerRequest(broker_id=2, incarnation_id="impostor"),
    )
    assert duplicate.error_code is ErrorCode.DUPLICATE_BROKER_REGISTRATION
