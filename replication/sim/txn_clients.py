"""The clients of the transactional workload (`replication.sim.txn`): `TxnProducer`, a
transactional producer, and `ReadCommittedConsumer`, one partition's read_committed consumer."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import final

from kraft.sim.cluster_network import Envelope
from kraft.types import TopicPartition
from replication.broker.replicas.stable_reads import READ_COMMITTED
from replication.core import ACKS_ALL
from replication.messages import (
    FetchPartitionData,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
)
from replication.sim.cluster import BrokerCluster
from replication.sim.messages import FetchReq, ProduceReq, ProduceResp
from replication.sim.txn import (
    REQUEST_TIMEOUT_MS,
    AddPartitionsReq,
    EndTxnReq,
    InitPidReq,
    TxnChecker,
    TxnKey,
    TxnResp,
)
from replication.sim.workload import consumer_fetch, fetched
from storage.control import ControlType
from storage.errors import ErrorCode
from storage.file_region import records_bytes
from storage.records import build_batch, iter_batches, offset_values

CONSUME_MAX_BYTES = 4096
RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
"""Produce errors a client retries with the same batch (and sequence)."""
ACKED = frozenset({ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER})
"""A batch's append succeeded (a duplicate: a retry whose first attempt landed)."""


def produce_code(msg: ProduceResp) -> ErrorCode:
    """The error code of a one-partition Produce's answer."""
    ((answer,),) = (t.partition_responses for t in msg.response.responses)
    return answer.error_code


# --- the transactional producer ---------------------------------------------------------------


@dataclass(slots=True)
class OpenTxn:
    """A client's transaction: its batches (one per partition) until each is acknowledged."""

    key: TxnKey
    records: dict[TopicPartition, bytes]
    unacked: set[TopicPartition]
    flights: dict[int, TopicPartition] = field(default_factory=dict)
    next_send_ms: int = 0
    commit: bool = True
    offsets: tuple[tuple[TopicPartition, int], ...] = ()
    """A copier's: the group's offsets it commits (TxnOffsetCommit)."""

    @classmethod
    def begin(
        cls,
        key: TxnKey,
        values: dict[TopicPartition, list[bytes]],
        checker: TxnChecker,
        now: int,
        *,
        offsets: tuple[tuple[TopicPartition, int], ...] = (),
    ) -> OpenTxn:
        """Transaction ``key`` writing ``values``: one batch per partition, told to the
        checker."""
        records: dict[TopicPartition, bytes] = {}
        for tp, written in sorted(values.items()):
            checker.on_written(key, tp, written)
            records[tp] = build_batch(
                written,
                timestamp_ms=now,
                producer_id=key[0],
                producer_epoch=key[1],
                base_sequence=0,  # every transaction has its own epoch (KIP-890 part 2)
                is_transactional=True,
            )
        return cls(key, records, set(records), offsets=offsets)

    def send(self, cluster: BrokerCluster, node_id: int, transactional_id: str, now: int) -> None:
        """Send every unacknowledged batch to its leader (again, once a request timed out)."""
        if now < self.next_send_ms:
            return
        self.next_send_ms = now + REQUEST_TIMEOUT_MS
        self.flights = {}
        for tp in sorted(self.unacked):
            if cluster.leader_of(tp) >= 0:
                rpc = txn_produce(cluster, node_id, transactional_id, tp, self.records[tp])
                self.flights[rpc] = tp

    def answered(self, msg: ProduceResp, now: int) -> bool | None:
        """A Produce answer of one of its batches (``msg.rpc`` in ``flights``): True once
        every batch is acknowledged, False if the transaction must abort (fenced, or aborted
        under it), None while batches are outstanding (a retriable error sends again soon)."""
        tp = self.flights.pop(msg.rpc)
        code = produce_code(msg)
        if code in ACKED:
            self.unacked.discard(tp)
            return True if not self.unacked else None
        if code in RETRIABLE:
            self.next_send_ms = min(self.next_send_ms, now + 30)
            return None
        return False


@final
class TxnProducer:
    """One transactional id's producer: transaction after transaction until ``stop_ms``."""

    def __init__(
        self,
        cluster: BrokerCluster,
        checker: TxnChecker,
        rng: random.Random,
        *,
        node_id: int,
        coordinator: int,
    ) -> None:
        self.cluster = cluster
        self.checker = checker
        self.rng = rng
        self.node_id = node_id
        self.coordinator = coordinator
        self.transactional_id = f"txn-{node_id}"
        self.producer_id = -1
        self.producer_epoch = -1
        self.phase = "init"
        self.txn: OpenTxn | None = None
        self.rpc = -1
        self.deadline_ms = 0
        self.stop_ms = 1 << 62
        self.heal_ms = 0
        self.count = 0
        self.committed = 0
        self.aborted = 0
        self.ended_at: list[int] = []
        """When each of this producer's transactions ended (its commit or abort answered)."""
        cluster.clients[node_id] = self.deliver

    def start(self, at_ms: int, stop_ms: int, *, heal_ms: int = 0) -> None:
        """Run from ``at_ms``; stop between transactions once past ``stop_ms`` and once a
        transaction ended after ``heal_ms`` (the liveness the run waits for)."""
        self.stop_ms = stop_ms
        self.heal_ms = heal_ms
        self.cluster.scheduler.at(at_ms, self._tick)

    @property
    def done(self) -> bool:
        now = self.cluster.clock.now_ms
        return now >= self.stop_ms and self.idle and any(t >= self.heal_ms for t in self.ended_at)

    @property
    def idle(self) -> bool:
        """Between transactions, with a producer id (it stops only then)."""
        return self.phase == "idle"

    def _tick(self) -> None:
        now = self.cluster.clock.now_ms
        if self.done:
            return
        self.cluster.scheduler.after(self.rng.randint(5, 20), self._tick)
        if self.phase == "produce":
            self._produce(now)
            return
        if self.rpc != -1 and now < self.deadline_ms:
            return
        if self.phase == "idle":
            self._begin(now)
        txn = self.txn
        if self.phase == "init":
            self._request(InitPidReq(self.transactional_id, self._rpc(now)))
        elif self.phase == "add" and txn is not None:
            partitions = frozenset(txn.records)
            self._request(
                AddPartitionsReq(
                    self.transactional_id, *txn.key, partitions=partitions, rpc=self._rpc(now)
                )
            )
        elif self.phase == "end" and txn is not None:
            rpc = self._rpc(now)
            self._request(EndTxnReq(self.transactional_id, *txn.key, commit=txn.commit, rpc=rpc))

    def _rpc(self, now: int) -> int:
        self.rpc = self.cluster.next_rpc()
        self.deadline_ms = now + REQUEST_TIMEOUT_MS
        return self.rpc

    def _request(self, msg: object) -> None:
        self.cluster.network.send(self.node_id, self.coordinator, msg)

    def _begin(self, now: int) -> None:
        """A new transaction: 1..all partitions, one batch of 1-3 records each."""
        tps = self.cluster.topic_partitions()
        chosen = self.rng.sample(tps, self.rng.randint(1, len(tps)))
        values: dict[TopicPartition, list[bytes]] = {}
        for tp in sorted(chosen):
            for _ in range(self.rng.randint(1, 3)):
                self.count += 1
                value = b"t%d:%d:%d" % (self.node_id, self.count, self.cluster.seed)
                values.setdefault(tp, []).append(value)
        key = (self.producer_id, self.producer_epoch)
        self.txn = OpenTxn.begin(key, values, self.checker, now)
        self.phase = "add"
        self.rpc = -1

    def _produce(self, now: int) -> None:
        assert self.txn is not None
        self.txn.send(self.cluster, self.node_id, self.transactional_id, now)

    def _end(self, commit: bool) -> None:
        txn = self.txn
        assert txn is not None
        txn.commit = commit
        self.phase = "end"
        self.rpc = -1

    def deliver(self, envelope: Envelope) -> None:
        msg = envelope.payload
        txn = self.txn
        if isinstance(msg, ProduceResp):
            if self.phase != "produce" or txn is None or msg.rpc not in txn.flights:
                return
            done = txn.answered(msg, self.cluster.clock.now_ms)
            if done is not None:
                self._end(done and self.rng.random() < 0.65)
            return
        if not isinstance(msg, TxnResp) or msg.rpc != self.rpc:
            return
        self.rpc = -1
        code = msg.error_code
        if code in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            self.deadline_ms = self.cluster.clock.now_ms + 20  # retry soon
            self.rpc = -2
            return
        if self.phase == "init":
            if code is ErrorCode.NONE:
                self.producer_id, self.producer_epoch = msg.producer_id, msg.producer_epoch
                self.phase = "idle"
        elif self.phase == "add":
            if code is ErrorCode.NONE:
                self.phase = "produce"
                assert txn is not None
                txn.next_send_ms = 0
            else:
                self.phase = "init"  # fenced: its transaction was aborted for it
        elif self.phase == "end":
            assert txn is not None
            if code is ErrorCode.NONE:
                if txn.commit:
                    self.checker.on_commit_answered(txn.key)
                    self.committed += 1
                else:
                    self.aborted += 1
                self.ended_at.append(self.cluster.clock.now_ms)
                self.producer_id, self.producer_epoch = msg.producer_id, msg.producer_epoch
                self.phase = "idle"
            else:
                self.phase = "init"
            self.txn = None


def txn_produce(
    cluster: BrokerCluster, node_id: int, transactional_id: str, tp: TopicPartition, batch: bytes
) -> int:
    """Send a transactional producer's ``batch`` to the leader of ``tp`` (acks=all); its rpc."""
    rpc = cluster.next_rpc()
    request = ProduceRequest(
        acks=ACKS_ALL,
        timeout_ms=300,
        transactional_id=transactional_id,
        topic_data=(
            ProduceTopicData(
                name=tp.topic,
                partition_data=(ProducePartitionData(index=tp.partition, records=batch),),
            ),
        ),
    )
    cluster.network.send(node_id, cluster.leader_of(tp), ProduceReq(request, rpc))
    return rpc


# --- the read_committed consumer --------------------------------------------------------------


@final
class ReadCommittedConsumer:
    """One partition's read_committed consumer, reading from the leader up to its LSO."""

    isolation_level = READ_COMMITTED
    """The Fetch's isolation level (a test sets read_uncommitted to see the checker fail)."""

    def __init__(
        self,
        cluster: BrokerCluster,
        checker: TxnChecker,
        rng: random.Random,
        *,
        node_id: int,
        tp: TopicPartition,
    ) -> None:
        self.cluster = cluster
        self.checker = checker
        self.rng = rng
        self.node_id = node_id
        self.tp = tp
        self.position = 0
        self.rpc = -1
        self.deadline_ms = 0
        self.records_read = 0
        self.skipped = 0
        cluster.clients[node_id] = self.deliver

    def start(self, at_ms: int) -> None:
        self.cluster.scheduler.at(at_ms, self._tick)

    def _tick(self) -> None:
        now = self.cluster.clock.now_ms
        self.cluster.scheduler.after(self.rng.randint(10, 40), self._tick)
        if self.rpc != -1 and now < self.deadline_ms:
            return
        leader = self.cluster.leader_of(self.tp)
        if leader < 0:
            return
        self.rpc = self.cluster.next_rpc()
        self.deadline_ms = now + REQUEST_TIMEOUT_MS
        request = consumer_fetch(
            self.tp,
            self.position,
            max_bytes=CONSUME_MAX_BYTES,
            isolation_level=self.isolation_level,
        )
        self.cluster.network.send(self.node_id, leader, FetchReq(request, self.rpc))

    def deliver(self, envelope: Envelope) -> None:
        data = fetched(self, envelope)
        if data is None:
            return
        records, skipped, next_offset = read_committed(self.tp, data, self.checker)
        self.skipped += skipped
        for offset, value in records:
            if offset >= self.position:
                self.checker.on_read(self.tp, offset, value)
                self.records_read += 1
        self.position = max(self.position, next_offset)


def read_committed(
    tp: TopicPartition, data: FetchPartitionData, checker: TxnChecker
) -> tuple[list[tuple[int, bytes]], int, int]:
    """A read_committed fetch's answer as Kafka's consumer reads it: an aborted transaction's
    records are dropped from its first offset until its abort marker. Returns the committed
    records' (offset, value), the number of aborted records dropped and the offset past the
    last batch; checks that no batch reaches the fetch's last stable offset."""
    pending = sorted(data.aborted_transactions or (), key=lambda a: a.first_offset)
    aborting: set[int] = set()
    records = records_bytes(data.records)  # bytes: read_committed is never a region
    out: list[tuple[int, bytes]] = []
    skipped = 0
    next_offset = 0
    for pos, header in iter_batches(records):
        if header.next_offset > data.last_stable_offset:
            checker.fail(
                "lso_never_passes_open_txn",
                f"{tp}: a read_committed fetch returned offsets up to "
                f"{header.next_offset - 1}, at or past its LSO {data.last_stable_offset}",
            )
        last = header.next_offset - 1
        while pending and pending[0].first_offset <= last:
            aborting.add(pending.pop(0).producer_id)
        if header.is_control:
            if header.control_type == ControlType.ABORT:
                aborting.discard(header.producer_id)
        elif header.is_transactional and header.producer_id in aborting:
            skipped += header.last_offset_delta + 1
        else:
            batch = records[pos : pos + header.size_bytes]
            out.extend((o, v) for o, v in offset_values(batch) if v is not None)
        next_offset = header.next_offset
    return out, skipped, next_offset


__all__ = [
    "ACKED",
    "RETRIABLE",
    "OpenTxn",
    "ReadCommittedConsumer",
    "TxnProducer",
    "produce_code",
    "read_committed",
    "txn_produce",
]
