"""One replica on a simulated broker: the partition driver the broker runs, and what survives
a crash (`ReplicaDisk`).

`SimReplica` is the simulated broker shell's side of `replication.driver.DriverEvents`: it
answers produces and sends AlterPartitions (ISR) or Raft messages (quorum) through its
`SimBroker`, reports a won quorum election to the cluster (the simulator's record of the
leaders quorum groups report), and reports the driver's appends, high watermarks and applied
Readies to the `ClusterChecker`. It is also what the broker's partition APIs read of a replica
(`replication.broker.host.ServedReplica`), so the simulator's brokers answer Produce and Fetch
with the broker's handlers (`replication.broker.service.BrokerService`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kraft.raft.messages import RaftMessage
from kraft.sim.cluster_log import SimPartitionLog
from kraft.types import TopicPartition
from replication.core import (
    AlterPartitionSend,
    FollowerFetch,
    LeaderFetchAnswer,
    PartitionLeader,
    ProduceCompletion,
    ProducerStateManager,
)
from replication.driver import (
    MemoryQuorumStateStore,
    MemorySnapshotStore,
    NoDriverEvents,
    PartitionDriver,
    isr_leader,
    raft_leader,
)
from storage.errors import InvariantViolation

if TYPE_CHECKING:
    import asyncio

if TYPE_CHECKING:
    from replication.broker.host import Admit
    from replication.sim.broker import SimBroker


@dataclass(slots=True)
class ReplicaDisk:
    """What survives a broker crash for one replica: its log (whose unflushed tail a power
    loss cuts), its producer snapshots (written atomically and durably) and, in quorum mode,
    its Raft epoch and vote (durable on write)."""

    log: SimPartitionLog
    snapshots: MemorySnapshotStore
    quorum_state: MemoryQuorumStateStore = field(default_factory=MemoryQuorumStateStore)


class SimLogCheckpoint:
    """The high-watermark checkpoint kept beside a `SimPartitionLog` (survives crashes)."""

    def __init__(self, log: SimPartitionLog) -> None:
        self._log = log

    def read(self) -> int | None:
        return self._log.checkpoint

    def write(self, offset: int) -> None:
        self._log.checkpoint_high_watermark(offset)


class SimReplica(NoDriverEvents):
    """One replica on a `SimBroker`: the partition driver the broker runs, with the
    simulated broker shell's answers to its events (and the checker's hooks)."""

    def __init__(
        self, broker: SimBroker, tp: TopicPartition, topic_id: str, log: SimPartitionLog
    ) -> None:
        self.broker = broker
        self.tp = tp
        self.topic_id = topic_id
        self.log = log
        self.driver: PartitionDriver

    @property
    def high_watermark(self) -> int:
        return self.driver.high_watermark

    # --- what the broker's partition APIs read (`replication.broker.host.ServedReplica`) ------

    @property
    def producer_state(self) -> ProducerStateManager:
        return self.driver.producer_state

    @property
    def leader(self) -> PartitionLeader | None:
        return isr_leader(self.driver)

    def raft_leader(self) -> tuple[int, int] | None:
        return raft_leader(self.driver)

    def handle_follower_fetch(
        self, fetch: FollowerFetch, max_bytes: int, *, read: bool = True, min_one: bool = True
    ) -> tuple[LeaderFetchAnswer, bytes]:
        """A follower's fetch through the leader core, at the simulated time."""
        answer = self.driver.handle_follower_fetch(fetch, self.broker.cluster.clock.now_ms)
        records = b""
        if answer.read_offset is not None and read:
            records = self.read(answer.read_offset, max_bytes, min_one=min_one)
        return answer, records

    def read(
        self,
        from_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one: bool = True,
    ) -> bytes:
        return self.driver.read(from_offset, max_bytes, max_offset, min_one=min_one)

    def read_region(self, from_offset: int, max_bytes: int, max_offset: int | None) -> bytes:
        return self.read(from_offset, max_bytes, max_offset)  # the simulated log is no file

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        raise InvariantViolation("the simulator sends no ListOffsets")

    @property
    def changed(self) -> asyncio.Event:
        raise InvariantViolation("the simulator's broker parks fetches itself (no event loop)")

    async def produce(
        self, acks: int, timeout_ms: int, records: bytes, admit: Admit | None = None
    ) -> ProduceCompletion:
        raise InvariantViolation(
            "the simulator's broker produces through BrokerService.produce_to (no event loop)"
        )

    def produce_now(
        self, acks: int, timeout_ms: int, records: bytes
    ) -> asyncio.Future[ProduceCompletion] | None:
        raise InvariantViolation(
            "the simulator's broker produces through BrokerService.produce_to (no event loop)"
        )

    def produce_completed(self, completion: ProduceCompletion) -> None:
        self.broker.requests.answer_produce(completion)

    def send_alter_partition(self, generation: int, send: AlterPartitionSend) -> None:
        self.broker.send_alter(self, generation, send)

    def high_watermark_published(
        self, old: int, new: int, leader_epoch: int, *, is_leader: bool, from_leader: bool
    ) -> None:
        self.broker.cluster.checker.on_high_watermark(
            self.broker.node_id,
            self.tp,
            self.log,
            old,
            new,
            leader_epoch,
            is_leader=is_leader,
            from_leader=from_leader,
        )

    def log_appended(self, leader_epoch: int, base_offset: int, *, as_leader: bool) -> None:
        if as_leader:
            self.broker.cluster.checker.on_leader_append(
                self.broker.node_id, self.tp, leader_epoch, base_offset
            )

    def ready_applied(self, leader_epoch: int) -> None:
        self.broker.cluster.checker.on_core(self.broker.node_id, self.tp, leader_epoch)

    def send_raft_message(self, message: RaftMessage) -> None:
        self.broker.send_partition_raft(self.tp, message)

    def quorum_leader_elected(self, leader_epoch: int) -> None:
        self.broker.cluster.on_quorum_leader(self.tp, self.broker.node_id, leader_epoch)


__all__ = ["ReplicaDisk", "SimLogCheckpoint", "SimReplica"]
