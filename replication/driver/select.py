"""The one place that picks a partition driver for a topic.

An ISR topic gets `IsrPartitionDriver`; a topic created with ``replication.mode=quorum`` gets
a Raft-replicated driver (TODO(#12): until it lands, opening one raises NotImplementedError).
The broker, the simulator and the tests open every replica through `open_partition_driver`.
"""

from __future__ import annotations

import enum
from pathlib import Path

from structlog.typing import FilteringBoundLogger

from kraft.types import TopicPartition
from replication.core import TruncationStrategy
from replication.driver.interface import (
    DriverEvents,
    HighWatermarkCheckpoint,
    PartitionDriver,
    ProducerSnapshots,
    QuorumStateStore,
    ReplicaLog,
)
from replication.driver.isr import IsrPartitionDriver
from storage.config import LogConfig


class ReplicationMode(enum.Enum):
    """How a topic's partitions are replicated (the topic key ``replication.mode``)."""

    ISR = "isr"
    """Kafka's primary-backup replication with an in-sync replica set."""

    QUORUM = "quorum"
    """Each partition is a Raft group of its replicas: commit on a majority, leader by vote."""


def open_partition_driver(
    mode: ReplicationMode,
    *,
    topic_partition: TopicPartition,
    topic_id: str,
    directory: Path,
    log: ReplicaLog,
    snapshots: ProducerSnapshots,
    checkpoint: HighWatermarkCheckpoint,
    quorum_state: QuorumStateStore | None = None,
    local_id: int,
    broker_epoch: int,
    events: DriverEvents,
    log_config: LogConfig | None = None,
    truncation_strategy: TruncationStrategy = TruncationStrategy.LEADER_EPOCH,
    logger: FilteringBoundLogger | None = None,
) -> PartitionDriver:
    """Open the driver of one replica, by the topic's replication mode (``quorum_state``:
    where a quorum-mode replica keeps its Raft epoch and vote; unused by ISR replicas).

    Raises:
        KafkaStorageError: the replica's state cannot be read.
    """
    match mode:
        case ReplicationMode.ISR:
            return IsrPartitionDriver(
                topic_partition=topic_partition,
                topic_id=topic_id,
                directory=directory,
                log=log,
                snapshots=snapshots,
                checkpoint=checkpoint,
                local_id=local_id,
                broker_epoch=broker_epoch,
                events=events,
                log_config=log_config,
                truncation_strategy=truncation_strategy,
                logger=logger,
            )
        case ReplicationMode.QUORUM:
            raise NotImplementedError("quorum-mode partitions: TODO(#12)")


__all__ = ["ReplicationMode", "open_partition_driver"]
