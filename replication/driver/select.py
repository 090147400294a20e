"""The one place that picks a partition driver for a topic.

An ISR topic gets `IsrPartitionDriver`; a topic created with ``replication.mode=quorum`` gets
`QuorumPartitionDriver` (each partition a Raft group of its replicas).
The broker, the simulator and the tests open every replica through `open_partition_driver`.
"""

from __future__ import annotations

import enum
import random
from pathlib import Path

from structlog.typing import FilteringBoundLogger

from kraft.raft import RaftConfig
from kraft.raft.roles import Leader
from kraft.types import TopicPartition
from replication.core import PartitionLeader, TruncationStrategy
from replication.core.high_watermark import ReplicaState
from replication.driver.interface import (
    DriverEvents,
    HighWatermarkCheckpoint,
    PartitionDriver,
    ProducerSnapshots,
    QuorumStateStore,
    ReplicaLog,
)
from replication.driver.isr import IsrPartitionDriver
from replication.driver.quorum import QuorumPartitionDriver
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
    raft_config: RaftConfig | None = None,
    rng: random.Random | None = None,
    write_caching: bool = False,
) -> PartitionDriver:
    """Open the driver of one replica, by the topic's replication mode.

    Quorum mode only (ISR replicas ignore them): ``quorum_state`` is where the replica keeps
    its Raft epoch and vote (required); ``raft_config`` its Raft timeouts; ``rng`` its
    election jitter (default: seeded by the group and replica); ``write_caching`` the topic's
    ``quorum.write.caching``.

    Raises:
        KafkaStorageError: the replica's state cannot be read.
        ValueError: a quorum-mode replica without a ``quorum_state``.
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
            if quorum_state is None:
                raise ValueError("a quorum-mode replica needs a quorum_state store")
            return QuorumPartitionDriver(
                topic_partition=topic_partition,
                topic_id=topic_id,
                directory=directory,
                log=log,
                snapshots=snapshots,
                checkpoint=checkpoint,
                quorum_state=quorum_state,
                local_id=local_id,
                broker_epoch=broker_epoch,
                events=events,
                log_config=log_config,
                raft_config=raft_config,
                rng=rng,
                write_caching=write_caching,
                logger=logger,
            )


def raft_leader(driver: PartitionDriver) -> tuple[int, int] | None:
    """Quorum mode: the Raft leader ``driver`` knows and its epoch (None if it knows none, or
    under ISR): the leader hint of a NOT_LEADER_OR_FOLLOWER answer."""
    if not isinstance(driver, QuorumPartitionDriver) or driver.leader_id is None:
        return None
    return driver.leader_id, driver.leader_epoch


def isr_leader(driver: PartitionDriver) -> PartitionLeader | None:
    """ISR mode: the leader core, when ``driver`` leads (its view of the followers: KIP-392's
    replica selection reads it); None as a follower or under quorum mode."""
    core = driver.core if isinstance(driver, IsrPartitionDriver) else None
    return core if isinstance(core, PartitionLeader) else None


def reads_as_follower(driver: PartitionDriver) -> bool:
    """KIP-392: ``driver`` may serve a consumer as a follower, up to its high watermark, which
    its leader told it: an ISR follower, or a quorum replica that follows a known Raft leader
    (its commit offset is the leader's as of its last fetch: committed, only behind)."""
    if isinstance(driver, QuorumPartitionDriver):
        return not driver.is_leader and driver.leader_id is not None
    return driver.is_follower


def follower_views(driver: PartitionDriver) -> tuple[dict[int, ReplicaState], frozenset[int]]:
    """The leading ``driver``'s view of its followers, for KIP-392's replica selection: each
    follower's progress, as Kafka's ``ReplicaState``, and the replicas in sync. Empty when it
    does not lead. A Raft leader's progress has no follower log start; a quorum follower
    follows the leader's (`QuorumPartitionDriver`), so the leader's own stands for it."""
    leader = isr_leader(driver)
    if leader is not None:
        states = {r: s for r in leader.replicas if (s := leader.follower_state(r)) is not None}
        return states, leader.isr
    if not isinstance(driver, QuorumPartitionDriver):
        return {}, frozenset()
    node = driver.node
    if node is None or not isinstance(node.role, Leader):
        return {}, frozenset()
    start = driver.log.log_start_offset
    states = {
        int(r): ReplicaState(
            log_end_offset=progress.end_offset,
            log_start_offset=start,
            last_fetch_time_ms=progress.last_fetch_ms,
            last_caught_up_time_ms=progress.caught_up_ms,
        )
        for r, progress in node.role.replicas.items()
        if int(r) in driver.voters  # not an observer
    }
    return states, driver.in_sync_replicas()


__all__ = [
    "ReplicationMode",
    "follower_views",
    "isr_leader",
    "open_partition_driver",
    "raft_leader",
    "reads_as_follower",
]
