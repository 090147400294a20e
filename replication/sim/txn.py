"""The transactional workload of the broker simulation (KIP-98, KIP-890 part 2).

- `TxnCoordinatorHost`: the pure `replication.txn.TxnCoordinator` hosted as the broker hosts
  it: every state change is a record appended to the coordinator's log and then replayed, a
  restarted coordinator rebuilds its state by replaying that log and writes the markers of
  the transactions it finds preparing again, markers go to each partition's leader
  (`WriteMarkersReq`, appended with acks=all by the leader's core), and ``tick`` aborts timed
  out transactions. NB (simplified): the log is a durable list on the host, not a replicated
  ``__transaction_state`` partition; a coordinator crash models a coordinator failover (the
  coordinator epoch is its incarnation) with no loss of its written records.
- `TxnProducer`: a transactional producer (InitProducerId, AddPartitionsToTxn, one
  transactional batch per partition, EndTxn v5 commit or abort, seeded), retrying as a client
  does; its epoch is bumped by every EndTxn.
- `ReadCommittedConsumer`: one partition's ``isolation.level=read_committed`` consumer, which
  drops aborted transactions' records with the fetch's aborted-transaction list as Kafka's
  consumer does.
- `TxnChecker`: the invariants (below), with `TxnNemesis` crashing and restarting the
  coordinator while the broker nemesis runs.

Invariants (``TxnChecker``):

- ``txn_one_outcome``: a transaction (producer id, epoch) is decided once, commit or abort.
- ``txn_answer_matches``: a producer told its commit succeeded has a committed transaction.
- ``lso_never_passes_open_txn``: a read_committed fetch returns only records below its last
  stable offset, and a transactional record only once its transaction is decided.
- ``no_aborted_read``: a read_committed consumer never returns a record of an aborted
  transaction.
- ``no_duplicate_read``: no record is read at two offsets.
- ``no_committed_lost``: after the faults heal and every transaction ended, every record of
  every committed transaction has been read.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import final

from kraft.sim.checker import InvariantViolated
from kraft.sim.cluster_network import Envelope
from kraft.types import TopicPartition
from replication.broker.stable_reads import READ_COMMITTED
from replication.core import ACKS_ALL
from replication.messages import (
    BrokerFetchRequest,
    FetchPartition,
    FetchTopic,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
)
from replication.sim.cluster import BrokerCluster
from replication.sim.messages import FetchReq, FetchResp, ProduceReq, ProduceResp, WriteMarkersReq
from replication.txn import TxnConfig, TxnCoordinator
from replication.txn.coordinator import NEEDS_PRODUCER_ID, MarkerJob, ProducerIdAndEpoch
from replication.txn.records import Record, decode_key, decode_metadata
from replication.txn.state import TxnState
from storage.control import ControlType, build_marker_batch
from storage.errors import ErrorCode
from storage.records import build_batch, iter_batches, offset_values

TXN_TIMEOUT_MS = 1500
"""``transaction.timeout.ms`` of the producers: the coordinator aborts a transaction stuck
longer (a producer cut off by the faults)."""
REQUEST_TIMEOUT_MS = 400
MARKER_RETRY_MS = 200
COORDINATOR_TICK_MS = 10
FIRST_PRODUCER_ID = 5000
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

TxnKey = tuple[int, int]
"""A transaction: (producer id, producer epoch) of its records."""


# --- messages between the producers and the coordinator ---------------------------------------


@dataclass(frozen=True, slots=True)
class InitPidReq:
    transactional_id: str
    rpc: int


@dataclass(frozen=True, slots=True)
class AddPartitionsReq:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    rpc: int


@dataclass(frozen=True, slots=True)
class EndTxnReq:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    rpc: int


@dataclass(frozen=True, slots=True)
class TxnResp:
    rpc: int
    error_code: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


# --- the checker ------------------------------------------------------------------------------


@final
class TxnChecker:
    """The transactional invariants (module docstring)."""

    def __init__(self) -> None:
        self.writer: dict[bytes, TxnKey] = {}
        """Every value a transactional producer built -> its transaction."""
        self.values: dict[TxnKey, dict[TopicPartition, list[bytes]]] = {}
        self.decided: dict[TxnKey, bool] = {}
        """Transaction -> committed, once the coordinator wrote PREPARE_COMMIT/ABORT."""
        self.read_at: dict[TopicPartition, dict[bytes, int]] = {}
        self.reads = 0

    @staticmethod
    def fail(invariant: str, detail: str) -> None:
        raise InvariantViolated(invariant, detail)

    def on_written(self, key: TxnKey, tp: TopicPartition, values: list[bytes]) -> None:
        for v in values:
            self.writer[v] = key
        self.values.setdefault(key, {}).setdefault(tp, []).extend(values)

    def on_decided(self, key: TxnKey, commit: bool) -> None:
        before = self.decided.setdefault(key, commit)
        if before != commit:
            self.fail(
                "txn_one_outcome", f"transaction {key} decided {before} then {commit} (commit)"
            )

    def on_commit_answered(self, key: TxnKey) -> None:
        if self.decided.get(key) is not True:
            self.fail(
                "txn_answer_matches",
                f"transaction {key}: EndTxn(commit) answered NONE, but the coordinator decided "
                f"{self.decided.get(key)}",
            )

    def on_read(self, tp: TopicPartition, offset: int, value: bytes) -> None:
        self.reads += 1
        key = self.writer.get(value)
        if key is None:
            self.fail("no_aborted_read", f"{tp}@{offset}: {value!r} was never produced")
            return
        decided = self.decided.get(key)
        if decided is None:
            self.fail(
                "lso_never_passes_open_txn",
                f"{tp}@{offset}: read_committed returned {value!r} of transaction {key}, "
                f"which is still open",
            )
        if decided is False:
            self.fail(
                "no_aborted_read", f"{tp}@{offset}: read {value!r} of aborted transaction {key}"
            )
        at = self.read_at.setdefault(tp, {}).setdefault(value, offset)
        if at != offset:
            self.fail("no_duplicate_read", f"{tp}: {value!r} read at offsets {at} and {offset}")

    def check_committed_read(self) -> int:
        """``no_committed_lost``; the number of committed records."""
        total = 0
        for key, committed in sorted(self.decided.items()):
            if not committed:
                continue
            for tp, values in self.values.get(key, {}).items():
                total += len(values)
                missing = [v for v in values if v not in self.read_at.get(tp, {})]
                if missing:
                    self.fail(
                        "no_committed_lost",
                        f"{tp}: committed transaction {key}'s records {missing!r} were never "
                        f"read by the read_committed consumer",
                    )
        return total


# --- the coordinator --------------------------------------------------------------------------


@dataclass(slots=True)
class _Markers:
    job: MarkerJob
    batch: bytes
    remaining: set[TopicPartition]
    next_send_ms: int = 0


@final
class TxnCoordinatorHost:
    """The transaction coordinator of every transactional id (module docstring)."""

    def __init__(self, cluster: BrokerCluster, checker: TxnChecker, *, node_id: int) -> None:
        self.cluster = cluster
        self.checker = checker
        self.node_id = node_id
        self.log: list[Record] = []
        """The coordinator's written records (durable: they survive its crashes)."""
        self.next_producer_id = FIRST_PRODUCER_ID
        """The controller's producer-id blocks (KIP-730): durable, never reused."""
        self.up = False
        self.incarnation = 0
        self.core = TxnCoordinator(TxnConfig())
        self.markers: dict[tuple[str, int, int], _Markers] = {}
        self.rpcs: dict[int, tuple[str, int, int]] = {}
        self.markers_written = 0
        cluster.clients[node_id] = self.deliver

    def start(self) -> None:
        """Become the coordinator: rebuild the state from the log (the new leader's load)."""
        self.up = True
        self.incarnation += 1
        self.core = TxnCoordinator(TxnConfig(transaction_max_timeout_ms=60_000))
        for key, value in self.log:
            self.core.replay(key, value)
        self.markers = {}
        self.rpcs = {}
        inc = self.incarnation
        self.cluster.scheduler.after(0, lambda: self._tick(inc))

    def crash(self) -> None:
        self.up = False

    def busy(self) -> bool:
        """A transaction is ongoing or its markers are not all written."""
        return any(
            m.state is TxnState.ONGOING or m.state.is_preparing
            for m in self.core.transactions().values()
        )

    def _write(self, records: list[Record]) -> None:
        for key, value in records:
            self.log.append((key, value))
            self.core.replay(key, value)
            if value is None:
                continue
            meta = decode_metadata(decode_key(key), value)
            if meta.state.is_preparing:  # the decision: its epoch is the one before the bump
                self.checker.on_decided(
                    (meta.producer_id, meta.last_producer_epoch),
                    meta.state is TxnState.PREPARE_COMMIT,
                )

    def _new_producer_id(self) -> int:
        self.next_producer_id += 1
        return self.next_producer_id - 1

    def _tick(self, incarnation: int) -> None:
        if not self.up or incarnation != self.incarnation:
            return
        cluster = self.cluster
        now = cluster.clock.now_ms
        cluster.scheduler.after(COORDINATOR_TICK_MS, lambda: self._tick(incarnation))
        self._write(self.core.tick(now))
        for job in self.core.pending_markers():
            key = (job.transactional_id, job.producer_id, job.producer_epoch)
            state = self.markers.get(key)
            if state is None:
                batch = build_marker_batch(
                    commit=job.commit,
                    producer_id=job.producer_id,
                    producer_epoch=job.producer_epoch,
                    coordinator_epoch=self.incarnation,
                    timestamp_ms=now,
                )
                state = self.markers[key] = _Markers(job, batch, set(job.partitions))
            if not state.remaining:
                self._complete(key)
            elif now >= state.next_send_ms:
                state.next_send_ms = now + MARKER_RETRY_MS
                by_leader: dict[int, list[TopicPartition]] = {}
                for tp in sorted(state.remaining):
                    leader = cluster.leader_of(tp)
                    if leader >= 0:
                        by_leader.setdefault(leader, []).append(tp)
                for leader, tps in sorted(by_leader.items()):
                    rpc = cluster.next_rpc()
                    self.rpcs[rpc] = key
                    msg = WriteMarkersReq(tuple(tps), state.batch, rpc)
                    cluster.network.send(self.node_id, leader, msg)

    def _complete(self, key: tuple[str, int, int]) -> None:
        state = self.markers.pop(key)
        self._write(self.core.complete(state.job, self.cluster.clock.now_ms).records)

    def deliver(self, envelope: Envelope) -> None:
        if not self.up:
            return
        msg = envelope.payload
        now = self.cluster.clock.now_ms
        if isinstance(msg, ProduceResp):
            key = self.rpcs.pop(msg.rpc, None)
            state = None if key is None else self.markers.get(key)
            if key is None or state is None:
                return
            for topic in msg.response.responses:
                for p in topic.partition_responses:
                    if p.error_code is ErrorCode.NONE:
                        state.remaining.discard(TopicPartition(topic.name, p.index))
                        self.markers_written += 1
            if not state.remaining:
                self._complete(key)
            return
        answer: ProducerIdAndEpoch
        if isinstance(msg, InitPidReq):
            result = self.core.init_producer_id(msg.transactional_id, TXN_TIMEOUT_MS, now)
            if result.response == NEEDS_PRODUCER_ID:
                result = self.core.init_producer_id(
                    msg.transactional_id,
                    TXN_TIMEOUT_MS,
                    now,
                    new_producer_id=self._new_producer_id(),
                )
            self._write(result.records)
            answer = result.response
        elif isinstance(msg, AddPartitionsReq):
            added = self.core.add_partitions(
                msg.transactional_id,
                msg.producer_id,
                msg.producer_epoch,
                msg.partitions,
                now,
                transaction_version=2,
            )
            self._write(added.records)
            answer = ProducerIdAndEpoch(error_code=added.response)
        elif isinstance(msg, EndTxnReq):
            ended = self.core.end_txn(
                msg.transactional_id,
                msg.producer_id,
                msg.producer_epoch,
                commit=msg.commit,
                now_ms=now,
                transaction_version=2,
            )
            if ended.response == NEEDS_PRODUCER_ID:
                ended = self.core.end_txn(
                    msg.transactional_id,
                    msg.producer_id,
                    msg.producer_epoch,
                    commit=msg.commit,
                    now_ms=now,
                    transaction_version=2,
                    new_producer_id=self._new_producer_id(),
                )
            self._write(ended.records)
            answer = ended.response
        else:
            return
        response = TxnResp(msg.rpc, answer.error_code, answer.producer_id, answer.producer_epoch)
        self.cluster.network.send(self.node_id, envelope.source, response)


# --- the transactional producer ---------------------------------------------------------------


@dataclass(slots=True)
class _Txn:
    key: TxnKey
    records: dict[TopicPartition, bytes]
    unacked: set[TopicPartition]
    flights: dict[int, TopicPartition] = field(default_factory=dict)
    next_send_ms: int = 0
    commit: bool = True


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
        self.txn: _Txn | None = None
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
        return (
            now >= self.stop_ms
            and self.idle
            and any(t >= self.heal_ms for t in self.ended_at)
        )

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
        key = (self.producer_id, self.producer_epoch)
        records: dict[TopicPartition, bytes] = {}
        for tp in sorted(chosen):
            values = []
            for _ in range(self.rng.randint(1, 3)):
                self.count += 1
                values.append(b"t%d:%d:%d" % (self.node_id, self.count, self.cluster.seed))
            self.checker.on_written(key, tp, values)
            records[tp] = build_batch(
                values,
                timestamp_ms=now,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=0,  # every transaction has its own epoch (KIP-890 part 2)
                is_transactional=True,
            )
        self.txn = _Txn(key, records, set(records))
        self.phase = "add"
        self.rpc = -1

    def _produce(self, now: int) -> None:
        txn = self.txn
        assert txn is not None
        if now < txn.next_send_ms:
            return
        txn.next_send_ms = now + REQUEST_TIMEOUT_MS
        txn.flights = {}
        for tp in sorted(txn.unacked):
            leader = self.cluster.leader_of(tp)
            if leader < 0:
                continue
            rpc = self.cluster.next_rpc()
            txn.flights[rpc] = tp
            request = ProduceRequest(
                acks=ACKS_ALL,
                timeout_ms=300,
                transactional_id=self.transactional_id,
                topic_data=(
                    ProduceTopicData(
                        name=tp.topic,
                        partition_data=(
                            ProducePartitionData(index=tp.partition, records=txn.records[tp]),
                        ),
                    ),
                ),
            )
            self.cluster.network.send(self.node_id, leader, ProduceReq(request, rpc))

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
            tp = txn.flights.pop(msg.rpc)
            (topic,) = msg.response.responses
            (answer,) = topic.partition_responses
            if answer.error_code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                txn.unacked.discard(tp)
                if not txn.unacked:
                    self._end(self.rng.random() < 0.65)
            elif answer.error_code in RETRIABLE:
                txn.next_send_ms = min(txn.next_send_ms, self.cluster.clock.now_ms + 30)
            else:  # fenced, or the transaction was aborted under it: abort
                self._end(False)
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
        request = BrokerFetchRequest(
            max_wait_ms=0,
            max_bytes=CONSUME_MAX_BYTES,
            isolation_level=self.isolation_level,
            topics=(
                FetchTopic(
                    topic=self.tp.topic,
                    partitions=(
                        FetchPartition(
                            partition=self.tp.partition,
                            fetch_offset=self.position,
                            partition_max_bytes=CONSUME_MAX_BYTES,
                        ),
                    ),
                ),
            ),
        )
        self.cluster.network.send(self.node_id, leader, FetchReq(request, self.rpc))

    def deliver(self, envelope: Envelope) -> None:
        msg = envelope.payload
        if not isinstance(msg, FetchResp) or msg.rpc != self.rpc:
            return
        self.rpc = -1
        (topic,) = msg.response.responses
        (data,) = topic.partitions
        if data.error_code is ErrorCode.OFFSET_OUT_OF_RANGE:
            self.position = data.log_start_offset
            return
        if data.error_code is not ErrorCode.NONE:
            return
        # Kafka's consumer: an aborted transaction's records are dropped from its first offset
        # until its abort marker.
        pending = sorted(data.aborted_transactions or (), key=lambda a: a.first_offset)
        aborting: set[int] = set()
        records = data.records
        for pos, header in iter_batches(records):
            if header.next_offset > data.last_stable_offset:
                self.checker.fail(
                    "lso_never_passes_open_txn",
                    f"{self.tp}: a read_committed fetch returned offsets up to "
                    f"{header.next_offset - 1}, at or past its LSO {data.last_stable_offset}",
                )
            last = header.next_offset - 1
            while pending and pending[0].first_offset <= last:
                aborting.add(pending.pop(0).producer_id)
            if header.is_control:
                if header.control_type == ControlType.ABORT:
                    aborting.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in aborting:
                self.skipped += header.last_offset_delta + 1
            else:
                batch = records[pos : pos + header.size_bytes]
                for offset, value in offset_values(batch):
                    if value is not None and offset >= self.position:
                        self.checker.on_read(self.tp, offset, value)
                        self.records_read += 1
            self.position = max(self.position, header.next_offset)


# --- the coordinator's faults -----------------------------------------------------------------


@final
class TxnNemesis:
    """Crashes and restarts the coordinator (a coordinator failover) between ``start_ms`` and
    ``end_ms``; the broker faults are `replication.sim.workload.Nemesis`'s."""

    def __init__(
        self,
        host: TxnCoordinatorHost,
        rng: random.Random,
        *,
        start_ms: int,
        end_ms: int,
    ) -> None:
        self.host = host
        self.rng = rng
        self.start_ms, self.end_ms = start_ms, end_ms
        self.failovers = 0

    def start(self) -> None:
        self.host.cluster.scheduler.at(self.start_ms, self._next)

    def _next(self) -> None:
        scheduler = self.host.cluster.scheduler
        now = self.host.cluster.clock.now_ms
        if now >= self.end_ms:
            if not self.host.up:
                self.host.start()
            return
        scheduler.after(self.rng.randint(200, 700), self._next)
        if self.host.up and self.rng.random() < 0.5:
            self.host.crash()
            self.failovers += 1
            scheduler.after(self.rng.randint(10, 400), self._restart)

    def _restart(self) -> None:
        if not self.host.up:
            self.host.start()


def leader_lso(cluster: BrokerCluster, tp: TopicPartition) -> tuple[int, int] | None:
    """(LSO, HW) of ``tp`` on its leader, None if no broker leads it now."""
    leader = cluster.leader_of(tp)
    broker = cluster.brokers.get(leader)
    replica = None if broker is None or not broker.up else broker.replicas.get(tp)
    if replica is None or not replica.driver.is_leader:
        return None
    hw = replica.high_watermark
    first = replica.producer_state.first_unstable_offset()
    return (hw if first is None else min(first, hw)), hw


__all__ = [
    "AddPartitionsReq",
    "EndTxnReq",
    "InitPidReq",
    "ReadCommittedConsumer",
    "TxnChecker",
    "TxnCoordinatorHost",
    "TxnNemesis",
    "TxnProducer",
    "TxnResp",
    "leader_lso",
]
