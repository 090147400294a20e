"""Dataclasses of the broker API only the Kafka listener serves: DescribeLogDirs (Kafka's admin
tools ask it; kraft's gRPC clients do not, so it has no proto message and stays out of
`replication.messages`, whose every class mirrors one)."""

from __future__ import annotations

from dataclasses import dataclass

from replication.messages.txn import TopicPartitions
from storage.errors import ErrorCode


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


__all__ = [
    "DescribeLogDirsRequest",
    "DescribeLogDirsResponse",
    "LogDirPartition",
]
