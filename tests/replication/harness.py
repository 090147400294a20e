"""A tiny deterministic harness for the replication cores: in-memory logs, 2-3 replicas, a
hand-driven controller, crashes that lose the unflushed suffix.

`MemoryLog` is the simulator's `SimPartitionLog` (a `PartitionLogView` over a list of v2
batches and a path-less ``LeaderEpochCache``, storage's own epoch semantics). Each `Replica`
runs the partition driver the broker runs (`replication.driver`), which applies every Ready
the way ``replication.core``'s docstring says; `Cluster` plays the broker shells' transport
and the controller (tests call `Cluster.elect`; AlterPartition requests are committed with
`commit_alter_partitions`). Nothing is sent unless a test says so: `fetch` runs one follower
fetch round trip.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import structlog

from kraft.controller.messages import AlterPartitionPartitionResult
from kraft.metadata.image import PartitionRegistration
from kraft.sim.cluster_log import SimPartitionLog
from kraft.types import TopicPartition
from replication.core import (
    AlterPartitionSend,
    BrokerStatus,
    FollowerFetchResponse,
    PartitionFollower,
    PartitionLeader,
    ProduceCompletion,
    ProducerStateManager,
    ReplicationConfig,
    TruncationStrategy,
)
from replication.driver import (
    IsrPartitionDriver,
    MemoryCheckpoint,
    MemorySnapshotStore,
    NoDriverEvents,
    ReplicationMode,
    open_partition_driver,
)
from storage.errors import ErrorCode
from storage.records import (
    build_batch,
    offset_values,
    read_header,
)

TP = TopicPartition("t", 0)
QUIET = structlog.wrap_logger(
    structlog.PrintLogger(), wrapper_class=structlog.make_filtering_bound_logger(50)
)


def batch(
    value: bytes,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    count: int = 1,
    timestamp_ms: int = 0,
) -> bytes:
    """A v2 batch of ``count`` records (all ``value``), as a producer sends it."""
    return build_batch(
        [value] * count,
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


class MemoryLog(SimPartitionLog):
    """The simulator's partition log (`SimPartitionLog`), read and crashed the way tests do."""

    def read(
        self,
        offset: int,
        max_bytes: int = 1 << 20,
        *,
        max_offset: int | None = None,
        min_one: bool = True,
    ) -> bytes:
        return super().read(offset, max_bytes, max_offset=max_offset, min_one=min_one)

    def crash(self) -> None:
        """Lose every batch above the flush point (the epoch cache is durable, but a log
        that opens trims entries past its end, as ``SegmentedLog.open`` does)."""
        self.lose_unflushed()

    def entries(self) -> list[tuple[int, int, bytes | None]]:
        """``(offset, epoch, payload)`` of every record."""
        return [
            (offset, read_header(b).partition_leader_epoch, value)
            for b in self.batches_between(self.log_start_offset, self.log_end_offset)
            for offset, value in offset_values(b)
        ]

    def values(self) -> list[bytes | None]:
        return [value for _, _, value in self.entries()]


class Replica(NoDriverEvents):
    """One broker's replica: its durable state (log, producer snapshots, HW checkpoint) and,
    while alive, the partition driver over it (the driver's events go to the `Cluster`)."""

    def __init__(self, cluster: Cluster, node_id: int, broker_epoch: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.broker_epoch = broker_epoch
        self.log = MemoryLog()
        self.snapshots = MemorySnapshotStore()
        self.checkpoint = MemoryCheckpoint()
        self.alive = True
        self.driver = self.open()

    def open(self) -> IsrPartitionDriver:
        driver = open_partition_driver(
            ReplicationMode.ISR,
            topic_partition=TP,
            topic_id="tid",
            directory=Path(f"broker-{self.node_id}"),
            log=self.log,
            snapshots=self.snapshots,
            checkpoint=self.checkpoint,
            local_id=self.node_id,
            broker_epoch=self.broker_epoch,
            events=self,
            truncation_strategy=self.cluster.strategy,
            logger=QUIET,
        )
        assert isinstance(driver, IsrPartitionDriver)
        return driver

    @property
    def core(self) -> PartitionLeader | PartitionFollower | None:
        return self.driver.core if self.alive else None

    @property
    def producer_state(self) -> ProducerStateManager:
        return self.driver.producer_state

    @property
    def high_watermark(self) -> int:
        """The live high watermark; the checkpointed one while crashed."""
        return self.driver.high_watermark if self.alive else self.checkpoint.offset or 0

    # --- DriverEvents ---
    def produce_completed(self, completion: ProduceCompletion) -> None:
        self.cluster.completions[completion.request_id] = completion

    def send_alter_partition(self, generation: int, send: AlterPartitionSend) -> None:
        self.cluster.alter_requests.append(send)
        self.cluster.alter_generations[send.alter_id] = generation


class Cluster:
    """Replicas of one partition ``TP`` plus a hand-driven controller."""

    def __init__(
        self,
        replica_ids: Iterable[int] = (1, 2, 3),
        *,
        config: ReplicationConfig | None = None,
        strategy: TruncationStrategy = TruncationStrategy.LEADER_EPOCH,
    ) -> None:
        self.config = config or ReplicationConfig()
        self.strategy = strategy
        self.now_ms = 0
        self.completions: dict[int, ProduceCompletion] = {}
        self.alter_requests: list[AlterPartitionSend] = []
        self.alter_generations: dict[int, int] = {}
        self.replicas = {r: Replica(self, r, broker_epoch=100 + r) for r in replica_ids}
        self.registration = PartitionRegistration(
            replicas=tuple(self.replicas), isr=tuple(self.replicas), leader=-1, leader_epoch=0
        )
        self._next_request_id = 1

    # --- accessors ---
    def log(self, node_id: int) -> MemoryLog:
        return self.replicas[node_id].log

    def leader(self) -> PartitionLeader:
        core = self.replicas[self.registration.leader].core
        assert isinstance(core, PartitionLeader)
        return core

    def follower(self, node_id: int) -> PartitionFollower:
        core = self.replicas[node_id].core
        assert isinstance(core, PartitionFollower)
        return core

    def brokers(self) -> dict[int, BrokerStatus]:
        return {
            r.node_id: BrokerStatus(broker_epoch=r.broker_epoch, fenced=not r.alive)
            for r in self.replicas.values()
        }

    # --- controller ---
    def elect(self, leader: int, isr: Iterable[int] | None = None) -> None:
        """Publish a new leader epoch with ``leader`` (and ``isr``, default: unchanged)."""
        reg = self.registration
        self.registration = replace(
            reg,
            leader=leader,
            isr=tuple(isr) if isr is not None else reg.isr,
            leader_epoch=reg.leader_epoch + 1,
            partition_epoch=reg.partition_epoch + 1,
        )
        for replica in self.replicas.values():
            if replica.alive:
                self._apply_metadata(replica)

    def commit_alter_partitions(self) -> None:
        """Play the controller: commit each pending AlterPartition that matches the current
        epochs (else answer FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION)."""
        requests, self.alter_requests = self.alter_requests, []
        for send in requests:
            reg, data = self.registration, send.data
            if data.leader_epoch != reg.leader_epoch:
                result = AlterPartitionPartitionResult(
                    partition=0, error_code=ErrorCode.FENCED_LEADER_EPOCH
                )
            elif data.partition_epoch != reg.partition_epoch:
                result = AlterPartitionPartitionResult(
                    partition=0, error_code=ErrorCode.INVALID_UPDATE_VERSION
                )
            else:
                self.registration = replace(
                    reg, isr=data.new_isr, partition_epoch=reg.partition_epoch + 1
                )
                result = AlterPartitionPartitionResult(
                    partition=0,
                    leader_id=reg.leader,
                    leader_epoch=reg.leader_epoch,
                    isr=data.new_isr,
                    partition_epoch=reg.partition_epoch + 1,
                )
            leader = self.replicas[reg.leader]
            if leader.alive:
                generation = self.alter_generations.pop(send.alter_id, -1)
                leader.driver.handle_alter_partition_result(
                    generation, send.alter_id, result, self.now_ms
                )

    # --- the shells ---
    def _apply_metadata(self, replica: Replica) -> None:
        replica.driver.apply_registration(
            self.registration, self.brokers(), self.config, self.now_ms
        )

    # --- traffic ---
    def produce(
        self,
        records: bytes,
        *,
        acks: int = -1,
        timeout_ms: int = 30_000,
    ) -> int:
        """Send one produce to the leader; returns its request id (see `completions`)."""
        replica = self.replicas[self.registration.leader]
        assert replica.driver.is_leader
        rid = self._next_request_id
        self._next_request_id += 1
        replica.driver.produce(rid, acks, timeout_ms, records, self.now_ms)
        return rid

    def fetch(self, node_id: int) -> FollowerFetchResponse | None:
        """One fetch round trip from follower ``node_id`` to its leader."""
        replica = self.replicas[node_id]
        if not replica.alive:
            return None
        generation = replica.driver.generation
        request = replica.driver.build_fetch_request(self.now_ms)
        if request is None:
            return None
        leader = self.replicas[request.leader_id]
        if not leader.alive or not leader.driver.is_leader:
            response = FollowerFetchResponse(
                fetch_id=request.fetch_id, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        else:
            answer = leader.driver.handle_follower_fetch(request.as_follower_fetch(), self.now_ms)
            records = b""
            if answer.read_offset is not None:
                records = leader.driver.read(answer.read_offset, 1 << 20)
            response = FollowerFetchResponse(
                fetch_id=request.fetch_id,
                error_code=answer.error_code,
                high_watermark=answer.high_watermark,
                log_start_offset=answer.log_start_offset,
                diverging_epoch=answer.diverging_epoch,
                records=records,
            )
        replica.driver.handle_fetch_response(generation, response, self.now_ms)
        return response

    def replicate(self, rounds: int = 4, node_ids: Iterable[int] | None = None) -> None:
        """``rounds`` fetch rounds of every live follower (or of ``node_ids``)."""
        ids = list(node_ids) if node_ids is not None else list(self.replicas)
        for _ in range(rounds):
            for node_id in ids:
                if node_id != self.registration.leader:
                    self.fetch(node_id)

    def tick(self, elapsed_ms: int) -> None:
        self.now_ms += elapsed_ms
        for replica in self.replicas.values():
            if replica.alive:
                replica.driver.tick(self.now_ms)

    # --- faults ---
    def flush(self, *node_ids: int) -> None:
        for node_id in node_ids or tuple(self.replicas):
            self.replicas[node_id].log.flush()

    def crash(self, node_id: int) -> None:
        """Power off: unflushed batches are lost; the HW checkpoint survives."""
        replica = self.replicas[node_id]
        high_watermark = replica.driver.high_watermark
        replica.alive = False
        replica.log.crash()
        # NB: this harness checkpoints the high watermark continuously (within the log).
        replica.checkpoint.write(min(high_watermark, replica.log.log_end_offset))

    def restart(self, node_id: int) -> None:
        """Power on and take the current metadata (as follower or leader)."""
        replica = self.replicas[node_id]
        replica.alive = True
        replica.broker_epoch += 1000  # a new broker incarnation (KIP-380)
        replica.driver = replica.open()  # reloads the producer state from the log
        for other in self.replicas.values():
            if other.alive and other is not replica:
                other.driver.update_brokers(self.brokers(), self.now_ms)
        self._apply_metadata(replica)


__all__ = ["QUIET", "TP", "Cluster", "MemoryLog", "Replica", "batch"]
