"""The classic group protocol's inputs and outputs: config, requests, responses, effects.

The requests and responses mirror Kafka's JoinGroup (v9), SyncGroup (v5), Heartbeat (v4) and
LeaveGroup (v5) messages field for field, without the transport's fields (throttle time,
tagged fields): the Kafka adapter converts older versions into these (a LeaveGroup v0-v2
``member_id`` becomes a one-member ``members`` list) and back.

Protocol metadata and assignments are opaque bytes: the clients' assignors (range,
roundrobin, cooperative-sticky, ...) write and read them; the coordinator only stores and
forwards them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from storage.errors import ErrorCode

# one keyed, latest-wins record of the offsets partition, shared with the KIP-848 coordinator
from ..types import Record as Record

UNKNOWN_MEMBER_ID: Final = ""
"""A JoinGroup with this member id is a first join (``JoinGroupRequest.UNKNOWN_MEMBER_ID``)."""
NO_GENERATION: Final = -1
"""A generation id of -1: the sender is not in a generation (admin or manual-assign commits)."""

MEMBER_ID_REQUIRED: Final = ErrorCode.MEMBER_ID_REQUIRED
"""Kafka error 79 (KIP-394): rejoin with the member id given in the response."""
FENCED_INSTANCE_ID: Final = ErrorCode.FENCED_INSTANCE_ID
"""Kafka error 82 (KIP-345): another member now holds this ``group.instance.id``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicGroupConfig:
    """The classic groups' Kafka configs (broker side)."""

    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    new_member_join_timeout_ms: int = 300_000
    """How long a new member's parked JoinGroup may wait for the join phase to complete
    (Kafka's fixed ``CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS``, not a config key)."""

    def __post_init__(self) -> None:
        if not 0 < self.min_session_timeout_ms <= self.max_session_timeout_ms:
            raise ValueError(
                "need 0 < group.min.session.timeout.ms <= group.max.session.timeout.ms"
            )
        if self.initial_rebalance_delay_ms < 0 or self.max_size < 1:
            raise ValueError("group.initial.rebalance.delay.ms >= 0 and group.max.size >= 1")


class ClassicGroupState(enum.Enum):
    """Kafka's ``ClassicGroupState``; the values are the names DescribeGroups and ListGroups
    report. Transitions are in `group.VALID_PREVIOUS_STATES`."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True, kw_only=True)
class Protocol:
    """One entry of a JoinGroup's ``protocols``: an assignor name and its subscription."""

    name: str
    metadata: bytes


# --- JoinGroup --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupRequest:
    """JoinGroup v9, plus what the request context gives (client id and host, API version:
    v4+ requires a known member id, KIP-394)."""

    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int  # v0 has none: the adapter passes session_timeout_ms
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    protocol_type: str = "consumer"
    protocols: tuple[Protocol, ...] = ()
    reason: str | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 9


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupMember:
    """One member's subscription in the leader's JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupResponse:
    error_code: int = ErrorCode.NONE
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = UNKNOWN_MEMBER_ID
    members: tuple[JoinGroupMember, ...] = ()  # the leader's only


# --- SyncGroup --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupAssignment:
    member_id: str
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupRequest:
    """SyncGroup v5; ``assignments`` is the leader's (followers send none)."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[SyncGroupAssignment, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupResponse:
    error_code: int = ErrorCode.NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


# --- Heartbeat --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest:
    """Heartbeat v4 (the classic one; KIP-848's is ``replication.group.HeartbeatRequest``)."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResponse:
    error_code: int = ErrorCode.NONE


# --- LeaveGroup -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberIdentity:
    """One leaving member: by member id, or (admin, KIP-345) by instance id with member id ""."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[MemberIdentity, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupMemberResponse:
    member_id: str
    group_instance_id: str | None = None
    error_code: int = ErrorCode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupResponse:
    """``error_code`` is the request-level error; each member has its own (v3+). For v0-v2 the
    adapter answers the one member's error as the request's."""

    error_code: int = ErrorCode.NONE
    members: tuple[LeaveGroupMemberResponse, ...] = ()


# --- DescribeGroups / ListGroups ---------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # the subscription for the group's protocol (b"" before one is chosen)
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedGroup:
    """DescribeGroups' group. An unknown group is ``Dead`` with GROUP_ID_NOT_FOUND (v6+,
    KIP-1043; the adapter answers NONE to older versions, as Kafka does)."""

    group_id: str
    error_code: int = ErrorCode.NONE
    state: ClassicGroupState = ClassicGroupState.DEAD
    protocol_type: str = ""
    protocol_data: str = ""  # the chosen protocol's name while members exist
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: ClassicGroupState
    group_type: str = "classic"


# --- effects ------------------------------------------------------------------------------------

Response = JoinGroupResponse | SyncGroupResponse | HeartbeatResponse | LeaveGroupResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """The answer to the request the shell registered under ``handle``."""

    handle: object
    response: Response


@dataclass(frozen=True, slots=True, kw_only=True)
class Effects:
    """What one call produced. The shell must, in this order:

    1. append ``records`` to the offsets partition (acks=all) and wait until committed;
    2. deliver each reply to its handle.

    If the append fails, answer every reply's handle with the append's error instead
    (NOT_COORDINATOR if leadership moved, else COORDINATOR_NOT_AVAILABLE), then unload the
    manager: call `ClassicGroupManager.abandon` and reload from the log. The manager changed
    its in-memory state when it made these effects (Kafka's classic groups do the same), so
    after a failed append only a reload from the log is right.

    A request's reply may be in the effects of a later call (a parked JoinGroup is answered
    when the join phase completes, by a JoinGroup of another member or by ``tick``).
    """

    records: tuple[Record, ...] = ()
    replies: tuple[Reply, ...] = ()

    def __add__(self, other: Effects) -> Effects:
        return Effects(records=self.records + other.records, replies=self.replies + other.replies)


NO_EFFECTS: Final = Effects()
