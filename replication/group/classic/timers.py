"""The classic group's timers, as deadlines a ``tick`` runs (Kafka's timer keys).

=========================  ==========================================  =========================
timer                      armed                                       when it fires
=========================  ==========================================  =========================
member heartbeat           join completes, heartbeat, sync answered,   remove the member unless
(``session.timeout.ms``)   load (fresh); a new member: the new-member  it is parked in a Join or
                           join timeout                                SyncGroup (not new)
pending member (KIP-394)   MEMBER_ID_REQUIRED handed out               forget the id
join phase                 PreparingRebalance: the largest rebalance   complete the join phase
                           timeout; from Empty: the initial delay,     (the initial delay
                           extended while new members arrive           extends while members
                                                                       keep arriving)
sync                       join completes: the largest rebalance       members that sent no
                           timeout                                     SyncGroup are removed;
                                                                       rebalance
=========================  ==========================================  =========================

Timers are volatile: after a load, the first ``tick`` gives every member a fresh session and
a group loaded in CompletingRebalance a fresh sync timeout.
"""

from __future__ import annotations

from . import rebalance
from .group import ClassicGroup
from .rebalance import Out
from .types import ClassicGroupConfig, ClassicGroupState

S = ClassicGroupState
MAX_PASSES = 1_000


def next_deadline_ms(group: ClassicGroup) -> int | None:
    if not group.timers_armed:
        return 0
    deadlines = list(group.pending_members.values())
    deadlines.extend(
        m.heartbeat_deadline_ms
        for m in group.members.values()
        if m.heartbeat_deadline_ms is not None
    )
    if group.join_deadline_ms is not None:
        deadlines.append(group.join_deadline_ms)
    if group.sync_deadline is not None:
        deadlines.append(group.sync_deadline[0])
    return min(deadlines) if deadlines else None


def run_due(config: ClassicGroupConfig, out: Out, group: ClassicGroup, now_ms: int) -> None:
    """Fire the group's due timers, earliest first; then those the firings made due."""
    if not group.timers_armed:
        _arm_after_load(config, out, group, now_ms)
    for _ in range(MAX_PASSES):
        due = _due(group, now_ms)
        if not due:
            return
        for at, kind, member_id in due:  # one sort per pass: expiring n members is O(n log n)
            if _still_due(group, at, kind, member_id):
                _fire(config, out, group, kind, member_id, now_ms)
    raise AssertionError(f"timers of group {group.group_id} keep firing at {now_ms}")


def _arm_after_load(config: ClassicGroupConfig, out: Out, group: ClassicGroup, now_ms: int) -> None:
    """Kafka's ``onLoaded``: every member's session starts now."""
    group.timers_armed = True
    for m in group.members.values():
        m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
    if group.state is S.COMPLETING_REBALANCE:
        group.pending_sync = set(group.members)
        group.sync_deadline = (now_ms + group.rebalance_timeout_ms(), group.generation_id)
    if len(group.members) > config.max_size and group.state is not S.PREPARING_REBALANCE:
        rebalance.prepare_rebalance(config, out, group, now_ms)  # group.max.size was lowered


PENDING_MEMBER, HEARTBEAT, JOIN_PHASE, SYNC = range(4)


def _due(group: ClassicGroup, now_ms: int) -> list[tuple[int, int, str]]:
    """The due timers as (deadline, kind, member id), earliest first."""
    due = [(at, PENDING_MEMBER, mid) for mid, at in group.pending_members.items() if at <= now_ms]
    due.extend(
        (m.heartbeat_deadline_ms, HEARTBEAT, mid)
        for mid, m in group.members.items()
        if m.heartbeat_deadline_ms is not None and m.heartbeat_deadline_ms <= now_ms
    )
    if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
        due.append((group.join_deadline_ms, JOIN_PHASE, ""))
    if group.sync_deadline is not None and group.sync_deadline[0] <= now_ms:
        due.append((group.sync_deadline[0], SYNC, ""))
    return sorted(due)


def _still_due(group: ClassicGroup, at: int, kind: int, member_id: str) -> bool:
    """Whether an earlier firing of this pass left this timer as it was."""
    if kind == PENDING_MEMBER:
        return group.pending_members.get(member_id) == at
    if kind == HEARTBEAT:
        member = group.members.get(member_id)
        return member is not None and member.heartbeat_deadline_ms == at
    if kind == JOIN_PHASE:
        return group.join_deadline_ms == at
    return group.sync_deadline is not None and group.sync_deadline[0] == at


def _fire(
    config: ClassicGroupConfig,
    out: Out,
    group: ClassicGroup,
    kind: int,
    member_id: str,
    now_ms: int,
) -> None:
    if kind == PENDING_MEMBER:
        del group.pending_members[member_id]
        if group.state is S.PREPARING_REBALANCE and group.has_all_members_joined():
            rebalance.complete_join(out, group, now_ms)
    elif kind == HEARTBEAT:
        member = group.members[member_id]
        member.heartbeat_deadline_ms = None
        if not member.has_satisfied_heartbeat():
            rebalance.remove_member_and_update(config, out, group, member_id, now_ms)
    elif kind == JOIN_PHASE:
        _join_phase_expired(config, out, group, now_ms)
    else:
        _sync_expired(config, out, group, now_ms)


def _join_phase_expired(
    config: ClassicGroupConfig, out: Out, group: ClassicGroup, now_ms: int
) -> None:
    group.join_deadline_ms = None
    if group.state is not S.PREPARING_REBALANCE:
        group.initial_delay = None
        return
    if group.initial_delay is not None:  # Kafka's tryCompleteInitialRebalanceElseSchedule
        delay, remaining = group.initial_delay
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(config.initial_rebalance_delay_ms, remaining)
            group.initial_delay = (new_delay, max(remaining - delay, 0))
            group.join_deadline_ms = now_ms + new_delay
            return
    rebalance.complete_join(out, group, now_ms)


def _sync_expired(config: ClassicGroupConfig, out: Out, group: ClassicGroup, now_ms: int) -> None:
    assert group.sync_deadline is not None
    generation = group.sync_deadline[1]
    group.sync_deadline = None
    if generation != group.generation_id:
        return
    if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
        return
    for member_id in sorted(group.pending_sync):
        rebalance.remove_member(out, group, member_id)
    rebalance.prepare_rebalance(config, out, group, now_ms)
