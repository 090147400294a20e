"""The group coordinator's inputs and outputs: config, requests, responses, listings.

They mirror Kafka's ConsumerGroupHeartbeat (KIP-848), OffsetCommit (v9+), OffsetFetch and
DeleteGroups messages field for field where kraft needs the field. Proto objects stop at the
shell: the broker's group service converts between these frozen dataclasses and gRPC.

Assignments are keyed by topic id (as KIP-848's heartbeat is); committed offsets by topic name
(as Kafka's OffsetCommit records are).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from storage.errors import ErrorCode

R = TypeVar("R")

Record = tuple[bytes, bytes | None]
"""One keyed, latest-wins record of the offsets partition; value None is a tombstone."""

JOIN_GROUP_MEMBER_EPOCH = 0
"""Kafka's ``ConsumerGroupHeartbeatRequest.JOIN_GROUP_MEMBER_EPOCH``."""
LEAVE_GROUP_MEMBER_EPOCH = -1
"""Kafka's ``ConsumerGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH``."""
ADMIN_MEMBER_EPOCH = -1
"""An OffsetCommit with this epoch and no member id is an admin (or manual-assign) commit."""

ASSIGNOR_NAMES = ("uniform", "range")
MAX_GROUP_ID_CHARS = 255
"""kraft's bound on a group id (Kafka only has the protocol's string limit): ids stay
readable in records, errors and the CLI."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """The coordinator's Kafka configs (``group.consumer.*`` and ``offsets.retention.minutes``).

    ``assignors`` is ``group.consumer.assignors``: the first one is the default; a member may
    ask for another of them (``group.remote.assignor``)."""

    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    max_size: int | None = None  # group.consumer.max.size
    assignors: tuple[str, ...] = ASSIGNOR_NAMES  # group.consumer.assignors
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms

    def __post_init__(self) -> None:
        unknown = [a for a in self.assignors if a not in ASSIGNOR_NAMES]
        if not self.assignors or unknown:
            raise ValueError(f"group.consumer.assignors must be among {ASSIGNOR_NAMES}")


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicInfo:
    """What the coordinator needs of a topic from the metadata image."""

    topic_id: str
    name: str
    partitions: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    """Partitions of one topic, by topic id (KIP-848's ``TopicPartitions``)."""

    topic_id: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Result(Generic[R]):
    """What a write produced: records to append (acks=all) and the response to send once they
    are committed and replayed. If the append fails, the shell answers with its error instead."""

    records: list[Record]
    response: R


# --- ConsumerGroupHeartbeat -------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest:
    """KIP-848 ``ConsumerGroupHeartbeatRequest``. Optional fields are None when unchanged
    since the last heartbeat (the client sends them in full when joining)."""

    group_id: str
    member_id: str  # KIP-1082: the client generates it; "" lets the coordinator derive one
    member_epoch: int  # 0 joins, -1 leaves
    rebalance_timeout_ms: int = -1  # max.poll.interval.ms; -1 = unchanged
    subscribed_topic_names: tuple[str, ...] | None = None
    server_assignor: str | None = None  # group.remote.assignor
    topic_partitions: tuple[TopicPartitions, ...] | None = None  # owned; None = unchanged
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: tuple[TopicPartitions, ...] | None = None  # None: no assignment sent


# --- OffsetCommit / OffsetFetch -----------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitPartition:
    topic: str
    partition: int
    offset: int  # the next offset to read
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequest:
    """``member_epoch`` is OffsetCommit's ``GenerationIdOrMemberEpoch``: -1 with an empty
    ``member_id`` is an admin commit, allowed only while the group has no members."""

    group_id: str
    member_id: str = ""
    member_epoch: int = ADMIN_MEMBER_EPOCH
    partitions: tuple[OffsetCommitPartition, ...] = ()
    before_v9: bool = False
    """Sent as a Kafka OffsetCommit older than v9, which a member of a consumer group (KIP-848)
    may not use outside a transaction: Kafka answers UNSUPPORTED_VERSION."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionResult:
    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponse:
    """``error_code`` is the request-level error; each partition carries its own code (Kafka
    sets the request-level error on every partition; so does the coordinator)."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    partitions: tuple[PartitionResult, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequest:
    """``partitions`` None fetches every committed offset of the group. ``member_id`` and
    ``member_epoch`` (OffsetFetch v9+) are checked when the epoch is not -1."""

    group_id: str
    partitions: tuple[tuple[str, int], ...] | None = None  # (topic, partition)
    member_id: str = ""
    member_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int  # -1: nothing committed
    leader_epoch: int = -1
    metadata: str = ""
    error_code: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    offsets: tuple[FetchedOffset, ...] = ()


# --- DeleteGroups, ListGroups, DescribeGroups -----------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsResponse:
    results: Mapping[str, ErrorCode] = field(default_factory=dict)


class GroupState(enum.Enum):
    """``ConsumerGroup.ConsumerGroupState`` (KIP-848)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    """``MemberState`` of Kafka's ``CurrentAssignmentBuilder``."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupListing:
    group_id: str
    state: GroupState
    protocol_type: str = "consumer"
    group_type: str = "consumer"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberDescription:
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    state: MemberState
    subscribed_topic_names: tuple[str, ...]
    rebalance_timeout_ms: int
    server_assignor: str | None
    assignment: tuple[TopicPartitions, ...]
    pending_revocation: tuple[TopicPartitions, ...]
    target_assignment: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupDescription:
    group_id: str
    error_code: ErrorCode = ErrorCode.NONE
    state: GroupState = GroupState.DEAD
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[MemberDescription, ...] = ()
