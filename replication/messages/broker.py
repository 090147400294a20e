"""Requests and responses of the broker APIs (``proto/kraft/v1/broker.proto``) as dataclasses.

Each class has the name and the field names of its proto message, so the generic by-name
converter (`replication.codec`, built on `kraft.transport.controller_codec`) maps them both ways.
The shapes are Kafka's (ProduceRequest.json, FetchRequest.json, ListOffsetsRequest.json,
MetadataRequest.json, InitProducerIdRequest.json) in snake_case.

Conventions, as in broker.proto: ``-1`` means none/unknown for ids, epochs, offsets and
timestamps; errors are per partition with an optional message; ``records`` fields hold whole
Kafka v2 record batches, concatenated, as raw ``bytes`` the codec never looks into.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage.errors import ErrorCode
from storage.file_region import Records

# ListOffsets sentinel timestamps (Kafka's ListOffsetsRequest.EARLIEST_TIMESTAMP / LATEST_...):
# their one home is the log that answers them.
from storage.log_read import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)

# Fetch isolation levels (Kafka's IsolationLevel).
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
CONSUMER_REPLICA_ID = -1
"""``replica_id`` of a consumer's Fetch or ListOffsets (followers send their broker id)."""

# -- Produce --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducePartitionData:
    index: int
    records: bytes
    """v2 batches, with producer id/epoch/base sequence when idempotent (KIP-98)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceTopicData:
    name: str
    partition_data: tuple[ProducePartitionData, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceRequest:
    acks: int = -1
    """0, 1 or -1 (all)."""
    timeout_ms: int = 30_000
    """How long the leader may wait for acks=all replication."""
    topic_data: tuple[ProduceTopicData, ...] = ()
    transactional_id: str = ""
    """A transactional producer's: the leader verifies its transaction (KIP-890 part 1)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderIdAndEpoch:
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducePartitionResponse:
    index: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    current_leader: LeaderIdAndEpoch | None = None
    """Set with NOT_LEADER_OR_FOLLOWER (KIP-951): the new leader, if the broker knows it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceTopicResponse:
    name: str
    partition_responses: tuple[ProducePartitionResponse, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceResponse:
    responses: tuple[ProduceTopicResponse, ...] = ()


# -- Fetch (consumers and follower replicas) ------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchPartition:
    partition: int
    current_leader_epoch: int = -1
    """-1: not checked (KIP-320)."""
    fetch_offset: int
    last_fetched_epoch: int = -1
    """Followers: the epoch of the batch before ``fetch_offset``."""
    log_start_offset: int = -1
    partition_max_bytes: int = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchTopic:
    topic: str
    partitions: tuple[FetchPartition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerFetchRequest:
    replica_id: int = CONSUMER_REPLICA_ID
    replica_epoch: int = -1
    """The follower's broker epoch (KIP-380); -1 for consumers."""
    max_wait_ms: int = 500
    """Long poll: ``fetch.max.wait.ms`` / ``replica.fetch.wait.max.ms``."""
    min_bytes: int = 1
    max_bytes: int = 50 << 20
    isolation_level: int = READ_UNCOMMITTED
    topics: tuple[FetchTopic, ...] = ()
    rack_id: str = ""
    """KIP-392: the consumer's rack."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochEndOffset:
    epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortedTransaction:
    """An aborted transaction whose records a read_committed fetch returns (KIP-98)."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchPartitionData:
    partition_index: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    diverging_epoch: EpochEndOffset | None = None
    """Set for a follower whose log diverged: truncate to it, then fetch again."""
    current_leader: LeaderIdAndEpoch | None = None
    preferred_read_replica: int = -1
    """KIP-392; -1 if none."""
    records: Records = b""
    """Whole batches; a `storage.file_region.FileRegion` only for a fetch that asked for one
    (`RequestContext.file_regions`: a plaintext Kafka listener, which sends it with sendfile)."""
    aborted_transactions: tuple[AbortedTransaction, ...] = ()
    """For isolation_level=1: the aborted transactions with records in ``records``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchTopicResponse:
    topic: str
    partitions: tuple[FetchPartitionData, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerFetchResponse:
    error_code: ErrorCode = ErrorCode.NONE
    responses: tuple[FetchTopicResponse, ...] = ()


# -- ListOffsets ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartition:
    partition_index: int
    current_leader_epoch: int = -1
    timestamp: int = LATEST_TIMESTAMP
    """-2 earliest, -1 latest, otherwise the first offset at or after this timestamp."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsTopic:
    name: str
    partitions: tuple[ListOffsetsPartition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsRequest:
    replica_id: int = CONSUMER_REPLICA_ID
    isolation_level: int = READ_UNCOMMITTED
    topics: tuple[ListOffsetsTopic, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartitionResponse:
    partition_index: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsTopicResponse:
    name: str
    partitions: tuple[ListOffsetsPartitionResponse, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsResponse:
    topics: tuple[ListOffsetsTopicResponse, ...] = ()


# -- Metadata -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataRequest:
    topics: tuple[str, ...] = ()
    """Empty: every topic."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataBroker:
    node_id: int
    host: str
    port: int
    rack: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataPartition:
    error_code: ErrorCode = ErrorCode.NONE
    partition_index: int
    leader_id: int = -1
    leader_epoch: int = -1
    replica_nodes: tuple[int, ...] = ()
    isr_nodes: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataTopic:
    error_code: ErrorCode = ErrorCode.NONE
    name: str
    topic_id: str = ""
    partitions: tuple[MetadataPartition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataResponse:
    brokers: tuple[MetadataBroker, ...] = ()
    cluster_id: str = ""
    controller_id: int = -1
    topics: tuple[MetadataTopic, ...] = ()


# -- InitProducerId (KIP-98; epoch bumps of KIP-360) ----------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class InitProducerIdRequest:
    transaction_timeout_ms: int = -1
    producer_id: int = -1
    """-1 for a new producer; the current id to bump the epoch (KIP-360)."""
    producer_epoch: int = -1
    transactional_id: str = ""
    """KIP-98: set, the id's transaction coordinator answers (fencing older epochs)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InitProducerIdResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    producer_id: int = -1
    producer_epoch: int = -1


# -- WriteTxnMarkers (KIP-98, broker to broker) ---------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerTopic:
    name: str
    partition_indexes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarker:
    producer_id: int
    producer_epoch: int
    transaction_result: bool
    """True: commit."""
    topics: tuple[WritableTxnMarkerTopic, ...] = ()
    coordinator_epoch: int = 0
    transaction_version: int = 0
    """KIP-1228: the transaction's version; under 2 the marker's epoch is the bumped one, newer
    than the transaction's records (`ProducerStateManager.check_marker`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteTxnMarkersRequest:
    markers: tuple[WritableTxnMarker, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerPartitionResult:
    partition_index: int
    error_code: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerTopicResult:
    name: str
    partitions: tuple[WritableTxnMarkerPartitionResult, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerResult:
    producer_id: int
    topics: tuple[WritableTxnMarkerTopicResult, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteTxnMarkersResponse:
    markers: tuple[WritableTxnMarkerResult, ...] = ()


__all__ = [
    "CONSUMER_REPLICA_ID",
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "AbortedTransaction",
    "BrokerFetchRequest",
    "BrokerFetchResponse",
    "EpochEndOffset",
    "FetchPartition",
    "FetchPartitionData",
    "FetchTopic",
    "FetchTopicResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "LeaderIdAndEpoch",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListOffsetsTopic",
    "ListOffsetsTopicResponse",
    "MetadataBroker",
    "MetadataPartition",
    "MetadataRequest",
    "MetadataResponse",
    "MetadataTopic",
    "ProducePartitionData",
    "ProducePartitionResponse",
    "ProduceRequest",
    "ProduceResponse",
    "ProduceTopicData",
    "ProduceTopicResponse",
    "WritableTxnMarker",
    "WritableTxnMarkerPartitionResult",
    "WritableTxnMarkerResult",
    "WritableTxnMarkerTopic",
    "WritableTxnMarkerTopicResult",
    "WriteTxnMarkersRequest",
    "WriteTxnMarkersResponse",
]
