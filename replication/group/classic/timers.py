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
MAX_FIRINGS_PER_TICK = 100_000


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
    """Fire the group's due timers, earliest first, until none is due."""
    if not group.timers_armed:
        _arm_after_load(config, out, group, now_ms)
    for _ in range(MAX_FIRINGS_PER_TICK):
        if not _fire_one(config, out, group, now_ms):
            return
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


def _fire_one(config: ClassicGroupConfig, out: Out, group: ClassicGroup, now_ms: int) -> bool:
    """Fire the earliest due timer of ``group``; False if none is due."""
    due: list[tuple[int, int, str]] = []  # (deadline, kind order, member id)
    due.extend((at, 0, mid) for mid, at in group.pending_members.items() if at <= now_ms)
    due.extend(
        (m.heartbeat_deadline_ms, 1, mid)
        for mid, m in group.members.items()
        if m.heartbeat_deadline_ms is not None and m.heartbeat_deadline_ms <= now_ms
    )
    if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
        due.append((group.join_deadline_ms, 2, ""))
    if group.sync_deadline is not None and group.sync_deadline[0] <= now_ms:
        due.append((group.sync_deadline[0], 3, ""))
    if not due:
        return False
    _, kind, member_id = min(due)
    if kind == 0:
        del group.pending_members[member_id]
        if group.state is S.PREPARING_REBALANCE and group.has_all_members_joined():
            rebalance.complete_join(out, group, now_ms)
    elif kind == 1:
        member = group.members[member_id]
        member.heartbeat_deadline_ms = None
        if not member.has_satisfied_heartbeat():
            rebalance.remove_member_and_update(config, out, group, member_id, now_ms)
    elif kind == 2:
        _join_phase_expired(config, out, group, now_ms)
    else:
        _sync_expired(config, out, group, now_ms)
    return True


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
