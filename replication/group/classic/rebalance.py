"""The join phase of a classic group, shared by requests and timers (Kafka's
``prepareRebalance``, ``completeClassicGroupJoin``, ``removeMemberAndUpdateClassicGroup``).

A rebalance: the group goes to PreparingRebalance and waits until every member has sent a
JoinGroup (or the largest rebalance timeout of its members passes; from Empty, the initial
rebalance delay). Completing the join phase drops the dynamic members that did not rejoin,
starts the next generation with the protocol of the members' vote, writes the group's record,
and answers every parked JoinGroup: the leader's with every member's subscription. The group
then waits in CompletingRebalance for the leader's SyncGroup.

Every function writes into an `Out`: the group's record when it reaches a state at rest
(Empty, CompletingRebalance, Stable) and the replies to parked requests.
"""

from __future__ import annotations

from collections.abc import Iterable

from storage.errors import ErrorCode

from .group import ClassicGroup
from .records import record
from .types import (
    FENCED_INSTANCE_ID,
    UNKNOWN_MEMBER_ID,
    ClassicGroupConfig,
    ClassicGroupState,
    Effects,
    JoinGroupResponse,
    Record,
    Reply,
    Response,
    SyncGroupResponse,
)

S = ClassicGroupState


class Out:
    """What one call produced so far: one record per group (the last wins) and replies."""

    def __init__(self) -> None:
        self.records: dict[bytes, bytes | None] = {}
        self.replies: list[Reply] = []

    def reply(self, handle: object, response: Response) -> None:
        self.replies.append(Reply(handle=handle, response=response))

    def persist(self, group: ClassicGroup) -> None:
        """Write the group as it is now (it must be at rest)."""
        value = group.snapshot()
        group.persisted = value
        key, data = record(group.group_id, value)
        self.records[key] = data

    def extend(self, records: Iterable[Record]) -> None:
        for key, value in records:
            self.records[key] = value

    def effects(self) -> Effects:
        return Effects(records=tuple(self.records.items()), replies=tuple(self.replies))


def join_error(code: int, member_id: str = UNKNOWN_MEMBER_ID) -> JoinGroupResponse:
    return JoinGroupResponse(error_code=code, member_id=member_id)


def join_response(
    group: ClassicGroup, member_id: str, *, with_members: bool = True
) -> JoinGroupResponse:
    """The current generation as a JoinGroup answer (the leader's carries the members)."""
    is_leader = member_id == group.leader_id
    return JoinGroupResponse(
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=group.leader_id or "",
        member_id=member_id,
        members=group.join_members() if is_leader and with_members else (),
    )


def validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> int | None:
    """Kafka's ``validateMember``: UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID, or None."""
    if instance_id is not None:
        holder = group.static_members.get(instance_id)
        if holder is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if holder != member_id:
            return FENCED_INSTANCE_ID
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return None


def parked_handles(group: ClassicGroup) -> list[tuple[object, bool]]:
    """The group's parked requests: (handle, is a JoinGroup)."""
    handles: list[tuple[object, bool]] = []
    for m in group.members.values():
        if m.join_handle is not None:
            handles.append((m.join_handle, True))
        if m.sync_handle is not None:
            handles.append((m.sync_handle, False))
    return handles


def reply_error(out: Out, handle: object, is_join: bool, code: int) -> None:
    out.reply(handle, join_error(code) if is_join else SyncGroupResponse(error_code=code))


def fence_parked(out: Out, group: ClassicGroup, member_id: str) -> None:
    """Answer FENCED_INSTANCE_ID to the parked requests of a replaced static member."""
    member = group.members[member_id]
    join = group.unpark_join(member)
    if join is not None:
        out.reply(join, join_error(FENCED_INSTANCE_ID, member_id))
    if member.sync_handle is not None:
        out.reply(member.sync_handle, SyncGroupResponse(error_code=FENCED_INSTANCE_ID))
        member.sync_handle = None


def remove_member(out: Out, group: ClassicGroup, member_id: str) -> None:
    """Drop a member; its parked requests get UNKNOWN_MEMBER_ID (a live client rejoins)."""
    member = group.remove(member_id)
    if member is None:
        return
    if member.join_handle is not None:
        out.reply(member.join_handle, join_error(ErrorCode.UNKNOWN_MEMBER_ID))
    if member.sync_handle is not None:
        out.reply(member.sync_handle, SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))


def remove_member_and_update(
    config: ClassicGroupConfig, out: Out, group: ClassicGroup, member_id: str, now_ms: int
) -> None:
    """Kafka's ``removeMemberAndUpdateClassicGroup``: a member's session expired."""
    remove_member(out, group, member_id)
    if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
        maybe_prepare_rebalance_or_complete_join(config, out, group, now_ms)
    elif group.state is S.PREPARING_REBALANCE and group.has_all_members_joined():
        complete_join(out, group, now_ms)


def maybe_prepare_rebalance_or_complete_join(
    config: ClassicGroupConfig, out: Out, group: ClassicGroup, now_ms: int
) -> None:
    if group.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
        prepare_rebalance(config, out, group, now_ms)
    else:
        maybe_complete_join_phase(out, group, now_ms)


def maybe_complete_join_phase(out: Out, group: ClassicGroup, now_ms: int) -> None:
    """Complete the join phase once every member rejoined, except in an initial rebalance
    (from Empty), which waits for ``group.initial.rebalance.delay.ms``."""
    if (
        group.state is S.PREPARING_REBALANCE
        and group.previous_state is not S.EMPTY
        and group.has_all_members_joined()
    ):
        complete_join(out, group, now_ms)


def prepare_rebalance(
    config: ClassicGroupConfig, out: Out, group: ClassicGroup, now_ms: int
) -> None:
    """Start a rebalance: parked SyncGroups are told to rejoin."""
    if group.state is S.COMPLETING_REBALANCE:
        for m in group.members.values():
            m.assignment = b""
            if m.sync_handle is not None:
                out.reply(
                    m.sync_handle, SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
                )
                m.sync_handle = None
    group.pending_sync.clear()
    group.sync_deadline = None
    initial = group.state is S.EMPTY
    group.transition_to(S.PREPARING_REBALANCE, now_ms)
    if initial:  # a new group: give the other members time to arrive
        delay = config.initial_rebalance_delay_ms
        group.initial_delay = (delay, max(group.rebalance_timeout_ms() - delay, 0))
        group.join_deadline_ms = now_ms + delay
        group.new_member_added = False
    elif group.has_all_members_joined():
        complete_join(out, group, now_ms)
    else:
        group.initial_delay = None
        group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()


def complete_join(out: Out, group: ClassicGroup, now_ms: int) -> None:
    """Kafka's ``completeClassicGroupJoin`` (see the module docstring)."""
    group.join_deadline_ms = None
    group.initial_delay = None
    for m in [m for m in group.members.values() if not m.awaiting_join]:
        if m.group_instance_id is None:  # a static member keeps its place until it expires
            remove_member(out, group, m.member_id)
    if group.members and not group.maybe_elect_new_joined_leader():
        # nobody rejoined: wait for the session timeouts to remove the silent members
        group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
        return
    group.generation_id += 1
    group.pending_sync.clear()
    for m in group.members.values():
        m.assignment = b""
    if not group.members:
        group.protocol_name = None
        group.leader_id = None
        group.transition_to(S.EMPTY, now_ms)
        out.persist(group)
        return
    group.protocol_name = group.select_protocol()
    group.transition_to(S.COMPLETING_REBALANCE, now_ms)
    out.persist(group)  # before any member learns the generation: a new coordinator keeps it
    for m in group.members.values():
        join = group.unpark_join(m)
        if join is not None:
            out.reply(join, join_response(group, m.member_id))
        m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
        m.is_new = False
        group.pending_sync.add(m.member_id)
    group.sync_deadline = (now_ms + group.rebalance_timeout_ms(), group.generation_id)
