"""The consumer-group APIs of the Broker service (KIP-848) as dataclasses.

Each class has the name and the field names of its message in ``proto/kraft/v1/broker.proto``,
so `replication.codec` maps them both ways (a ``tuple[...] | None`` is one of Kafka's nullable
arrays: None means "unchanged since the last heartbeat"). The shapes are Kafka's
(FindCoordinatorRequest.json v4+, ConsumerGroupHeartbeatRequest.json, OffsetCommitRequest.json
v9+, OffsetFetchRequest.json, ListGroupsRequest.json, ConsumerGroupDescribeRequest.json,
DeleteGroupsRequest.json), with topics named rather than by topic id.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage.errors import ErrorCode

COORDINATOR_KEY_TYPE_GROUP = 0
COORDINATOR_KEY_TYPE_TRANSACTION = 1
"""FindCoordinator's key type of a transactional id (KIP-98)."""
JOIN_GROUP_MEMBER_EPOCH = 0
"""KIP-848: a heartbeat with member epoch 0 joins the group."""
LEAVE_GROUP_MEMBER_EPOCH = -1
"""KIP-848: a heartbeat with member epoch -1 leaves the group."""

# -- FindCoordinator ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FindCoordinatorRequest:
    key_type: int = COORDINATOR_KEY_TYPE_GROUP
    coordinator_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Coordinator:
    key: str
    node_id: int = -1
    host: str = ""
    port: int = 0
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class FindCoordinatorResponse:
    coordinators: tuple[Coordinator, ...] = ()


# -- ConsumerGroupHeartbeat -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupTopicPartitions:
    topic: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str = ""
    member_epoch: int = JOIN_GROUP_MEMBER_EPOCH
    instance_id: str = ""
    rack_id: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    server_assignor: str = ""
    owned_partitions: tuple[GroupTopicPartitions, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupHeartbeatResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: tuple[GroupTopicPartitions, ...] | None = None


# -- OffsetCommit ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequestPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequestTopic:
    name: str
    partitions: tuple[OffsetCommitRequestPartition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequest:
    group_id: str
    generation_id_or_member_epoch: int = -1
    """-1 with an empty ``member_id``: an admin commit, only to an empty group."""
    member_id: str = ""
    topics: tuple[OffsetCommitRequestTopic, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponsePartition:
    partition_index: int
    error_code: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponseTopic:
    name: str
    partitions: tuple[OffsetCommitResponsePartition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponse:
    error_code: ErrorCode = ErrorCode.NONE
    """A group-level error (NOT_COORDINATOR, ...): kraft's shorthand for every partition."""
    error_message: str = ""
    topics: tuple[OffsetCommitResponseTopic, ...] = ()


# -- OffsetFetch ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequestTopic:
    name: str
    partition_indexes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequest:
    group_id: str
    member_id: str = ""
    member_epoch: int = -1
    """-1: not checked (an admin read)."""
    topics: tuple[OffsetFetchRequestTopic, ...] = ()
    """Empty: every committed offset of the group."""
    require_stable: bool = False
    """KIP-447 (v7+): an offset pending in an open transaction is answered
    UNSTABLE_OFFSET_COMMIT instead of the last committed one (a read_committed consumer)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponsePartition:
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str = ""
    error_code: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponseTopic:
    name: str
    partitions: tuple[OffsetFetchResponsePartition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    topics: tuple[OffsetFetchResponseTopic, ...] = ()


# -- ListGroups, ConsumerGroupDescribe, DeleteGroups ----------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsRequest:
    states_filter: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedGroup:
    group_id: str
    protocol_type: str = "consumer"
    group_state: str = ""
    group_type: str = "consumer"


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDescribeRequest:
    group_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedGroupMember:
    member_id: str
    instance_id: str = ""
    rack_id: str = ""
    member_epoch: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: tuple[GroupTopicPartitions, ...] = ()
    target_assignment: tuple[GroupTopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedGroup:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    group_id: str
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedGroupMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDescribeResponse:
    groups: tuple[DescribedGroup, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsRequest:
    groups_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableGroupResult:
    group_id: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsResponse:
    results: tuple[DeletableGroupResult, ...] = ()


__all__ = [
    "COORDINATOR_KEY_TYPE_GROUP",
    "COORDINATOR_KEY_TYPE_TRANSACTION",
    "JOIN_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "Coordinator",
    "DeletableGroupResult",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
    "DescribedGroup",
    "DescribedGroupMember",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "GroupTopicPartitions",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListedGroup",
    "OffsetCommitRequest",
    "OffsetCommitRequestPartition",
    "OffsetCommitRequestTopic",
    "OffsetCommitResponse",
    "OffsetCommitResponsePartition",
    "OffsetCommitResponseTopic",
    "OffsetFetchRequest",
    "OffsetFetchRequestTopic",
    "OffsetFetchResponse",
    "OffsetFetchResponsePartition",
    "OffsetFetchResponseTopic",
]
