"""Requests and responses of the APIs the controller core decides, as frozen dataclasses.

They mirror Kafka's request/response schemas (``clients/src/main/resources/common/message``)
with snake_case names; the gRPC shell converts them to and from proto. Errors are per item, as
in Kafka: per topic for CreateTopics/DeleteTopics/CreatePartitions, per resource for
IncrementalAlterConfigs, per partition for AlterPartition/ElectLeaders; a request-level
``error_code`` exists where Kafka has one (NOT_CONTROLLER, STALE_BROKER_EPOCH, ...).

``error_code`` is always `ErrorCode.NONE` on success. ``-1`` means "unset" for numeric
arguments (``num_partitions``, ``replication_factor``, a broker epoch not known to the sender).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from kraft.metadata.records import (
    BrokerFeature,
    ConfigResourceType,
    Endpoint,
    LeaderRecoveryState,
)
from kraft.types import Epoch, NodeId, Offset, TopicPartition
from storage.errors import ErrorCode

# -- broker lifecycle (KIP-631) ----------------------------------------------------------------


NO_NODE = NodeId(-1)
"""No broker (Kafka's ``-1`` leader id)."""
NO_EPOCH = Epoch(-1)
"""No leader epoch known."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRequest:
    broker_id: NodeId
    incarnation_id: str
    listeners: tuple[Endpoint, ...] = ()
    rack: str | None = None
    previous_broker_epoch: int | None = None
    """KIP-966: the epoch this broker had at its last clean shutdown (None: it did not shut
    down cleanly, or never ran); any other value than its registered epoch is an unclean
    shutdown, which takes it out of every ELR (`kraft.controller.eligible_leaders`)."""
    features: tuple[BrokerFeature, ...] = ()
    """The feature level ranges it runs (KIP-584): UpdateFeatures finalizes no level outside
    them (`kraft.controller.feature_control`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicIdPartition:
    topic_id: str
    partition: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerHeartbeatRequest:
    broker_id: NodeId
    broker_epoch: int
    current_metadata_offset: Offset
    want_fence: bool = False
    want_shutdown: bool = False
    offline_replicas: tuple[TopicIdPartition, ...] = ()
    """Every replica whose log this broker took offline after a disk error, each heartbeat
    (`kraft.controller.offline_replicas`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerHeartbeatResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerRequest:
    broker_id: NodeId


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


# -- topics ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopic:
    """One topic to create. Either ``num_partitions``/``replication_factor`` (-1: the
    controller's defaults) or a manual ``assignments`` (replicas of partition i at index i)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[tuple[int, ...], ...] = ()
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...]
    validate_only: bool = False
    broker_id: int | None = None
    """With ``broker_epoch``: a broker creating an internal topic on first use (the only way
    an internal topic name is accepted; see `kraft.types.INTERNAL_TOPICS`)."""
    broker_epoch: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicResult:
    name: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    topic_id: str = ""
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsResponse:
    topics: tuple[CreatableTopicResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsRequest:
    """Topics to delete by name and/or by id (KIP-516)."""

    topic_names: tuple[str, ...] = ()
    topic_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableTopicResult:
    name: str | None
    topic_id: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsResponse:
    topics: tuple[DeletableTopicResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsTopic:
    """Grow ``name`` to ``count`` partitions; ``assignments`` (optional) holds the replicas of
    each *new* partition, in order."""

    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsRequest:
    topics: tuple[CreatePartitionsTopic, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsTopicResult:
    name: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsResponse:
    results: tuple[CreatePartitionsTopicResult, ...]


# -- configs (KIP-339) -------------------------------------------------------------------------


class AlterConfigOp(enum.IntEnum):
    """Kafka's ``AlterConfigOp.OpType`` numbers."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterableConfig:
    name: str
    op: AlterConfigOp = AlterConfigOp.SET
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsResource:
    """For brokers, ``resource_name`` is a broker id or ``""`` (the cluster-wide default)."""

    resource_type: ConfigResourceType
    resource_name: str
    configs: tuple[AlterableConfig, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsRequest:
    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsResourceResult:
    resource_type: ConfigResourceType
    resource_name: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsResponse:
    responses: tuple[AlterConfigsResourceResult, ...]


# -- AlterPartition (KIP-497, KIP-704, KIP-841) ------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerEpochState:
    """A proposed ISR member with the broker epoch the leader knows for it (KIP-841; -1 if the
    leader does not know it, which skips the epoch check)."""

    broker_id: NodeId
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionData:
    partition: int
    leader_epoch: Epoch
    new_isr_with_epochs: tuple[BrokerEpochState, ...]
    partition_epoch: int
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    elected_by_vote: bool = False
    """A quorum-mode partition's leader report: the sender won the partition's Raft election
    for ``leader_epoch`` (the ISR fields are unused; `kraft.controller.quorum_partitions`)."""

    @property
    def new_isr(self) -> tuple[int, ...]:
        return tuple(b.broker_id for b in self.new_isr_with_epochs)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionTopic:
    topic_id: str
    partitions: tuple[AlterPartitionData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionRequest:
    """Sent by a partition leader to change its ISR (or its KIP-704 recovery state)."""

    broker_id: NodeId
    broker_epoch: int
    topics: tuple[AlterPartitionTopic, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionPartitionResult:
    """On success, the partition state after the change (the leader adopts it)."""

    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    leader_id: NodeId = NO_NODE
    leader_epoch: Epoch = NO_EPOCH
    isr: tuple[int, ...] = ()
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionTopicResult:
    topic_id: str
    partitions: tuple[AlterPartitionPartitionResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    topics: tuple[AlterPartitionTopicResult, ...] = ()


# -- ElectLeaders (KIP-460) --------------------------------------------------------------------


class ElectionType(enum.IntEnum):
    """Kafka's ``ElectionType`` numbers."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersRequest:
    """``partitions=None`` means every partition; then only partitions that changed or failed
    for a reason other than ELECTION_NOT_NEEDED are reported (as Kafka does)."""

    election_type: ElectionType = ElectionType.PREFERRED
    partitions: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionElectionResult:
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaElectionResult:
    topic: str
    partition_results: tuple[PartitionElectionResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    replica_election_results: tuple[ReplicaElectionResult, ...] = ()


# -- AlterPartitionReassignments / ListPartitionReassignments (KIP-455) ------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignablePartition:
    """``replicas``: the target replica list; ``None`` cancels the reassignment in progress."""

    partition_index: int
    replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignableTopic:
    name: str
    partitions: tuple[ReassignablePartition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReassignmentsRequest:
    topics: tuple[ReassignableTopic, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignablePartitionResponse:
    partition_index: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignableTopicResponse:
    name: str
    partitions: tuple[ReassignablePartitionResponse, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReassignmentsResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    responses: tuple[ReassignableTopicResponse, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListPartitionReassignmentsRequest:
    """``partitions=None``: every partition with a reassignment in progress."""

    partitions: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OngoingPartitionReassignment:
    """``replicas`` is the union of the original and target replicas (target first)."""

    partition_index: int
    replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OngoingTopicReassignment:
    name: str
    partitions: tuple[OngoingPartitionReassignment, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListPartitionReassignmentsResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    topics: tuple[OngoingTopicReassignment, ...] = ()


# -- AllocateProducerIds (KIP-730) -------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocateProducerIdsRequest:
    broker_id: NodeId
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocateProducerIdsResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    producer_id_start: int = -1
    producer_id_len: int = 0


ControllerRequest = (
    RegisterBrokerRequest
    | BrokerHeartbeatRequest
    | UnregisterBrokerRequest
    | CreateTopicsRequest
    | DeleteTopicsRequest
    | CreatePartitionsRequest
    | IncrementalAlterConfigsRequest
    | AlterPartitionRequest
    | ElectLeadersRequest
    | AllocateProducerIdsRequest
    | AlterPartitionReassignmentsRequest
    | ListPartitionReassignmentsRequest
)

__all__ = [
    "NO_EPOCH",
    "NO_NODE",
    "AllocateProducerIdsRequest",
    "AllocateProducerIdsResponse",
    "AlterConfigOp",
    "AlterConfigsResource",
    "AlterConfigsResourceResult",
    "AlterPartitionData",
    "AlterPartitionPartitionResult",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "AlterPartitionTopic",
    "AlterPartitionTopicResult",
    "AlterableConfig",
    "BrokerEpochState",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "ControllerRequest",
    "CreatableTopic",
    "CreatableTopicResult",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreatePartitionsTopic",
    "CreatePartitionsTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableTopicResult",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "ElectionType",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
    "OngoingPartitionReassignment",
    "OngoingTopicReassignment",
    "PartitionElectionResult",
    "ReassignablePartition",
    "ReassignablePartitionResponse",
    "ReassignableTopic",
    "ReassignableTopicResponse",
    "RegisterBrokerRequest",
    "RegisterBrokerResponse",
    "ReplicaElectionResult",
    "TopicIdPartition",
    "UnregisterBrokerRequest",
    "UnregisterBrokerResponse",
]
