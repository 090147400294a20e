"""`ClassicGroupManager`: the classic groups of one ``__consumer_offsets`` partition.

The rules are Kafka 4.x's ``GroupMetadataManager`` classic-group paths (join, sync,
heartbeat, leave, the join/sync/heartbeat timers); the usage loop is in the package
docstring. Requests change the in-memory groups at once, as Kafka's classic groups do, and
say what must be persisted (`Effects.records`) before their answers go out
(`Effects.replies`).

Deliberate differences from Kafka:

* The group's record is written when a join phase completes (CompletingRebalance, with the
  new generation and its members), not only once the leader's assignment is stored, and the
  JoinGroup answers wait for it. A coordinator that takes over therefore never hands out a
  generation id twice, and resumes waiting for the leader's SyncGroup.
* A classic JoinGroup for a KIP-848 consumer group that has members is refused with
  INCONSISTENT_GROUP_PROTOCOL (Kafka 4.x would host the member inside the consumer group);
  SyncGroup, Heartbeat and LeaveGroup for it answer UNKNOWN_MEMBER_ID, as Kafka does for a
  member it does not know. An empty consumer group is deleted and becomes a classic group,
  as Kafka does (its committed offsets stay).
* A JoinGroup or SyncGroup that replaces one still parked for the same member answers the
  older one with REBALANCE_IN_PROGRESS (Kafka drops it), so every handle gets one answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import final

from storage.errors import ErrorCode

from ..records import (
    GROUP_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    RecordKey,
)
from ..records import record as consumer_record
from ..state import INITIAL_EPOCH
from ..state import Group as ConsumerGroup
from ..types import MAX_GROUP_ID_CHARS
from . import rebalance, timers, views
from .group import ClassicGroup, ClassicMember
from .rebalance import Out
from .records import decode_key, decode_value, record
from .types import (
    MEMBER_ID_REQUIRED,
    NO_EFFECTS,
    UNKNOWN_MEMBER_ID,
    ClassicGroupConfig,
    ClassicGroupState,
    DescribedGroup,
    Effects,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    Record,
    SyncGroupRequest,
    SyncGroupResponse,
)

S = ClassicGroupState
ConsumerGroupLookup = Callable[[str], ConsumerGroup | None]
"""The KIP-848 coordinator's group of an id (``GroupCoordinator.groups().get``)."""


@final
class ClassicGroupManager:
    """The classic groups of one offsets partition (see the package docstring).

    Args:
        config: the broker's ``group.*`` settings for classic groups.
        consumer_groups: the KIP-848 coordinator's groups of the same partition, read to
            refuse or take over their ids (default: none).
    """

    def __init__(
        self,
        config: ClassicGroupConfig | None = None,
        *,
        consumer_groups: ConsumerGroupLookup | None = None,
    ) -> None:
        self.config = config or ClassicGroupConfig()
        self._consumer_groups: ConsumerGroupLookup = consumer_groups or (lambda _: None)
        self._groups: dict[str, ClassicGroup] = {}
        self._orphans: list[tuple[object, bool]] = []  # (handle, is a JoinGroup): see replay

    # --- state -----------------------------------------------------------------------------

    def groups(self) -> dict[str, ClassicGroup]:
        """The groups (for tests, describe and the simulator): read only."""
        return self._groups

    def has_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is a classic group here (then a ConsumerGroupHeartbeat for it
        gets GROUP_ID_NOT_FOUND unless `take_over_empty_group` releases it)."""
        return group_id in self._groups

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Fold one committed classic record in (CorruptRecordError if undecodable).

        Loading calls it on a fresh manager. On a live manager a record it wrote itself
        changes nothing; any other record replaces the group (its parked requests are
        answered COORDINATOR_NOT_AVAILABLE by the next ``tick``)."""
        group_id = decode_key(key)
        decoded = None if value is None else decode_value(value)
        current = self._groups.get(group_id)
        if current is not None:
            if decoded is not None and current.persisted == decoded:
                return
            self._orphans.extend(rebalance.parked_handles(current))
        if decoded is None:
            self._groups.pop(group_id, None)
        else:
            self._groups[group_id] = ClassicGroup.from_value(group_id, decoded)

    def snapshot_records(self) -> list[Record]:
        """Every group's last record: replaying them alone rebuilds the persisted state."""
        return [record(gid, g.persisted) for gid, g in sorted(self._groups.items()) if g.persisted]

    def abandon(self, error: int = ErrorCode.NOT_COORDINATOR) -> Effects:
        """Answer every parked request with ``error`` (the shard is being unloaded)."""
        out = Out()
        for handle, is_join in self._orphans:
            rebalance.reply_error(out, handle, is_join, error)
        self._orphans.clear()
        for group in self._groups.values():
            for member in group.members.values():
                join = group.unpark_join(member)
                if join is not None:
                    out.reply(join, rebalance.join_error(error, member.member_id))
                if member.sync_handle is not None:
                    out.reply(member.sync_handle, SyncGroupResponse(error_code=error))
                    member.sync_handle = None
        return out.effects()

    # --- JoinGroup -----------------------------------------------------------------------------

    def join_group(
        self, req: JoinGroupRequest, handle: object, now_ms: int, *, new_member_uuid: str
    ) -> Effects:
        """A JoinGroup, answered now or when the join phase completes.

        Args:
            handle: the shell's token for this request (any object but None).
            new_member_uuid: a fresh random id; used only if the request has no member id
                (the new member id is ``<group.instance.id or client.id>-<uuid>``, Kafka's).
        """
        assert handle is not None
        out = Out()
        code = self._validate_join(req)
        if code is not None:
            out.reply(handle, rebalance.join_error(code, req.member_id))
            return out.effects()
        is_unknown = req.member_id == UNKNOWN_MEMBER_ID
        group = self._groups.get(req.group_id)
        if group is None:
            consumer = self._consumer_groups(req.group_id)
            if consumer is not None and consumer.members:
                out.reply(handle, rebalance.join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
                return out.effects()
            if not is_unknown:
                out.reply(handle, rebalance.join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
                return out.effects()
            if consumer is not None and consumer.has_metadata:
                # an empty consumer group becomes a classic one (Kafka's
                # maybeDeleteEmptyConsumerGroup); its committed offsets stay
                out.extend(_consumer_group_tombstones(consumer))
            group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms)
            self._groups[req.group_id] = group
        if not self._accept_joining_member(group, req.member_id):
            rebalance.remove_member(out, group, req.member_id)
            out.reply(handle, rebalance.join_error(ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._join_new_member(out, group, req, handle, now_ms, new_member_uuid)
        else:
            self._join_existing_member(out, group, req, handle, now_ms)
        if group.persisted is None:
            # a new group is written at once, as Kafka writes its empty metadata record
            empty = ClassicGroup(group.group_id, state_timestamp_ms=group.state_timestamp_ms)
            out.persist(empty)
            group.persisted = empty.persisted
        return out.effects()

    def _validate_join(self, req: JoinGroupRequest) -> int | None:
        if not req.group_id or len(req.group_id) > MAX_GROUP_ID_CHARS:
            return ErrorCode.INVALID_GROUP_ID
        c = self.config
        if not c.min_session_timeout_ms <= req.session_timeout_ms <= c.max_session_timeout_ms:
            return ErrorCode.INVALID_SESSION_TIMEOUT
        if req.rebalance_timeout_ms <= 0:
            return ErrorCode.INVALID_REQUEST
        names = [p.name for p in req.protocols]
        if not req.protocol_type or not names or len(set(names)) != len(names):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if req.group_instance_id is not None and not req.group_instance_id:
            return ErrorCode.INVALID_REQUEST
        return None

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """Kafka's ``acceptJoiningMember``: ``group.max.size`` counts members."""
        limit = self.config.max_size
        member = group.members.get(member_id)
        if group.state in (S.EMPTY, S.DEAD) or len(group.members) < limit:
            return True
        if group.state is S.PREPARING_REBALANCE:
            awaiting = sum(1 for m in group.members.values() if m.awaiting_join)
            return (member is not None and member.awaiting_join) or awaiting < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(
        self,
        out: Out,
        group: ClassicGroup,
        req: JoinGroupRequest,
        handle: object,
        now_ms: int,
        new_member_uuid: str,
    ) -> None:
        if not group.supports_protocols(req.protocol_type, {p.name for p in req.protocols}):
            out.reply(handle, rebalance.join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        instance_id = req.group_instance_id
        new_id = f"{instance_id if instance_id is not None else req.client_id}-{new_member_uuid}"
        if new_id in group.members or new_id in group.pending_members:
            out.reply(
                handle, rebalance.join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            )  # a reused uuid
            return
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                self._replace_static_member(out, group, req, handle, now_ms, old_id, new_id)
            else:
                self._add_member(out, group, req, handle, now_ms, new_id)
        elif req.api_version >= 4:  # KIP-394: hand out the id; the member joins with it
            group.pending_members[new_id] = now_ms + req.session_timeout_ms
            out.reply(handle, rebalance.join_error(MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member(out, group, req, handle, now_ms, new_id)

    def _join_existing_member(
        self, out: Out, group: ClassicGroup, req: JoinGroupRequest, handle: object, now_ms: int
    ) -> None:
        member_id = req.member_id
        if not group.supports_protocols(req.protocol_type, {p.name for p in req.protocols}):
            out.reply(
                handle, rebalance.join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            )
            return
        if member_id in group.pending_members and req.group_instance_id is None:
            self._add_member(out, group, req, handle, now_ms, member_id)
            return
        code = rebalance.validate_member(group, member_id, req.group_instance_id)
        if code is not None:
            out.reply(handle, rebalance.join_error(code, member_id))
            return
        member = group.members[member_id]
        unchanged = member.protocols == req.protocols
        if group.state is S.PREPARING_REBALANCE:
            self._update_member(out, group, member, req, handle, now_ms)
        elif group.state is S.COMPLETING_REBALANCE:
            if unchanged:  # it lost our JoinGroup answer: send it again
                out.reply(handle, rebalance.join_response(group, member_id))
            else:
                self._update_member(out, group, member, req, handle, now_ms)
        elif group.state is S.STABLE:
            if member_id == group.leader_id or not unchanged:
                self._update_member(out, group, member, req, handle, now_ms)
            else:
                out.reply(handle, rebalance.join_response(group, member_id, with_members=False))
        else:
            out.reply(handle, rebalance.join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _add_member(
        self,
        out: Out,
        group: ClassicGroup,
        req: JoinGroupRequest,
        handle: object,
        now_ms: int,
        member_id: str,
    ) -> None:
        member = ClassicMember(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            join_handle=handle,
            is_new=True,
        )
        if group.state is S.PREPARING_REBALANCE and group.previous_state is S.EMPTY:
            group.new_member_added = True  # the initial rebalance waits a little longer
        group.add(member)
        # a parked JoinGroup cannot heartbeat: a new member gets a join timeout instead
        member.heartbeat_deadline_ms = now_ms + self.config.new_member_join_timeout_ms
        rebalance.maybe_prepare_rebalance_or_complete_join(self.config, out, group, now_ms)

    def _update_member(
        self,
        out: Out,
        group: ClassicGroup,
        member: ClassicMember,
        req: JoinGroupRequest,
        handle: object,
        now_ms: int,
    ) -> None:
        group.set_protocols(member, req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        superseded = group.unpark_join(member)
        if superseded is not None:
            out.reply(
                superseded, rebalance.join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)
            )
        group.park_join(member, handle)
        rebalance.maybe_prepare_rebalance_or_complete_join(self.config, out, group, now_ms)

    def _replace_static_member(
        self,
        out: Out,
        group: ClassicGroup,
        req: JoinGroupRequest,
        handle: object,
        now_ms: int,
        old_id: str,
        new_id: str,
    ) -> None:
        """KIP-345: a static member restarted. In Stable, if the protocol the group would
        choose stays the same, the new incarnation takes the old one's assignment without a
        rebalance; otherwise the group rebalances."""
        assert req.group_instance_id is not None
        rebalance.fence_parked(out, group, old_id)
        leader_before = group.leader_id
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        group.set_protocols(member, req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        if group.state is S.STABLE:
            if group.select_protocol() == group.protocol_name:
                out.persist(group)
                is_leader = group.leader_id == new_id
                if req.api_version >= 9:  # the leader skips assignment (KIP-814)
                    response = replace(
                        rebalance.join_response(group, new_id), skip_assignment=is_leader
                    )
                else:  # an older leader must not reassign: name the old id as the leader
                    response = JoinGroupResponse(
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=leader_before or "",
                        member_id=new_id,
                    )
                out.reply(handle, response)
                return
            group.park_join(member, handle)
            rebalance.maybe_prepare_rebalance_or_complete_join(self.config, out, group, now_ms)
        elif group.state is S.COMPLETING_REBALANCE:
            group.park_join(member, handle)
            rebalance.prepare_rebalance(self.config, out, group, now_ms)
        else:
            group.park_join(member, handle)
            rebalance.maybe_complete_join_phase(out, group, now_ms)

    # --- SyncGroup -----------------------------------------------------------------------------

    def sync_group(self, req: SyncGroupRequest, handle: object, now_ms: int) -> Effects:
        """A SyncGroup: the leader's stores the assignments and answers every member; a
        follower's waits for it (or is answered at once in Stable)."""
        assert handle is not None
        out = Out()
        group = self._groups.get(req.group_id)
        code = self._validate_sync(group, req)
        if code is not None or group is None:
            out.reply(handle, SyncGroupResponse(error_code=code or ErrorCode.UNKNOWN_MEMBER_ID))
            return out.effects()
        member = group.members[req.member_id]
        if group.state is S.PREPARING_REBALANCE:
            out.reply(handle, SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.state is S.COMPLETING_REBALANCE:
            if member.sync_handle is not None:
                out.reply(
                    member.sync_handle,
                    SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS),
                )
            member.sync_handle = handle
            self._synced(group, req.member_id)
            if req.member_id == group.leader_id:
                given = {a.member_id: a.assignment for a in req.assignments}
                for m in group.members.values():
                    m.assignment = given.get(m.member_id, b"")
                group.transition_to(S.STABLE, now_ms)
                out.persist(group)
                for m in group.members.values():
                    if m.sync_handle is not None:
                        out.reply(m.sync_handle, self._sync_response(group, m))
                        m.sync_handle = None
                        m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
        else:  # Stable: the assignment is known
            self._synced(group, req.member_id)
            out.reply(handle, self._sync_response(group, member))
        return out.effects()

    def _validate_sync(self, group: ClassicGroup | None, req: SyncGroupRequest) -> int | None:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        if group is None or group.state is S.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        code = rebalance.validate_member(group, req.member_id, req.group_instance_id)
        if code is not None:
            return code
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _differs(req.protocol_type, group.protocol_type) or _differs(
            req.protocol_name, group.protocol_name
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _synced(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline = None

    def _sync_response(self, group: ClassicGroup, member: ClassicMember) -> SyncGroupResponse:
        return SyncGroupResponse(
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            assignment=member.assignment,
        )

    # --- Heartbeat -----------------------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest, handle: object, now_ms: int) -> Effects:
        """A Heartbeat: always answered at once, never written."""
        out = Out()
        out.reply(handle, HeartbeatResponse(error_code=self._heartbeat(req, now_ms)))
        return out.effects()

    def _heartbeat(self, req: HeartbeatRequest, now_ms: int) -> int:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self._groups.get(req.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        code = rebalance.validate_member(group, req.member_id, req.group_instance_id)
        if code is not None:
            return code
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is S.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[req.member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state is S.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # --- LeaveGroup ----------------------------------------------------------------------------

    def leave_group(self, req: LeaveGroupRequest, handle: object, now_ms: int) -> Effects:
        """A LeaveGroup of one or more members (by member id, or by instance id alone)."""
        out = Out()
        group = self._groups.get(req.group_id)
        if group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID if req.group_id else ErrorCode.INVALID_GROUP_ID
            out.reply(handle, LeaveGroupResponse(error_code=error))
            return out.effects()
        results: list[LeaveGroupMemberResponse] = []
        left = False
        for who in req.members:
            code: int | None = None
            if who.member_id == UNKNOWN_MEMBER_ID:
                static_id = group.static_members.get(who.group_instance_id or "")
                if who.group_instance_id is not None and static_id is not None:
                    rebalance.remove_member(out, group, static_id)
                else:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
            elif who.member_id in group.pending_members:
                group.pending_members.pop(who.member_id)
            else:
                code = rebalance.validate_member(group, who.member_id, who.group_instance_id)
                if code is None:
                    rebalance.remove_member(out, group, who.member_id)
            left = left or code is None
            results.append(
                LeaveGroupMemberResponse(
                    member_id=who.member_id,
                    group_instance_id=who.group_instance_id,
                    error_code=code or ErrorCode.NONE,
                )
            )
        if left:
            if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
                rebalance.maybe_prepare_rebalance_or_complete_join(self.config, out, group, now_ms)
            elif group.state is S.PREPARING_REBALANCE:
                rebalance.maybe_complete_join_phase(out, group, now_ms)
        out.reply(handle, LeaveGroupResponse(members=tuple(results)))
        return out.effects()

    # --- time ----------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> Effects:
        """Run every timer due at ``now_ms``: session and new-member join timeouts, the end
        of a join phase (rebalance timeout, initial rebalance delay), sync timeouts."""
        out = Out()
        for handle, is_join in self._orphans:
            rebalance.reply_error(out, handle, is_join, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        self._orphans.clear()
        for gid in sorted(self._groups):
            timers.run_due(self.config, out, self._groups[gid], now_ms)
        return out.effects()

    def next_deadline_ms(self) -> int | None:
        """When ``tick`` has work next (None: nothing pending). At or before now: tick now."""
        deadlines = [timers.next_deadline_ms(g) for g in self._groups.values()]
        if self._orphans:
            deadlines.append(0)
        due = [d for d in deadlines if d is not None]
        return min(due) if due else None

    # --- offsets, describe, list, delete -----------------------------------------------------

    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
        *,
        transactional: bool = False,
    ) -> int | None:
        """The check an OffsetCommit (or TxnOffsetCommit) to ``group_id`` passes first: an
        error code, NONE (commit; skip the KIP-848 member checks), or None if ``group_id`` is
        not a classic group here (the KIP-848 coordinator's rules apply)."""
        return views.validate_offset_commit(
            self._groups, group_id, member_id, generation_id, group_instance_id, transactional
        )

    def offset_expiry(self, group_id: str) -> views.OffsetExpiry | None:
        """When ``group_id``'s offsets may expire (for the offsets retention check); None if
        it is not a classic group here."""
        group = self._groups.get(group_id)
        return None if group is None else views.offset_expiry(group)

    def describe_groups(self, group_ids: Sequence[str]) -> list[DescribedGroup]:
        return views.describe_groups(self._groups, group_ids)

    def list_groups(self) -> list[ListedGroup]:
        return views.list_groups(self._groups)

    def delete_group(self, group_id: str) -> tuple[int, Effects]:
        """DeleteGroups for one classic group: only an Empty one (NON_EMPTY_GROUP otherwise).
        Its committed offsets are the KIP-848 coordinator's to delete."""
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, NO_EFFECTS
        if group.state is not S.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP, NO_EFFECTS
        return ErrorCode.NONE, self.take_over_empty_group(group_id)

    def take_over_empty_group(self, group_id: str) -> Effects:
        """Delete an Empty classic group (its tombstone) so a KIP-848 consumer group can take
        the id, as Kafka's ``maybeDeleteEmptyClassicGroup``; no effects if there is none."""
        group = self._groups.get(group_id)
        if group is None or group.state is not S.EMPTY:
            return NO_EFFECTS
        out = Out()
        for handle, is_join in rebalance.parked_handles(group):  # none in Empty; kept for safety
            rebalance.reply_error(out, handle, is_join, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        group.transition_to(S.DEAD, group.state_timestamp_ms)
        del self._groups[group_id]
        out.extend([record(group_id, None)])
        return out.effects()


# --- helpers --------------------------------------------------------------------------------------


def _differs(asked: str | None, current: str | None) -> bool:
    return asked is not None and current is not None and asked != current


def _consumer_group_tombstones(group: ConsumerGroup) -> list[Record]:
    """Delete an empty KIP-848 group (not its offsets): Kafka's ``createGroupTombstoneRecords``."""
    gid = group.group_id
    records = [
        consumer_record(RecordKey(TARGET_ASSIGNMENT_MEMBER, gid, member_id), None)
        for member_id in sorted(group.target)
    ]
    if group.assignment_epoch != INITIAL_EPOCH:
        records.append(consumer_record(RecordKey(TARGET_ASSIGNMENT_METADATA, gid), None))
    records.append(consumer_record(RecordKey(GROUP_METADATA, gid), None))
    return records


__all__ = ["ClassicGroupManager", "ConsumerGroupLookup"]
