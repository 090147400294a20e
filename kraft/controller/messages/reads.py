"""DescribeCluster: the brokers, topics and finalized feature levels of the controller's
committed image, answered by its shell, never through the core.

The metadata quorum's own admin APIs (DescribeQuorum, AddRaftVoter, RemoveRaftVoter) and the
`CurrentLeader` hint of every controller response are Raft's: `kraft.raft.messages`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.metadata.image import BrokerRegistration, PartitionDescription
from storage.errors import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeClusterRequest:
    """``topic_names=None``: every topic; else those (unknown ones get an error entry)."""

    topic_names: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicMetadata:
    name: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    topic_id: str = ""
    partitions: tuple[PartitionDescription, ...] = ()
    replication_mode: str = ""
    """The topic's ``replication.mode``: ``isr``, or ``quorum`` (each partition a Raft group
    that elects its own leader); empty from a controller that predates it (ISR)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalizedFeature:
    name: str
    level: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeClusterResponse:
    """A controller's committed image: brokers, and topics with leader/epoch/replicas/ISR."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    node_id: int = -1
    controller_id: int = -1
    metadata_offset: int = -1
    brokers: tuple[BrokerRegistration, ...] = ()
    topics: tuple[TopicMetadata, ...] = ()
    finalized_features: tuple[FinalizedFeature, ...] = ()
    """The finalized feature levels (KIP-584; Kafka's DescribeFeatures reads them from
    ApiVersions), 0 included."""
    finalized_features_epoch: int = -1
    """The offset of the batch that last changed them (-1: never)."""


__all__ = [
    "DescribeClusterRequest",
    "DescribeClusterResponse",
    "FinalizedFeature",
    "TopicMetadata",
]
