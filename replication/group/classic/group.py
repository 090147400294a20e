"""One classic group and its members: Kafka's ``ClassicGroup`` and ``ClassicGroupMember``.

State transitions (``VALID_PREVIOUS_STATES``, Kafka's ``ClassicGroupState``)::

    Empty ──join──► PreparingRebalance ──join phase done──► CompletingRebalance
      ▲                  ▲   │ (no member left)                 │ leader's SyncGroup
      └──────────────────┼───┘                                  ▼
                         └──────── join / leave / expiry ◄──── Stable
    any ──► Dead (deleted, or taken over by a consumer group)

A group holds persistent fields (rebuilt from its record: `snapshot` / `from_value`) and
volatile ones (parked requests, timers, pending members), as Kafka's in-memory group does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from .records import GroupValue, MemberValue
from .types import ClassicGroupState, JoinGroupMember, Protocol

S = ClassicGroupState
VALID_PREVIOUS_STATES: Final[dict[ClassicGroupState, frozenset[ClassicGroupState]]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset(S),
}


@dataclass(slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    # volatile -------------------------------------------------------------------------------
    join_handle: object | None = None
    """The parked JoinGroup's handle (Kafka's ``awaitingJoinFuture``)."""
    sync_handle: object | None = None
    """The parked SyncGroup's handle (Kafka's ``awaitingSyncFuture``)."""
    is_new: bool = False
    """Joined in the current join phase: not yet given a generation (expires on the
    new-member join timeout even while its JoinGroup is parked)."""
    heartbeat_deadline_ms: int | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_handle is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_handle is not None

    def metadata(self, protocol_name: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol_name:
                return p.metadata
        return b""

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates`` (it supports one)."""
        return next(p.name for p in self.protocols if p.name in candidates)

    def has_satisfied_heartbeat(self) -> bool:
        """Whether an expired session is forgiven: a member parked in a JoinGroup or SyncGroup
        is alive (its socket is busy with us), unless it is new (Kafka's rule)."""
        return not self.is_new and (self.awaiting_join or self.awaiting_sync)

    def to_value(self) -> MemberValue:
        return MemberValue(
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            client_id=self.client_id,
            client_host=self.client_host,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            session_timeout_ms=self.session_timeout_ms,
            protocols=self.protocols,
            assignment=self.assignment,
        )


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: ClassicGroupState = S.EMPTY
    previous_state: ClassicGroupState = S.DEAD
    state_timestamp_ms: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    """In join order: when the leader leaves, the first remaining member leads."""
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    awaiting_join_count: int = 0  # members with a parked JoinGroup
    protocol_counts: dict[str, int] = field(default_factory=dict)
    """How many members support each protocol (Kafka's ``supportedProtocols``)."""
    # volatile -------------------------------------------------------------------------------
    pending_members: dict[str, int] = field(default_factory=dict)
    """KIP-394: member ids handed out with MEMBER_ID_REQUIRED -> when they expire."""
    pending_sync: set[str] = field(default_factory=set)
    """Members of this generation that have not sent their SyncGroup yet."""
    new_member_added: bool = False
    join_deadline_ms: int | None = None
    initial_delay: tuple[int, int] | None = None
    """During an initial rebalance (from Empty): (this delay, remaining) of
    ``group.initial.rebalance.delay.ms`` windows, Kafka's ``tryCompleteInitialRebalance``."""
    sync_deadline: tuple[int, int] | None = None  # (at ms, generation)
    timers_armed: bool = True
    """False right after a load: ``tick`` starts every member's session then."""
    persisted: GroupValue | None = None
    """The value of the group's last record (written or replayed)."""

    # --- membership ------------------------------------------------------------------------

    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        assert self.state in VALID_PREVIOUS_STATES[state], f"{self.state} -> {state}"
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = now_ms

    def add(self, member: ClassicMember) -> None:
        assert member.member_id not in self.members
        if member.group_instance_id is not None:
            assert member.group_instance_id not in self.static_members
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member.protocols, 1)
        self.awaiting_join_count += member.awaiting_join
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member.protocols, -1)
            self.awaiting_join_count -= member.awaiting_join
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicMember:
        """The new incarnation of a static member takes the old one's place (and assignment);
        the caller answers the old one's parked requests first."""
        old = self.members.pop(old_id)
        assert not old.awaiting_join and not old.awaiting_sync  # answered (fenced) first
        new = ClassicMember(
            member_id=new_id,
            group_instance_id=instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        self.members[new_id] = new
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        self.pending_sync.discard(old_id)
        return new

    def park_join(self, member: ClassicMember, handle: object) -> None:
        assert handle is not None and member.join_handle is None
        member.join_handle = handle
        self.awaiting_join_count += 1

    def unpark_join(self, member: ClassicMember) -> object | None:
        """Take the member's parked JoinGroup handle, if any (to answer it)."""
        handle, member.join_handle = member.join_handle, None
        self.awaiting_join_count -= handle is not None
        return handle

    def set_protocols(self, member: ClassicMember, protocols: tuple[Protocol, ...]) -> None:
        self._count_protocols(member.protocols, -1)
        member.protocols = protocols
        self._count_protocols(protocols, 1)

    def _count_protocols(self, protocols: tuple[Protocol, ...], delta: int) -> None:
        for p in protocols:
            count = self.protocol_counts.get(p.name, 0) + delta
            if count:
                self.protocol_counts[p.name] = count
            else:
                del self.protocol_counts[p.name]

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and self.awaiting_join_count == len(self.members)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Kafka's ``maybeElectNewJoinedLeader``: the leader must be a member that rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols ---------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        everyone = len(self.members)
        return {name for name, count in self.protocol_counts.items() if count == everyone}

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if self.state is S.EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes for its most preferred protocol that all support;
        the most votes wins (ties: the leader's preference, then the name)."""
        candidates = self.candidate_protocols()
        assert self.members and candidates
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        rank = {p.name: i for i, p in enumerate(leader.protocols)}
        return min(votes, key=lambda name: (-votes[name], rank.get(name, len(rank)), name))

    def join_members(self) -> tuple[JoinGroupMember, ...]:
        """Every member's subscription for the chosen protocol: the leader's JoinGroup
        response."""
        return tuple(
            JoinGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata(self.protocol_name),
            )
            for m in self.members.values()
        )

    # --- persistence ------------------------------------------------------------------------

    def snapshot(self) -> GroupValue:
        """The group as its record says it (only at rest: Empty, CompletingRebalance, Stable)."""
        return GroupValue(
            protocol_type=self.protocol_type,
            generation_id=self.generation_id,
            protocol_name=self.protocol_name,
            leader=self.leader_id,
            state=self.state,
            state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(m.to_value() for _, m in sorted(self.members.items())),
        )

    @classmethod
    def from_value(cls, group_id: str, value: GroupValue) -> ClassicGroup:
        group = cls(
            group_id=group_id,
            state=value.state,
            state_timestamp_ms=value.state_timestamp_ms,
            protocol_type=value.protocol_type,
            protocol_name=value.protocol_name,
            generation_id=value.generation_id,
            timers_armed=not value.members,
            persisted=value,
        )
        for mv in value.members:
            group.members[mv.member_id] = ClassicMember(
                member_id=mv.member_id,
                group_instance_id=mv.group_instance_id,
                client_id=mv.client_id,
                client_host=mv.client_host,
                rebalance_timeout_ms=mv.rebalance_timeout_ms,
                session_timeout_ms=mv.session_timeout_ms,
                protocol_type=value.protocol_type or "",
                protocols=mv.protocols,
                assignment=mv.assignment,
            )
            group._count_protocols(mv.protocols, 1)
            if mv.group_instance_id is not None:
                group.static_members[mv.group_instance_id] = mv.member_id
        group.leader_id = value.leader if value.leader in group.members else None
        if group.leader_id is None and group.members:
            group.leader_id = next(iter(group.members))
        return group
