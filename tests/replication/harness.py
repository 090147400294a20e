"""A tiny deterministic harness for the replication cores: in-memory logs, 2-3 replicas, a
hand-driven controller, crashes that lose the unflushed suffix.

`MemoryLog` is the simulator's `SimPartitionLog` (a `PartitionLogView` over a list of v2
batches and a path-less ``LeaderEpochCache``, storage's own epoch semantics). `Cluster` plays
the broker shells (it applies every Ready the way ``replication.core``'s docstring says) and
the controller (tests call `Cluster.elect`; AlterPartition requests are committed with
`commit_alter_partitions`). Nothing is sent unless a test says so: `fetch` runs one follower
fetch round trip.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import structlog

from kraft.controller.messages import AlterPartitionPartitionResult
from kraft.metadata.image import PartitionRegistration
from kraft.sim.cluster_log import SimPartitionLog
from kraft.types import TopicPartition
from replication.core import (
    AlterPartitionSend,
    BrokerStatus,
    FollowerFetchResponse,
    FollowerReady,
    LeaderReady,
    PartitionFollower,
    PartitionLeader,
    PartitionProduce,
    ProduceCompletion,
    ProducerStateManager,
    ReplicationConfig,
    TruncationStrategy,
)
from replication.sim.cluster import apply_follower_log_writes
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

    def read(self, offset: int, max_bytes: int = 1 << 20) -> bytes:
        return super().read(offset, max_bytes)

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


@dataclass
class Replica:
    node_id: int
    broker_epoch: int
    log: MemoryLog = field(default_factory=MemoryLog)
    producer_state: ProducerStateManager = field(default_factory=ProducerStateManager)
    high_watermark: int = 0
    """The checkpointed high watermark (kept across crashes)."""
    core: PartitionLeader | PartitionFollower | None = None
    alive: bool = True


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
        self.replicas = {r: Replica(node_id=r, broker_epoch=100 + r) for r in replica_ids}
        self.registration = PartitionRegistration(
            replicas=tuple(self.replicas), isr=tuple(self.replicas), leader=-1, leader_epoch=0
        )
        self.completions: dict[int, ProduceCompletion] = {}
        self.alter_requests: list[AlterPartitionSend] = []
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
            if leader.alive and isinstance(leader.core, PartitionLeader):
                leader.core.handle_alter_partition_response(send.alter_id, result, self.now_ms)
                self.drain(leader)

    # --- the shells ---
    def _apply_metadata(self, replica: Replica) -> None:
        reg = self.registration
        core = replica.core
        if core is not None and core.handle_partition_change(reg, self.now_ms):
            self.drain(replica)
            return
        self.drain(replica)
        if reg.leader == replica.node_id:
            replica.core = PartitionLeader(
                topic_partition=TP,
                local_id=replica.node_id,
                local_broker_epoch=replica.broker_epoch,
                registration=reg,
                brokers=self.brokers(),
                log=replica.log,
                producer_state=replica.producer_state,
                config=self.config,
                high_watermark=replica.high_watermark,
                now_ms=self.now_ms,
                logger=QUIET,
            )
        else:
            replica.core = PartitionFollower(
                topic_partition=TP,
                local_id=replica.node_id,
                local_broker_epoch=replica.broker_epoch,
                leader_id=reg.leader,
                leader_epoch=reg.leader_epoch,
                log=replica.log,
                producer_state=replica.producer_state,
                config=self.config,
                high_watermark=replica.high_watermark,
                now_ms=self.now_ms,
                truncation_strategy=self.strategy,
                logger=QUIET,
            )
        self.drain(replica)

    def drain(self, replica: Replica) -> None:
        """Apply every Ready of ``replica``'s core, as the broker shell does."""
        core = replica.core
        while core is not None and core.has_ready():
            if isinstance(core, PartitionLeader):
                self._apply_leader_ready(replica, core, core.ready())
            else:
                self._apply_follower_ready(replica, core, core.ready())

    def _apply_leader_ready(self, replica: Replica, core: PartitionLeader, rd: LeaderReady) -> None:
        if rd.assign_epoch_start is not None:
            replica.log.leader_epoch_cache.assign(*rd.assign_epoch_start)
        replica.high_watermark = rd.high_watermark
        for completion in rd.produce_completions:
            self.completions[completion.request_id] = completion
        if rd.alter_partition is not None:
            self.alter_requests.append(rd.alter_partition)
        core.advance(rd)

    def _apply_follower_ready(
        self, replica: Replica, core: PartitionFollower, rd: FollowerReady
    ) -> None:
        apply_follower_log_writes(replica.log, replica.producer_state, rd)
        replica.high_watermark = rd.high_watermark
        core.advance(rd)

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
        leader = replica.core
        assert isinstance(leader, PartitionLeader)
        rid = self._next_request_id
        self._next_request_id += 1
        produce = PartitionProduce(
            request_id=rid, acks=acks, timeout_ms=timeout_ms, records=records
        )
        append = leader.handle_produce_request(produce, self.now_ms)
        if append is not None:
            base = replica.log.append(append.records, leader_epoch=append.leader_epoch)
            leader.on_appended(rid, base, self.now_ms)
        self.drain(replica)
        return rid

    def fetch(self, node_id: int) -> FollowerFetchResponse | None:
        """One fetch round trip from follower ``node_id`` to its leader."""
        replica = self.replicas[node_id]
        follower = replica.core
        if not replica.alive or not isinstance(follower, PartitionFollower):
            return None
        request = follower.build_fetch_request(self.now_ms)
        if request is None:
            return None
        leader_replica = self.replicas[request.leader_id]
        leader = leader_replica.core
        if not leader_replica.alive or not isinstance(leader, PartitionLeader):
            response = FollowerFetchResponse(
                fetch_id=request.fetch_id, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        else:
            answer = leader.handle_follower_fetch(
                request.as_follower_fetch(),
                self.now_ms,
            )
            self.drain(leader_replica)
            records = b""
            if answer.read_offset is not None:
                records = leader_replica.log.read(answer.read_offset)
            response = FollowerFetchResponse(
                fetch_id=request.fetch_id,
                error_code=answer.error_code,
                high_watermark=answer.high_watermark,
                log_start_offset=answer.log_start_offset,
                diverging_epoch=answer.diverging_epoch,
                records=records,
            )
        follower.handle_fetch_response(response, self.now_ms)
        self.drain(replica)
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
            if replica.alive and isinstance(replica.core, PartitionLeader):
                replica.core.tick(self.now_ms)
                self.drain(replica)

    # --- faults ---
    def flush(self, *node_ids: int) -> None:
        for node_id in node_ids or tuple(self.replicas):
            self.replicas[node_id].log.flush()

    def crash(self, node_id: int) -> None:
        """Power off: unflushed batches are lost; the HW checkpoint survives."""
        replica = self.replicas[node_id]
        replica.alive = False
        replica.core = None
        replica.log.crash()
        replica.high_watermark = min(replica.high_watermark, replica.log.log_end_offset)
        # Restart rebuilds the producer state from the log (no snapshot in this harness).
        replica.producer_state.reload(None, replica.log.headers())

    def restart(self, node_id: int) -> None:
        """Power on and take the current metadata (as follower or leader)."""
        replica = self.replicas[node_id]
        replica.alive = True
        replica.broker_epoch += 1000  # a new broker incarnation (KIP-380)
        for other in self.replicas.values():
            if other.alive and isinstance(other.core, PartitionLeader):
                other.core.update_brokers(self.brokers(), self.now_ms)
                self.drain(other)
        self._apply_metadata(replica)


__all__ = ["QUIET", "TP", "Cluster", "MemoryLog", "Replica", "batch"]
