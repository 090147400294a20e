"""A quorum-mode partition's replicas over an in-memory Raft message bus, for driver tests.

Each `QReplica` owns what survives a crash (its `SimPartitionLog`, producer snapshots,
high-watermark checkpoint and quorum state) and a `QuorumPartitionDriver` opened over them
through `open_partition_driver`. `QuorumGroup` delivers messages (minus the cut links),
ticks every live replica and advances a simulated clock in steps.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from kraft.metadata.image import PartitionRegistration
from kraft.raft import RaftConfig
from kraft.raft.messages import RaftMessage
from kraft.sim.cluster_log import SimPartitionLog
from kraft.types import TopicPartition
from replication.core import ProduceCompletion, ReplicationConfig
from replication.driver import (
    MemoryCheckpoint,
    MemoryQuorumStateStore,
    MemorySnapshotStore,
    NoDriverEvents,
    QuorumPartitionDriver,
    ReplicationMode,
    open_partition_driver,
)
from storage.errors import ErrorCode, KafkaStorageError
from storage.records import build_batch, split_batches

TP = TopicPartition("q", 0)
NO_LEADER = -1


class FaultyLog(SimPartitionLog):
    """A `SimPartitionLog` whose fsync can be made to fail (EIO), counting full flushes and
    data-only syncs."""

    __slots__ = ("data_syncs", "fail_flush", "full_flushes")

    def __init__(self) -> None:
        super().__init__()
        self.fail_flush = False
        self.full_flushes = 0
        self.data_syncs = 0

    def flush(self) -> None:
        if self.fail_flush:
            raise OSError(5, "Input/output error")
        self.full_flushes += 1
        super().flush()

    def sync_data(self) -> None:
        if self.fail_flush:
            raise OSError(5, "Input/output error")
        self.data_syncs += 1
        super().sync_data()


class QReplica(NoDriverEvents):
    """One replica: durable state plus the driver of its current incarnation."""

    def __init__(self, group: QuorumGroup, node_id: int, *, write_caching: bool) -> None:
        self.group = group
        self.node_id = node_id
        self.write_caching = write_caching
        self.log: SimPartitionLog = FaultyLog()
        self.snapshots = MemorySnapshotStore()
        self.checkpoint = MemoryCheckpoint()
        self.quorum_state = MemoryQuorumStateStore()
        self.completions: dict[int, ProduceCompletion] = {}
        self.elected: list[int] = []
        self.offline_errors: list[KafkaStorageError] = []
        self.alive = True
        self.incarnation = 0
        self.driver = self._open()

    def _open(self) -> QuorumPartitionDriver:
        self.incarnation += 1
        driver = open_partition_driver(
            ReplicationMode.QUORUM,
            topic_partition=TP,
            topic_id="tid",
            directory=Path(f"/sim/{self.node_id}"),
            log=self.log,
            snapshots=self.snapshots,
            checkpoint=self.checkpoint,
            quorum_state=self.quorum_state,
            local_id=self.node_id,
            broker_epoch=1,
            events=self,
            raft_config=self.group.raft_config,
            rng=random.Random(self.node_id * 1000 + self.incarnation),
            write_caching=self.write_caching,
        )
        assert isinstance(driver, QuorumPartitionDriver)
        driver.apply_registration(
            self.group.registration, {}, ReplicationConfig(), self.group.now_ms
        )
        return driver

    def crash(self, *, power_loss: bool = True) -> None:
        """Kill the process (and, with ``power_loss``, lose every unflushed write)."""
        self.alive = False
        if power_loss:
            self.log.lose_unflushed()

    def restart(self) -> None:
        self.alive = True
        self.driver = self._open()

    # --- DriverEvents ----------------------------------------------------------------------

    def produce_completed(self, completion: ProduceCompletion) -> None:
        assert completion.request_id not in self.completions, "answered twice"
        self.completions[completion.request_id] = completion

    def send_raft_message(self, message: RaftMessage) -> None:
        self.group.in_flight.append(message)

    def went_offline(self, error: KafkaStorageError) -> None:
        self.offline_errors.append(error)

    def quorum_leader_elected(self, leader_epoch: int) -> None:
        self.elected.append(leader_epoch)


class QuorumGroup:
    """Three (or ``size``) replicas of one quorum-mode partition on a lossless bus."""

    def __init__(self, size: int = 3, *, write_caching: bool = False) -> None:
        self.now_ms = 0
        self.raft_config = RaftConfig()
        self.registration = PartitionRegistration(
            replicas=tuple(range(1, size + 1)), isr=tuple(range(1, size + 1)), leader=NO_LEADER
        )
        self.in_flight: list[RaftMessage] = []
        self.cut: set[frozenset[int]] = set()
        self.replicas: dict[int, QReplica] = {}
        for i in range(1, size + 1):
            self.replicas[i] = QReplica(self, i, write_caching=write_caching)
        self._next_request = 0

    def isolate(self, node_id: int) -> None:
        for other in self.replicas:
            if other != node_id:
                self.cut.add(frozenset((node_id, other)))

    def heal(self) -> None:
        self.cut.clear()

    def step(self, ms: int = 5) -> None:
        """Deliver what is in flight (to live, reachable replicas), then let ``ms`` pass."""
        for _ in range(50):
            if not self.in_flight:
                break
            batch, self.in_flight = self.in_flight, []
            for msg in batch:
                dest = self.replicas.get(msg.destination)
                src = self.replicas.get(msg.source)
                if dest is None or not dest.alive or src is None or not src.alive:
                    continue
                if frozenset((msg.source, msg.destination)) in self.cut:
                    continue
                dest.driver.handle_raft_message(msg, self.now_ms)
        self.now_ms += ms
        for r in self.replicas.values():
            if r.alive:
                r.driver.tick(self.now_ms)

    def run_until(self, predicate: Callable[[], bool], *, limit_ms: int = 20_000) -> None:
        deadline = self.now_ms + limit_ms
        while not predicate():
            assert self.now_ms < deadline, "condition not reached in time"
            self.step()

    def run_for(self, ms: int) -> None:
        end = self.now_ms + ms
        while self.now_ms < end:
            self.step()

    def leader(self) -> QReplica | None:
        leaders = [r for r in self.replicas.values() if r.alive and r.driver.is_leader]
        if not leaders:
            return None
        return max(leaders, key=lambda r: r.driver.leader_epoch)

    def elect(self) -> QReplica:
        self.run_until(lambda: self.leader() is not None)
        leader = self.leader()
        assert leader is not None
        return leader

    def produce(
        self,
        replica: QReplica,
        values: list[bytes],
        *,
        acks: int = -1,
        producer: tuple[int, int, int] | None = None,
        timeout_ms: int = 5_000,
    ) -> int:
        """Send one batch to ``replica``; the request id (see ``replica.completions``)."""
        self._next_request += 1
        pid, epoch, seq = producer or (-1, -1, -1)
        batch = build_batch(
            values,
            timestamp_ms=self.now_ms,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )
        replica.driver.produce(self._next_request, acks, timeout_ms, batch, self.now_ms)
        return self._next_request

    def answered(self, replica: QReplica, request_id: int) -> ProduceCompletion | None:
        return replica.completions.get(request_id)

    def wait_answer(self, replica: QReplica, request_id: int) -> ProduceCompletion:
        self.run_until(lambda: request_id in replica.completions)
        return replica.completions[request_id]


def data_batches(log: SimPartitionLog, below: int | None = None) -> list[bytes]:
    """The log's non-control batches (below ``below``)."""
    from storage.records import read_header

    end = log.log_end_offset if below is None else below
    out = []
    for b in split_batches(log.read(log.log_start_offset, 1 << 30, max_offset=end)):
        if not read_header(b).is_control:
            out.append(b)
    return out


def ok(completion: ProduceCompletion | None) -> bool:
    return completion is not None and completion.error_code is ErrorCode.NONE


__all__ = ["TP", "FaultyLog", "QReplica", "QuorumGroup", "data_batches", "ok"]
