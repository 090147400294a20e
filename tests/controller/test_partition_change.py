"""PartitionChangeBuilder: Kafka's election rules and minimal change records."""

from __future__ import annotations

from kraft.controller import Election, PartitionChangeBuilder
from kraft.metadata import NO_LEADER, LeaderRecoveryState, PartitionChangeRecord
from kraft.metadata.image import PartitionRegistration


def partition(
    replicas: tuple[int, ...], isr: tuple[int, ...], leader: int
) -> PartitionRegistration:
    return PartitionRegistration(replicas=replicas, isr=isr, leader=leader, leader_epoch=5)


def live(*ids: int) -> object:
    return lambda b: b in ids


def build(
    p: PartitionRegistration,
    *,
    alive: tuple[int, ...],
    isr: tuple[int, ...] | None = None,
    election: Election = Election.ONLINE,
    unclean: bool = False,
) -> PartitionChangeRecord | None:
    builder = PartitionChangeBuilder(
        p, "t-id", 0, is_acceptable_leader=lambda b: b in alive, unclean_allowed=unclean
    ).set_election(election)
    if isr is not None:
        builder.set_target_isr(isr)
    return builder.build()


def test_no_change_builds_no_record() -> None:
    assert build(partition((1, 2, 3), (1, 2, 3), 1), alive=(1, 2, 3)) is None


def test_isr_shrink_keeps_the_leader_and_sets_only_the_isr() -> None:
    record = build(partition((1, 2, 3), (1, 2, 3), 1), alive=(1, 2, 3), isr=(1, 2))
    assert record == PartitionChangeRecord(topic_id="t-id", partition=0, isr=(1, 2))


def test_dead_leader_is_replaced_by_first_live_isr_member_in_replicas_order() -> None:
    record = build(partition((1, 2, 3), (3, 2, 1), 1), alive=(2, 3), isr=(3, 2))
    assert record is not None and record.leader == 2


def test_a_live_current_leader_is_kept_even_if_not_preferred() -> None:
    assert build(partition((1, 2, 3), (1, 2, 3), 2), alive=(1, 2, 3)) is None


def test_preferred_election_moves_leadership_to_the_first_replica() -> None:
    record = build(partition((1, 2, 3), (1, 2, 3), 2), alive=(1, 2, 3), election=Election.PREFERRED)
    assert record is not None and record.leader == 1 and record.isr is None


def test_preferred_election_keeps_leader_when_preferred_is_not_in_isr() -> None:
    p = partition((1, 2, 3), (2, 3), 2)
    assert build(p, alive=(1, 2, 3), election=Election.PREFERRED) is None


def test_no_live_isr_member_means_no_leader_when_unclean_is_disabled() -> None:
    record = build(partition((1, 2, 3), (1,), 1), alive=(2, 3))
    assert record is not None and record.leader == NO_LEADER and record.isr is None


def test_unclean_election_picks_a_live_replica_with_isr_of_itself_and_recovering_state() -> None:
    """Reference: KIP-704 — an uncleanly elected leader starts RECOVERING with ISR=[leader]."""
    record = build(partition((1, 2, 3), (1,), 1), alive=(3,), unclean=True)
    assert record == PartitionChangeRecord(
        topic_id="t-id",
        partition=0,
        isr=(3,),
        leader=3,
        leader_recovery_state=LeaderRecoveryState.RECOVERING,
    )


def test_unclean_election_type_forces_unclean_even_if_topic_disallows() -> None:
    record = build(partition((1, 2), (1,), NO_LEADER), alive=(2,), election=Election.UNCLEAN)
    assert record is not None and record.leader == 2


def test_clean_election_is_preferred_over_unclean_when_an_isr_member_is_live() -> None:
    record = build(partition((1, 2, 3), (2,), NO_LEADER), alive=(2, 3), unclean=True)
    assert record is not None and record.leader == 2 and record.leader_recovery_state is None
