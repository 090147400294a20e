"""`LeaderContext`: drive one `PartitionLeader` by hand (after Kafka's ``PartitionTest``).

The context plays the leader's shell over a `MemoryLog` (appends, applies Readies) and lets
tests play its followers (`fetch`) and its controller (`respond_alter`, `commit_metadata`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from kraft.controller.messages import AlterPartitionPartitionResult
from kraft.metadata.image import PartitionRegistration
from replication.core import (
    AlterPartitionSend,
    BrokerStatus,
    FollowerFetch,
    LeaderFetchAnswer,
    PartitionLeader,
    PartitionProduce,
    ProduceCompletion,
    ProducerStateManager,
    ReplicationConfig,
)
from storage.errors import ErrorCode
from tests.replication.harness import QUIET, TP, MemoryLog, batch

LEADER = 1
LAG_MS = 10_000


def broker_epoch(replica_id: int) -> int:
    return 100 + replica_id


class LeaderContext:
    """A `PartitionLeader` on broker 1 over a `MemoryLog`, with its Readies applied."""

    def __init__(
        self,
        *,
        replicas: tuple[int, ...] = (1, 2, 3),
        isr: tuple[int, ...] | None = None,
        min_isr: int = 1,
        leader_epoch: int = 1,
        partition_epoch: int = 1,
        log: MemoryLog | None = None,
        high_watermark: int = 0,
        brokers: dict[int, BrokerStatus] | None = None,
        producer_state: ProducerStateManager | None = None,
        now_ms: int = 1_000,
    ) -> None:
        self.now_ms = now_ms
        self.log = log or MemoryLog()
        self.producer_state = producer_state or ProducerStateManager()
        self.registration = PartitionRegistration(
            replicas=replicas,
            isr=isr if isr is not None else replicas,
            leader=LEADER,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
        )
        self.brokers = brokers or {r: BrokerStatus(broker_epoch=broker_epoch(r)) for r in replicas}
        self.config = ReplicationConfig(min_insync_replicas=min_isr, replica_lag_time_ms_max=LAG_MS)
        self.completions: dict[int, ProduceCompletion] = {}
        self.alter_sends: list[AlterPartitionSend] = []
        self.published_high_watermarks: list[int] = []
        self._next_request_id = 1
        self.leader = PartitionLeader(
            topic_partition=TP,
            local_id=LEADER,
            local_broker_epoch=broker_epoch(LEADER),
            registration=self.registration,
            brokers=self.brokers,
            log=self.log,
            producer_state=self.producer_state,
            config=self.config,
            high_watermark=high_watermark,
            now_ms=now_ms,
            logger=QUIET,
        )
        self.drain()

    # --- the shell ---
    def drain(self) -> None:
        while self.leader.has_ready():
            rd = self.leader.ready()
            if rd.assign_epoch_start is not None:
                self.log.leader_epoch_cache.assign(*rd.assign_epoch_start)
            self.published_high_watermarks.append(rd.high_watermark)
            for c in rd.produce_completions:
                assert c.request_id not in self.completions, "answered twice"
                self.completions[c.request_id] = c
            if rd.alter_partition is not None:
                self.alter_sends.append(rd.alter_partition)
            self.leader.advance(rd)

    @property
    def high_watermark(self) -> int:
        return self.leader.high_watermark

    # --- inputs ---
    def produce(
        self,
        value: bytes = b"v",
        *,
        acks: int = -1,
        timeout_ms: int = 5_000,
        records: bytes | None = None,
        count: int = 1,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
    ) -> int:
        rid = self._next_request_id
        self._next_request_id += 1
        data = records
        if data is None:
            data = batch(
                value,
                count=count,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
            )
        append = self.leader.handle_produce_request(
            PartitionProduce(request_id=rid, acks=acks, timeout_ms=timeout_ms, records=data),
            self.now_ms,
        )
        if append is not None:
            base = self.log.append(append.records, leader_epoch=append.leader_epoch)
            self.leader.on_appended(rid, base, self.now_ms)
        self.drain()
        return rid

    def fill(self, n: int) -> None:
        """Append ``n`` single-record batches with acks=1."""
        for _ in range(n):
            self.produce(acks=1)

    def fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        *,
        last_fetched_epoch: int | None = None,
        current_leader_epoch: int | None = None,
        broker_epoch_: int | None = None,
    ) -> LeaderFetchAnswer:
        """A fetch from follower ``replica_id``; by default a well-behaved one (its last epoch
        is the leader's epoch for offsets past the epoch start, else -1)."""
        if last_fetched_epoch is None:
            last_fetched_epoch = self.leader.leader_epoch if fetch_offset > 0 else -1
        answer = self.leader.handle_follower_fetch(
            FollowerFetch(
                replica_id=replica_id,
                broker_epoch=broker_epoch(replica_id) if broker_epoch_ is None else broker_epoch_,
                fetch_offset=fetch_offset,
                last_fetched_epoch=last_fetched_epoch,
                current_leader_epoch=(
                    self.leader.leader_epoch
                    if current_leader_epoch is None
                    else current_leader_epoch
                ),
            ),
            self.now_ms,
        )
        self.drain()
        return answer

    def catch_up(self, *replica_ids: int) -> None:
        for r in replica_ids:
            self.fetch(r, self.log.log_end_offset)

    def tick(self, elapsed_ms: int = 0) -> None:
        self.now_ms += elapsed_ms
        self.leader.tick(self.now_ms)
        self.drain()

    def respond_alter(
        self, error: ErrorCode = ErrorCode.NONE, *, send: AlterPartitionSend | None = None
    ) -> None:
        """Answer the latest AlterPartition as the controller would (committing it on NONE)."""
        send = send or self.alter_sends[-1]
        if error is ErrorCode.NONE:
            self.registration = replace(
                self.registration,
                isr=send.data.new_isr,
                partition_epoch=self.registration.partition_epoch + 1,
            )
            result = AlterPartitionPartitionResult(
                partition=0,
                leader_id=LEADER,
                leader_epoch=self.registration.leader_epoch,
                isr=send.data.new_isr,
                partition_epoch=self.registration.partition_epoch,
            )
        else:
            result = AlterPartitionPartitionResult(partition=0, error_code=error)
        self.leader.handle_alter_partition_response(send.alter_id, result, self.now_ms)
        self.drain()

    def commit_metadata(
        self, *, isr: Iterable[int] | None = None, leader: int = LEADER, new_epoch: bool = False
    ) -> bool:
        """Publish a PartitionChange (a newer partition epoch) and apply it to the leader."""
        reg = self.registration
        self.registration = replace(
            reg,
            isr=tuple(isr) if isr is not None else reg.isr,
            leader=leader,
            leader_epoch=reg.leader_epoch + (1 if new_epoch else 0),
            partition_epoch=reg.partition_epoch + 1,
        )
        still = self.leader.handle_partition_change(self.registration, self.now_ms)
        self.drain()
        return still


__all__ = ["LAG_MS", "LEADER", "LeaderContext", "broker_epoch"]
