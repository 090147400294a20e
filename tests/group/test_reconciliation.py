"""CurrentAssignmentBuilder: revoke first, then assign only released partitions."""

from __future__ import annotations

from replication.group import MemberState
from replication.group.reconciliation import MemberAssignment, reconcile

T = "T"


def member(
    epoch: int, state: MemberState, assigned: tuple[int, ...], pending: tuple[int, ...] = ()
) -> MemberAssignment:
    return MemberAssignment(
        member_epoch=epoch,
        previous_member_epoch=epoch - 1,
        state=state,
        assigned=((T, assigned),) if assigned else (),
        pending_revocation=((T, pending),) if pending else (),
    )


def test_partitions_to_revoke_keep_the_epoch_and_withhold_new_ones() -> None:
    m = member(3, MemberState.STABLE, (0, 1))
    r = reconcile(m, 4, ((T, (1, 2)),), {}, ((T, (0, 1)),))
    assert r.state is MemberState.UNREVOKED_PARTITIONS and r.member_epoch == 3
    assert r.assigned == ((T, (1,)),) and r.pending_revocation == ((T, (0,)),)
    # still owns 0: nothing moves
    assert reconcile(r, 4, ((T, (1, 2)),), {}, ((T, (0, 1)),)) == r
    # without an owned list the coordinator assumes it still owns them
    assert reconcile(r, 4, ((T, (1, 2)),), {}, None) == r
    # revoked: the target epoch, and 2 since nobody holds it
    done = reconcile(r, 4, ((T, (1, 2)),), {}, ((T, (1,)),))
    assert done.state is MemberState.STABLE and done.member_epoch == 4
    assert done.assigned == ((T, (1, 2)),) and done.previous_member_epoch == 3


def test_partitions_held_by_another_member_are_unreleased_until_freed() -> None:
    m = member(3, MemberState.STABLE, (1,))
    r = reconcile(m, 4, ((T, (1, 2)),), {(T, 2): 3}, ((T, (1,)),))
    assert r.state is MemberState.UNRELEASED_PARTITIONS and r.member_epoch == 4
    assert r.assigned == ((T, (1,)),)
    freed = reconcile(r, 4, ((T, (1, 2)),), {}, ((T, (1,)),))
    assert freed.state is MemberState.STABLE and freed.assigned == ((T, (1, 2)),)


def test_a_stable_member_at_the_target_epoch_is_left_alone() -> None:
    m = member(4, MemberState.STABLE, (1,))
    assert reconcile(m, 4, ((T, (1, 2)),), {}, None) is m
