"""`GroupCoordinator`: KIP-848 consumer groups and committed offsets, as records.

The rules are Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` and
``OffsetMetadataManager``; the usage loop is in the package docstring. Writes compute their
records against a scratch copy of the one group they touch (folding each record into it as it
is emitted, with the same `state.apply_to_group` that `replay` uses), so a write's later steps
see its earlier records and what is replayed is exactly what was computed.

Deviations from Kafka, each deliberate:
* A heartbeat with epoch 0 for a member id the group still has (a member that was fenced and
  rejoins with its KIP-1082 id) removes the old incarnation and joins afresh in the same
  write, unless it is Kafka's lost-response case (previous epoch 0, owned partitions a subset
  of its assignment), which is answered as a retry. A member rejoining with epoch 0 owns
  nothing (it gave up everything when fenced), so releasing its partitions is safe.
* An admin commit (epoch -1, no member id) to a group with members fails with
  NON_EMPTY_GROUP (Kafka answers UNKNOWN_MEMBER_ID), which says why.
"""

from __future__ import annotations

import copy
import hashlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, final

from storage.errors import ErrorCode

from . import assignors, offsets
from .reconciliation import MemberAssignment, reconcile
from .records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    OFFSET_COMMIT,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    Assignment,
    GroupMetadataValue,
    RecordKey,
    RecordValue,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue,
    decode,
    record,
)
from .state import INITIAL_EPOCH, Group, Member, apply, apply_to_group, canonical, partitions_of
from .types import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    MAX_GROUP_ID_CHARS,
    DeleteGroupsResponse,
    GroupConfig,
    GroupDescription,
    GroupListing,
    GroupState,
    HeartbeatRequest,
    HeartbeatResponse,
    MemberDescription,
    MemberState,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Record,
    Result,
    TopicInfo,
    TopicPartitions,
)

DEFAULT_REBALANCE_TIMEOUT_MS = 300_000  # max.poll.interval.ms


class OffsetExpiryRule(Protocol):  # pragma: no cover - structural: classic.OffsetExpiry
    """When another group protocol's offsets (kept here) may expire."""

    @property
    def expires(self) -> bool: ...
    @property
    def since_ms(self) -> int | None: ...
    @property
    def subscribed_topics(self) -> frozenset[str]: ...


OffsetExpiryLookup = Callable[[str], OffsetExpiryRule | None]
"""The classic groups' rule for a group id (``ClassicGroupManager.offset_expiry``); None: not
a classic group, the KIP-848 rule applies."""


def _short(s: str) -> str:
    return s if len(s) <= 64 else s[:64] + "..."


class _Write:
    """Records of one write against a scratch copy of one group."""

    def __init__(self, group_id: str, group: Group | None) -> None:
        self.group = group.clone() if group is not None else Group(group_id)
        self.records: list[Record] = []

    def emit(self, key: RecordKey, value: RecordValue | None) -> None:
        self.records.append(record(key, value))
        apply_to_group(self.group, key, value)


def _to_assignment(tps: Sequence[TopicPartitions] | None) -> Assignment:
    if tps is None:
        return ()
    merged: dict[str, set[int]] = {}
    for tp in tps:
        merged.setdefault(tp.topic_id, set()).update(tp.partitions)
    return canonical(merged)


def _to_topic_partitions(a: Assignment) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(topic_id=t, partitions=ps) for t, ps in a)


def group_state(group: Group) -> GroupState:
    """``ConsumerGroup.maybeUpdateGroupState``."""
    if not group.members:
        return GroupState.EMPTY
    if group.group_epoch > group.assignment_epoch:
        return GroupState.ASSIGNING
    for m in group.members.values():
        if m.member_epoch != group.assignment_epoch or m.state is not MemberState.STABLE:
            return GroupState.RECONCILING
    return GroupState.STABLE


@final
class GroupCoordinator:
    """The groups of one ``__consumer_offsets`` partition (see the package docstring)."""

    def __init__(
        self, config: GroupConfig, *, offset_expiry: OffsetExpiryLookup | None = None
    ) -> None:
        self._config = config
        self._offset_expiry: OffsetExpiryLookup = offset_expiry or (lambda _: None)
        self._groups: dict[str, Group] = {}
        # volatile timers, keyed (group id, member id)
        self._session_deadline: dict[tuple[str, str], int] = {}
        self._rebalance_deadline: dict[tuple[str, str], tuple[int, int]] = {}  # (at, epoch)
        self._next_retention_check_ms: int | None = None

    # --- state ---------------------------------------------------------------------------

    @property
    def config(self) -> GroupConfig:
        return self._config

    def groups(self) -> Mapping[str, Group]:
        """The persistent state (for tests and the simulator's checkers): read only."""
        return self._groups

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Fold one committed record in (CorruptRecordError if it cannot be decoded)."""
        k, v = decode(key, value)
        apply(self._groups, k, v)
        if k.type in (MEMBER_METADATA, CURRENT_MEMBER_ASSIGNMENT, GROUP_METADATA):
            self._forget_timers_of_gone_members(k.group_id, k.member_id or None)

    def _forget_timers_of_gone_members(self, group_id: str, member_id: str | None) -> None:
        group = self._groups.get(group_id)
        keys = (
            [(group_id, member_id)]
            if member_id is not None
            else [k for k in self._session_deadline if k[0] == group_id]
        )
        for key in keys:
            m = None if group is None else group.members.get(key[1])
            if m is None:
                self._session_deadline.pop(key, None)
                self._rebalance_deadline.pop(key, None)
            elif m.state is not MemberState.UNREVOKED_PARTITIONS:
                self._rebalance_deadline.pop(key, None)

    # --- ConsumerGroupHeartbeat ----------------------------------------------------------

    def heartbeat(
        self, req: HeartbeatRequest, topics: Mapping[str, TopicInfo], now_ms: int
    ) -> Result[HeartbeatResponse]:
        def fail(code: ErrorCode, message: str) -> Result[HeartbeatResponse]:
            return Result(
                records=[],
                response=HeartbeatResponse(
                    error_code=code,
                    error_message=message,
                    member_id=req.member_id,
                    member_epoch=req.member_epoch,
                ),
            )

        error = self._validate_heartbeat(req)
        if error is not None:
            return fail(*error)
        group = self._groups.get(req.group_id)
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if group is None or req.member_id not in group.members:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID, "the member is not in the group")
            w = _Write(req.group_id, group)
            self._remove_member(w, req.member_id, topics)
            return Result(
                records=w.records,
                response=HeartbeatResponse(
                    member_id=req.member_id,
                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    heartbeat_interval_ms=self._config.heartbeat_interval_ms,
                ),
            )
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        if group is None and not joining:
            return fail(ErrorCode.GROUP_ID_NOT_FOUND, f"group {_short(req.group_id)} not found")
        w = _Write(req.group_id, group)
        member_id = req.member_id or self._derive_member_id(req, w.group, now_ms)
        owned = None if req.topic_partitions is None else _to_assignment(req.topic_partitions)
        member = w.group.members.get(member_id)
        if member is not None and joining:
            lost_response = member.previous_member_epoch == 0 and partitions_of(
                owned or ()
            ) <= partitions_of(member.assigned)
            if not lost_response:
                self._remove_member(w, member_id, topics, bump=False)
                member = None
        elif member is not None:
            fenced = req.member_epoch > member.member_epoch or (
                req.member_epoch < member.member_epoch
                and (
                    req.member_epoch != member.previous_member_epoch
                    or owned is None
                    or not partitions_of(owned) <= partitions_of(member.assigned)
                )
            )
            if fenced:
                return fail(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"member epoch {req.member_epoch} is not the coordinator's "
                    f"{member.member_epoch}: abandon all partitions and rejoin",
                )
        if member is None:
            if not joining:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID, "the member is not in the group")
            size = self._config.max_size
            if size is not None and len(w.group.members) >= size:
                return fail(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"the group has reached group.consumer.max.size {size}",
                )
            member = Member(member_id)
        is_new = member_id not in w.group.members

        # 1. The member's metadata; the group epoch moves when the member's subscription or the
        # subscribed topics change (Kafka's hasMemberSubscriptionChanged: a new member counts as
        # subscribed to nothing before, so one that subscribes to nothing moves no epoch).
        updated = copy.copy(member)
        updated.client_id = req.client_id
        updated.client_host = req.client_host
        if req.subscribed_topic_names is not None:
            updated.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
        if req.rebalance_timeout_ms > 0:
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms
        elif updated.rebalance_timeout_ms <= 0:
            updated.rebalance_timeout_ms = DEFAULT_REBALANCE_TIMEOUT_MS
        if req.server_assignor is not None:
            updated.server_assignor = req.server_assignor
        bump = updated.subscribed_topic_names != member.subscribed_topic_names
        if is_new or updated.metadata_value() != member.metadata_value():
            w.emit(RecordKey(MEMBER_METADATA, req.group_id, member_id), updated.metadata_value())
        self._maybe_bump_group_epoch(w, topics, force=bump)

        # 2. A new target assignment when the group epoch moved past the assignment epoch.
        if w.group.group_epoch > w.group.assignment_epoch:
            self._compute_target_assignment(w)

        # 3. Reconcile this member towards its target (CurrentAssignmentBuilder).
        m = w.group.members[member_id]
        before = MemberAssignment(
            member_epoch=m.member_epoch,
            previous_member_epoch=m.previous_member_epoch,
            state=m.state,
            assigned=m.assigned,
            pending_revocation=m.pending_revocation,
        )
        after = reconcile(
            before,
            w.group.assignment_epoch,
            w.group.target.get(member_id, ()),
            w.group.partition_owners(exclude=member_id),
            () if joining else owned,
        )
        if after != before or is_new:
            m2 = copy.copy(m)
            m2.member_epoch = after.member_epoch
            m2.previous_member_epoch = after.previous_member_epoch
            m2.state = after.state
            m2.assigned = after.assigned
            m2.pending_revocation = after.pending_revocation
            w.emit(
                RecordKey(CURRENT_MEMBER_ASSIGNMENT, req.group_id, member_id), m2.assignment_value()
            )
        m = w.group.members[member_id]

        # 4. Timers: the session restarts; a member that must revoke gets its rebalance timeout.
        key = (req.group_id, member_id)
        self._session_deadline[key] = now_ms + self._config.session_timeout_ms
        if m.state is MemberState.UNREVOKED_PARTITIONS:
            pending = self._rebalance_deadline.get(key)
            if pending is None or pending[1] != m.member_epoch:
                self._rebalance_deadline[key] = (now_ms + m.rebalance_timeout_ms, m.member_epoch)
        else:
            self._rebalance_deadline.pop(key, None)
        return Result(
            records=w.records,
            response=HeartbeatResponse(
                member_id=member_id,
                member_epoch=m.member_epoch,
                heartbeat_interval_ms=self._config.heartbeat_interval_ms,
                assignment=_to_topic_partitions(m.assigned),
            ),
        )

    def _validate_heartbeat(self, req: HeartbeatRequest) -> tuple[ErrorCode, str] | None:
        if not req.group_id or len(req.group_id) > MAX_GROUP_ID_CHARS:
            return ErrorCode.INVALID_GROUP_ID, "the group id must be 1 to 255 characters"
        if req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            return ErrorCode.INVALID_REQUEST, f"member epoch {req.member_epoch} is not supported"
        if req.member_epoch != JOIN_GROUP_MEMBER_EPOCH and not req.member_id:
            return ErrorCode.INVALID_REQUEST, "the member id must be set after joining"
        if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if req.subscribed_topic_names is None:
                return ErrorCode.INVALID_REQUEST, "a join must carry the subscribed topic names"
            if req.topic_partitions:
                return ErrorCode.INVALID_REQUEST, "a joining member must own no partitions"
        if req.server_assignor is not None and req.server_assignor not in self._config.assignors:
            return (
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"assignor {_short(req.server_assignor)!r} is not in group.consumer.assignors "
                f"{list(self._config.assignors)}",
            )
        return None

    def _derive_member_id(self, req: HeartbeatRequest, group: Group, now_ms: int) -> str:
        """A member id for a client that sent none (pre-KIP-1082): derived, not random."""
        seed = f"{req.group_id}\0{req.client_id}\0{req.client_host}\0{now_ms}\0{group.group_epoch}"
        n = 0
        while True:
            digest = hashlib.sha256(f"{seed}\0{n}".encode()).hexdigest()[:22]
            if digest not in group.members:
                return digest
            n += 1

    def _subscription_metadata(
        self, group: Group, topics: Mapping[str, TopicInfo]
    ) -> tuple[tuple[str, str, int], ...]:
        return tuple(
            (name, topics[name].topic_id, topics[name].partitions)
            for name in sorted(group.subscribed_topic_names())
            if name in topics
        )

    def _maybe_bump_group_epoch(
        self, w: _Write, topics: Mapping[str, TopicInfo], *, force: bool
    ) -> None:
        meta = self._subscription_metadata(w.group, topics)
        if force or meta != w.group.subscription_metadata:
            w.emit(
                RecordKey(GROUP_METADATA, w.group.group_id),
                GroupMetadataValue(epoch=w.group.group_epoch + 1, subscription_metadata=meta),
            )

    def _preferred_assignor(self, group: Group) -> str:
        """The most requested of the members' server assignors, else the default one."""
        asked = Counter(
            m.server_assignor for m in group.members.values() if m.server_assignor is not None
        )
        if not asked:
            return self._config.assignors[0]
        best = max(asked.values())
        return next(a for a in self._config.assignors if asked.get(a) == best)

    def _compute_target_assignment(self, w: _Write) -> None:
        g = w.group
        topics = {name: (topic_id, n) for name, topic_id, n in g.subscription_metadata}
        subscriptions = {mid: m.subscribed_topic_names for mid, m in g.members.items()}
        new = assignors.assign(self._preferred_assignor(g), subscriptions, topics, g.target)
        for mid in sorted(g.target):
            if mid not in new:
                w.emit(RecordKey(TARGET_ASSIGNMENT_MEMBER, g.group_id, mid), None)
        for mid in sorted(new):
            if g.target.get(mid) != new[mid]:
                w.emit(
                    RecordKey(TARGET_ASSIGNMENT_MEMBER, g.group_id, mid),
                    TargetAssignmentMemberValue(partitions=new[mid]),
                )
        w.emit(
            RecordKey(TARGET_ASSIGNMENT_METADATA, g.group_id),
            TargetAssignmentMetadataValue(assignment_epoch=g.group_epoch),
        )

    def _remove_member(
        self, w: _Write, member_id: str, topics: Mapping[str, TopicInfo], *, bump: bool = True
    ) -> None:
        """Kafka's ``consumerGroupFenceMembers``: tombstones, then the group epoch moves on;
        when the last member leaves, the (empty) target assignment moves to the new group epoch
        at once, as Kafka 4.4 writes it, so an empty group's two epochs are equal."""
        gid = w.group.group_id
        w.emit(RecordKey(CURRENT_MEMBER_ASSIGNMENT, gid, member_id), None)
        w.emit(RecordKey(TARGET_ASSIGNMENT_MEMBER, gid, member_id), None)
        w.emit(RecordKey(MEMBER_METADATA, gid, member_id), None)
        if bump:
            self._maybe_bump_group_epoch(w, topics, force=True)
            if not w.group.members:
                w.emit(
                    RecordKey(TARGET_ASSIGNMENT_METADATA, gid),
                    TargetAssignmentMetadataValue(assignment_epoch=w.group.group_epoch),
                )

    # --- OffsetCommit / OffsetFetch (offsets.py) ------------------------------------------

    def commit_offsets(self, req: OffsetCommitRequest, now_ms: int) -> Result[OffsetCommitResponse]:
        return offsets.commit_offsets(self._groups, req, now_ms)

    def fetch_offsets(self, req: OffsetFetchRequest) -> OffsetFetchResponse:
        return offsets.fetch_offsets(self._groups, req)

    # --- DeleteGroups, ListGroups, DescribeGroups -----------------------------------------

    def delete_groups(self, group_ids: Sequence[str], now_ms: int) -> Result[DeleteGroupsResponse]:
        records: list[Record] = []
        results: dict[str, ErrorCode] = {}
        for gid in dict.fromkeys(group_ids):
            group = self._groups.get(gid)
            if group is None:
                results[gid] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.members:
                results[gid] = ErrorCode.NON_EMPTY_GROUP
            else:
                w = _Write(gid, group)
                self._delete_group(w)
                records.extend(w.records)
                results[gid] = ErrorCode.NONE
        return Result(records=records, response=DeleteGroupsResponse(results=results))

    def _delete_group(self, w: _Write) -> None:
        g = w.group
        for topic, partition in sorted(g.offsets):
            w.emit(RecordKey(OFFSET_COMMIT, g.group_id, topic=topic, partition=partition), None)
        for mid in sorted(g.target):
            w.emit(RecordKey(TARGET_ASSIGNMENT_MEMBER, g.group_id, mid), None)
        if g.assignment_epoch != INITIAL_EPOCH:
            w.emit(RecordKey(TARGET_ASSIGNMENT_METADATA, g.group_id), None)
        if g.has_metadata:
            w.emit(RecordKey(GROUP_METADATA, g.group_id), None)

    def list_groups(self) -> list[GroupListing]:
        return [
            GroupListing(group_id=gid, state=group_state(g))
            for gid, g in sorted(self._groups.items())
        ]

    def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        out: list[GroupDescription] = []
        for gid in group_ids:
            g = self._groups.get(gid)
            if g is None:
                out.append(
                    GroupDescription(
                        group_id=gid, error_code=ErrorCode.GROUP_ID_NOT_FOUND, state=GroupState.DEAD
                    )
                )
                continue
            members = tuple(
                MemberDescription(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_epoch=m.member_epoch,
                    state=m.state,
                    subscribed_topic_names=m.subscribed_topic_names,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    server_assignor=m.server_assignor,
                    assignment=_to_topic_partitions(m.assigned),
                    pending_revocation=_to_topic_partitions(m.pending_revocation),
                    target_assignment=_to_topic_partitions(g.target.get(m.member_id, ())),
                )
                for _, m in sorted(g.members.items())
            )
            out.append(
                GroupDescription(
                    group_id=gid,
                    state=group_state(g),
                    group_epoch=g.group_epoch,
                    assignment_epoch=g.assignment_epoch,
                    assignor_name=self._preferred_assignor(g),
                    members=members,
                )
            )
        return out

    # --- time --------------------------------------------------------------------------------

    def tick(self, now_ms: int, topics: Mapping[str, TopicInfo]) -> list[Record]:
        """Expiries due at ``now_ms`` and topic metadata changes, as records to append."""
        records: list[Record] = []
        retention_check = (
            self._next_retention_check_ms is None or now_ms >= self._next_retention_check_ms
        )
        if retention_check:
            interval = self._config.offsets_retention_check_interval_ms
            self._next_retention_check_ms = now_ms + interval
        for gid in sorted(self._groups):
            group = self._groups[gid]
            if not retention_check and not self._has_due_work(group, now_ms, topics):
                continue  # nothing to write: skip the copy
            w = _Write(gid, group)
            self._expire_members(w, now_ms, topics)
            if w.group.members:
                self._maybe_bump_group_epoch(w, topics, force=False)
            if retention_check:
                self._expire_offsets(w, now_ms)
            records.extend(w.records)
        return records

    def _has_due_work(self, group: Group, now_ms: int, topics: Mapping[str, TopicInfo]) -> bool:
        for mid, m in group.members.items():
            session = self._session_deadline.get((group.group_id, mid))
            if session is None or session <= now_ms:
                return True
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                rebalance = self._rebalance_deadline.get((group.group_id, mid))
                if rebalance is None or rebalance[0] <= now_ms:
                    return True
        return bool(group.members) and (
            self._subscription_metadata(group, topics) != group.subscription_metadata
        )

    def _expire_members(self, w: _Write, now_ms: int, topics: Mapping[str, TopicInfo]) -> None:
        gid = w.group.group_id
        for mid in sorted(w.group.members):
            m = w.group.members[mid]
            key = (gid, mid)
            session = self._session_deadline.get(key)
            if session is None:  # loaded from the log: a fresh session, as Kafka's onLoaded
                self._session_deadline[key] = now_ms + self._config.session_timeout_ms
                session = self._session_deadline[key]
            rebalance = self._rebalance_deadline.get(key)
            if rebalance is None and m.state is MemberState.UNREVOKED_PARTITIONS:
                rebalance = self._rebalance_deadline[key] = (
                    now_ms + m.rebalance_timeout_ms,
                    m.member_epoch,
                )
            revocation_overdue = (
                rebalance is not None
                and now_ms >= rebalance[0]
                and m.state is MemberState.UNREVOKED_PARTITIONS
                and m.member_epoch == rebalance[1]
            )
            if now_ms >= session or revocation_overdue:
                self._remove_member(w, mid, topics)
                # if the append fails, try again one session later (replay drops the timer)
                self._session_deadline[key] = now_ms + self._config.session_timeout_ms
                self._rebalance_deadline.pop(key, None)

    def _expire_offsets(self, w: _Write, now_ms: int) -> None:
        """``OffsetMetadataManager.cleanupExpiredOffsets``: offsets of topics the group does
        not subscribe to expire ``offsets.retention.minutes`` after their commit; an empty
        group with no offsets left is deleted."""
        g = w.group
        retention = self._config.offsets_retention_ms
        classic = self._offset_expiry(g.group_id)
        if classic is not None:  # a classic group's offsets: its rule, and it deletes itself
            if classic.expires:
                for (topic, partition), v in sorted(g.offsets.items()):
                    since = v.commit_timestamp_ms
                    if classic.since_ms is not None:
                        since = max(since, classic.since_ms)
                    elif topic in classic.subscribed_topics:
                        continue
                    if now_ms >= since + retention:
                        key = RecordKey(OFFSET_COMMIT, g.group_id, topic=topic, partition=partition)
                        w.emit(key, None)
            return
        subscribed = g.subscribed_topic_names()
        for (topic, partition), v in sorted(g.offsets.items()):
            if topic not in subscribed and now_ms >= v.commit_timestamp_ms + retention:
                w.emit(RecordKey(OFFSET_COMMIT, g.group_id, topic=topic, partition=partition), None)
        if not g.members and not g.offsets:
            self._delete_group(w)

    def next_deadline_ms(self) -> int | None:
        """When ``tick`` has work next (None: nothing pending). At or before now: tick now."""
        deadlines: list[int] = []
        deadlines.extend(self._session_deadline.values())
        deadlines.extend(at for at, _ in self._rebalance_deadline.values())
        for gid, g in self._groups.items():
            if any((gid, mid) not in self._session_deadline for mid in g.members):
                deadlines.append(0)
        if self._groups:
            deadlines.append(self._next_retention_check_ms or 0)
        return min(deadlines) if deadlines else None

    # --- snapshot ------------------------------------------------------------------------------

    def snapshot_records(self) -> list[Record]:
        """The whole live state as records: replaying them alone rebuilds it."""
        out: list[Record] = []
        for gid, g in sorted(self._groups.items()):
            if g.has_metadata:
                out.append(
                    record(
                        RecordKey(GROUP_METADATA, gid),
                        GroupMetadataValue(
                            epoch=g.group_epoch, subscription_metadata=g.subscription_metadata
                        ),
                    )
                )
            if g.assignment_epoch != INITIAL_EPOCH:
                out.append(
                    record(
                        RecordKey(TARGET_ASSIGNMENT_METADATA, gid),
                        TargetAssignmentMetadataValue(assignment_epoch=g.assignment_epoch),
                    )
                )
            for mid, m in sorted(g.members.items()):
                out.append(record(RecordKey(MEMBER_METADATA, gid, mid), m.metadata_value()))
                out.append(
                    record(RecordKey(CURRENT_MEMBER_ASSIGNMENT, gid, mid), m.assignment_value())
                )
            for mid, a in sorted(g.target.items()):
                out.append(
                    record(
                        RecordKey(TARGET_ASSIGNMENT_MEMBER, gid, mid),
                        TargetAssignmentMemberValue(partitions=a),
                    )
                )
            for (topic, partition), v in sorted(g.offsets.items()):
                out.append(
                    record(RecordKey(OFFSET_COMMIT, gid, topic=topic, partition=partition), v)
                )
        return out
