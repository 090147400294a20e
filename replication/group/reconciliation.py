"""One member's next current assignment: Kafka's ``CurrentAssignmentBuilder`` (KIP-848).

The rule that keeps a partition from having two owners: a member receives a partition of its
target only once no other member holds it (assigned or still being revoked). Hence the states:

* ``STABLE``: the member has its target of ``member_epoch``;
* ``UNREVOKED_PARTITIONS``: the member must first give up partitions no longer in its target;
  it stays in its epoch, and moves on only once its heartbeat's owned partitions no longer
  hold any of them;
* ``UNRELEASED_PARTITIONS``: the member is in the target epoch but some target partitions are
  still held by others; it gets them on a later heartbeat, once they are released.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .records import Assignment
from .state import as_dict, canonical
from .types import MemberState


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def reconcile(
    current: MemberAssignment,
    target_epoch: int,
    target: Assignment,
    held_by_others: Mapping[tuple[str, int], int],
    owned: Assignment | None,
) -> MemberAssignment:
    """The member's next assignment. ``held_by_others`` maps the partitions other members hold
    (assigned or pending revocation) to their epoch; ``owned`` is what the member's heartbeat
    says it owns (None when the heartbeat did not say)."""
    match current.state:
        case MemberState.STABLE:
            if current.member_epoch == target_epoch:
                return current
        case MemberState.UNREVOKED_PARTITIONS:
            if _owns_any(owned, current.pending_revocation):
                return current  # still waiting for the member to revoke
        case MemberState.UNRELEASED_PARTITIONS | MemberState.UNKNOWN:
            pass
    return _next(current, target_epoch, target, held_by_others, owned)


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Kafka's ``ownsRevokedPartitions``: with no owned list, assume it still owns them."""
    if not partitions:
        return False
    if owned is None:
        return True
    mine = as_dict(owned)
    return any(p in mine.get(topic_id, set()) for topic_id, ps in partitions for p in ps)


def _next(
    current: MemberAssignment,
    target_epoch: int,
    target: Assignment,
    held_by_others: Mapping[tuple[str, int], int],
    owned: Assignment | None,
) -> MemberAssignment:
    have = as_dict(current.assigned)
    want = as_dict(target)
    kept: dict[str, set[int]] = {}
    revoking: dict[str, set[int]] = {}
    assigning: dict[str, set[int]] = {}
    unreleased = False
    for topic_id in sorted(set(have) | set(want)):
        h, w = have.get(topic_id, set()), want.get(topic_id, set())
        kept[topic_id] = h & w
        revoking[topic_id] = h - w
        new = w - h
        free = {p for p in new if (topic_id, p) not in held_by_others}
        unreleased = unreleased or free != new
        assigning[topic_id] = free
    revoke = canonical(revoking)
    if revoke and _owns_any(owned, revoke):
        # Revoke first: keep the epoch, withhold new partitions until the member revoked.
        return MemberAssignment(
            member_epoch=current.member_epoch,
            previous_member_epoch=current.previous_member_epoch,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=canonical(kept),
            pending_revocation=revoke,
        )
    for topic_id, ps in assigning.items():
        kept.setdefault(topic_id, set()).update(ps)
    new_epoch = target_epoch
    return MemberAssignment(
        member_epoch=new_epoch,
        previous_member_epoch=(
            current.member_epoch
            if new_epoch != current.member_epoch
            else current.previous_member_epoch
        ),
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        assigned=canonical(kept),
        pending_revocation=(),
    )
