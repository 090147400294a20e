"""Dataclasses of the broker APIs only the Kafka listener serves: DescribeLogDirs and
DescribeProducers (Kafka's admin tools ask them; kraft's gRPC clients do not, so they have no
proto message and stay out of `replication.messages`, whose every class mirrors one)."""

from __future__ import annotations

from dataclasses import dataclass

from storage.errors import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    """Some partitions of one topic (a request's selection)."""

    name: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsRequest:
    topics: tuple[TopicPartitions, ...] | None = None
    """None: every partition the broker holds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDirPartition:
    topic: str
    partition: int
    size_bytes: int
    offset_lag: int = 0
    """How far this replica's log end is behind the leader's high watermark (0 on a leader)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsResponse:
    """The broker's one log directory (``data_dir``) and its partitions."""

    error_code: ErrorCode = ErrorCode.NONE
    log_dir: str = ""
    partitions: tuple[LogDirPartition, ...] = ()
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeProducersRequest:
    topics: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerDescription:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    current_txn_start_offset: int = -1
    """The first offset of the producer's open transaction here (KIP-98), -1 if none."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionProducers:
    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    producers: tuple[ProducerDescription, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeProducersResponse:
    error_code: ErrorCode = ErrorCode.NONE
    """A refusal of the whole request (else per partition)."""
    error_message: str = ""
    partitions: tuple[PartitionProducers, ...] = ()


__all__ = [
    "DescribeLogDirsRequest",
    "DescribeLogDirsResponse",
    "DescribeProducersRequest",
    "DescribeProducersResponse",
    "LogDirPartition",
    "PartitionProducers",
    "ProducerDescription",
    "TopicPartitions",
]
