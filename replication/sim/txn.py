"""The transactional workload of the broker simulation (KIP-98, KIP-890 part 2).

- `TxnCoordinatorHost`: the pure `replication.txn.TxnCoordinator` hosted as the broker hosts
  it: every state change is a batch of records appended with acks=all to the replicated
  ``__transaction_state-0`` partition (a partition of the simulated cluster, under the same
  faults), applied and answered once committed, one write at a time; an append that fails or
  goes unanswered makes it load again from the partition's committed records under a new
  coordinator epoch, as does a restart, and it then writes the markers of the transactions it
  finds preparing again. Markers go to each partition's leader (`WriteMarkersReq`, appended
  with acks=all by the leader's core), and ``tick`` aborts timed out transactions. NB
  (simplified): the coordinator is a node of its own that reads the partition from its
  leader, where a broker leading the partition hosts it, and its epoch is its incarnation,
  not the partition's leader epoch.
- `TxnProducer` (``txn_clients.py``): a transactional producer (InitProducerId,
  AddPartitionsToTxn, one transactional batch per partition, EndTxn v5 commit or abort,
  seeded), retrying as a client does; its epoch is bumped by every EndTxn.
- `ReadCommittedConsumer` (``txn_clients.py``): one partition's
  ``isolation.level=read_committed`` consumer, which drops aborted transactions' records with
  the fetch's aborted-transaction list as Kafka's consumer does.
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
- exactly once through the copier (``txn_copier.py``, KIP-447), judged as the nemesis
  checker judges it (`replication.nemesis.copies`): ``copied_twice``, ``copied_aborted``,
  ``offsets_not_atomic`` between the committed copies and the group's committed offsets
  (read from ``__consumer_offsets`` after the run), and ``copier_caught_up``.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import final

from kraft.sim.checker import InvariantViolated
from kraft.sim.cluster_network import Envelope
from kraft.types import TRANSACTION_STATE_TOPIC, TopicPartition
from replication.nemesis.copies import judge_copies
from replication.sim.cluster import BrokerCluster
from replication.sim.group_offsets import committed_batches, offsets_partition
from replication.sim.messages import AppendReq, ProduceResp, WriteMarkersReq
from replication.txn import TxnConfig, TxnCoordinator
from replication.txn.coordinator import (
    MARKER_SETTLED,
    NEEDS_PRODUCER_ID,
    MarkerJob,
    ProducerIdAndEpoch,
)
from replication.txn.records import Record, decode_key, decode_metadata
from replication.txn.state import TxnState
from storage.control import build_marker_batch
from storage.errors import ErrorCode
from storage.records import SimpleRecord, build_batch, read_header, record_tuples

TXN_TIMEOUT_MS = 1500
"""``transaction.timeout.ms`` of the producers: the coordinator aborts a transaction stuck
longer (a producer cut off by the faults)."""
REQUEST_TIMEOUT_MS = 400
"""A client request unanswered this long is sent again."""
MARKER_RETRY_MS = 200
"""The coordinator sends a partition's marker again when it is not written after this long."""
COORDINATOR_TICK_MS = 10
APPEND_TIMEOUT_MS = 500
"""The coordinator's acks=all appends to ``__transaction_state``: the leader's timeout."""
APPEND_DEADLINE_MS = 800
"""An append unanswered this long (lost in the network) reloads the coordinator."""
TXN_STATE = TopicPartition(TRANSACTION_STATE_TOPIC, 0)
FIRST_PRODUCER_ID = 5000

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
class AddOffsetsReq:
    """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction
    (its markers are then written there too)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
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
        self.copy_of: dict[bytes, bytes] = {}
        """Every copy the copier built -> the source value it copies."""

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

    def on_copied(self, copy: bytes, source: bytes) -> None:
        self.copy_of[copy] = source

    def check_copies(
        self,
        sources: list[TopicPartition],
        outputs: list[TopicPartition],
        committed_offsets: Mapping[TopicPartition, int],
    ) -> int:
        """Exactly once through the copier, judged on the read_committed consumers' reads as
        the nemesis checker judges it (``copied_twice``, ``copied_aborted``,
        ``offsets_not_atomic``: `replication.nemesis.copies`), and ``copier_caught_up``:
        every committed source record is below the group's committed offset. After
        `check_committed_read`; the number of committed copies."""
        copies: dict[bytes, list[bytes]] = {}
        for tp in outputs:
            for value in self.read_at.get(tp, {}):
                source = self.copy_of.get(value)
                if source is not None:
                    copies.setdefault(source, []).append(value)

        def aborted(value: bytes) -> bool:
            key = self.writer.get(value)
            return key is not None and self.decided.get(key) is False

        reads = [
            (tp.topic, tp.partition, sorted((o, v) for v, o in self.read_at.get(tp, {}).items()))
            for tp in sources
        ]
        ends = {(tp.topic, tp.partition): offset for tp, offset in committed_offsets.items()}
        for check, detail in judge_copies(copies, aborted, reads, ends):
            self.fail(check, detail)
        for topic, partition, records in reads:
            end = ends.get((topic, partition), -1)
            if records and records[-1][0] >= end:
                self.fail(
                    "copier_caught_up",
                    f"{topic}-{partition}: the group's committed offset {end} is not past the "
                    f"last committed record, at {records[-1][0]}",
                )
        return sum(len(made) for made in copies.values())

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
    completing: bool = False


Write = Callable[[int], tuple[list[Record], Callable[[], None]]]
"""A write of the coordinator: from ``now_ms``, on the committed state, the records to append
and what to do once they are committed (answer a client)."""


@dataclass(slots=True)
class _Append:
    records: list[Record]
    then: Callable[[], None]
    rpc: int
    deadline_ms: int


@final
class TxnCoordinatorHost:
    """The transaction coordinator of every transactional id (module docstring)."""

    def __init__(self, cluster: BrokerCluster, checker: TxnChecker, *, node_id: int) -> None:
        self.cluster = cluster
        self.checker = checker
        self.node_id = node_id
        self.next_producer_id = FIRST_PRODUCER_ID
        """The controller's producer-id blocks (KIP-730): durable, never reused."""
        self.up = False
        self.loaded = False
        self.incarnation = 0
        self.core = TxnCoordinator(TxnConfig())
        self.markers: dict[tuple[str, int, int], _Markers] = {}
        self.rpcs: dict[int, tuple[str, int, int]] = {}
        self.queue: deque[Write] = deque()
        self.appending: _Append | None = None
        self.markers_written = 0
        self.reloads = 0
        cluster.clients[node_id] = self.deliver

    def start(self) -> None:
        """Become the coordinator (a failover): load the committed records of
        ``__transaction_state`` before answering (COORDINATOR_LOAD_IN_PROGRESS until then)."""
        self.up = True
        self.incarnation += 1
        self.core = TxnCoordinator(TxnConfig(transaction_max_timeout_ms=60_000))
        self.loaded = False
        self.markers = {}
        self.rpcs = {}
        self.queue.clear()
        self.appending = None
        inc = self.incarnation
        self.cluster.scheduler.after(0, lambda: self._tick(inc))

    def crash(self) -> None:
        self.up = False

    def busy(self) -> bool:
        """Not loaded, or a transaction is ongoing or its markers are not all written."""
        return not self.loaded or any(
            m.state is TxnState.ONGOING or m.state.is_preparing
            for m in self.core.transactions().values()
        )

    def _load(self) -> None:
        """Replay ``__transaction_state`` from its leader once the leader has committed every
        record it holds (the broker's coordinator load reads to the high watermark and waits
        for it to reach the log end), after fencing the appends of its earlier incarnations
        there (`ClientRequests.fence`): one still on its way would change the log under the
        loaded state (seed 0xd4 of ISR mode: a commit written after the load had aborted)."""
        broker = self.cluster.brokers.get(self.cluster.leader_of(TXN_STATE))
        if broker is None or not broker.up or broker.paused:
            return  # (a paused leader cannot answer the reads)
        replica = broker.replicas.get(TXN_STATE)
        if replica is None or not replica.driver.is_leader:
            return
        broker.requests.fence(TXN_STATE, self.incarnation)
        if replica.high_watermark < replica.log.log_end_offset:
            return
        for batch in committed_batches(replica):
            if not read_header(batch).is_control:  # a quorum partition's Raft control records
                for _, _, key, value, _ in record_tuples(batch):
                    if key is not None:
                        self._apply(key, value)
        self.loaded = True

    def _apply(self, key: bytes, value: bytes | None) -> None:
        """A committed record: into the state, and a decision into the checker."""
        self.core.replay(key, value)
        if value is None:
            return
        meta = decode_metadata(decode_key(key), value)
        if meta.state.is_preparing:  # the decision: its epoch is the one before the bump
            self.checker.on_decided(
                (meta.producer_id, meta.last_producer_epoch),
                meta.state is TxnState.PREPARE_COMMIT,
            )

    def _reload(self) -> None:
        """An append failed or went unanswered: what the state holds may not be committed, so
        the coordinator starts again from the log, under a new coordinator epoch (the broker
        drops the coordinator and loads it again)."""
        self.reloads += 1
        self.start()

    def _submit(self, write: Write) -> None:
        self.queue.append(write)
        self._pump()

    def _pump(self) -> None:
        """Run the queued writes one at a time, each on the state its predecessors committed
        (the broker's per-partition coordinator lock)."""
        cluster = self.cluster
        while self.loaded and self.appending is None and self.queue:
            now = cluster.clock.now_ms
            records, then = self.queue.popleft()(now)
            if not records:
                then()
                continue
            leader = cluster.leader_of(TXN_STATE)
            if leader < 0:
                self._reload()
                return
            rpc = cluster.next_rpc()
            self.appending = _Append(records, then, rpc, now + APPEND_DEADLINE_MS)
            batch = build_batch(
                [SimpleRecord(key=k, value=v) for k, v in records], timestamp_ms=now
            )
            append = AppendReq(TXN_STATE, batch, rpc, APPEND_TIMEOUT_MS, self.incarnation)
            cluster.network.send(self.node_id, leader, append)

    def _appended(self, msg: ProduceResp) -> None:
        appending = self.appending
        assert appending is not None and msg.rpc == appending.rpc
        ((answer,),) = (t.partition_responses for t in msg.response.responses)
        if answer.error_code is not ErrorCode.NONE:
            self._reload()
            return
        self.appending = None
        for key, value in appending.records:
            self._apply(key, value)
        appending.then()
        self._pump()

    def _new_producer_id(self) -> int:
        self.next_producer_id += 1
        return self.next_producer_id - 1

    def _tick(self, incarnation: int) -> None:
        if not self.up or incarnation != self.incarnation:
            return
        cluster = self.cluster
        now = cluster.clock.now_ms
        cluster.scheduler.after(COORDINATOR_TICK_MS, lambda: self._tick(incarnation))
        if not self.loaded:
            self._load()
            self._pump()
            return
        if self.appending is not None and now >= self.appending.deadline_ms:
            self._reload()
            return
        if self.appending is None and not self.queue:
            self._submit(lambda now_ms: (self.core.tick(now_ms), _nothing))
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
                    msg = WriteMarkersReq(
                        tuple(tps), state.batch, rpc, state.job.transaction_version
                    )
                    cluster.network.send(self.node_id, leader, msg)

    def _complete(self, key: tuple[str, int, int]) -> None:
        state = self.markers[key]
        if state.completing:
            return
        state.completing = True

        def write(now: int) -> tuple[list[Record], Callable[[], None]]:
            return list(self.core.complete(state.job, now).records), lambda: self._done(key)

        self._submit(write)

    def _done(self, key: tuple[str, int, int]) -> None:
        self.markers.pop(key, None)

    def deliver(self, envelope: Envelope) -> None:
        if not self.up:
            return
        msg = envelope.payload
        if isinstance(msg, ProduceResp):
            if self.appending is not None and msg.rpc == self.appending.rpc:
                self._appended(msg)
                return
            key = self.rpcs.pop(msg.rpc, None)
            state = None if key is None else self.markers.get(key)
            if key is None or state is None:
                return
            for topic in msg.response.responses:
                for p in topic.partition_responses:
                    if p.error_code in MARKER_SETTLED:
                        state.remaining.discard(TopicPartition(topic.name, p.index))
                        self.markers_written += 1
            if not state.remaining:
                self._complete(key)
            return
        if not isinstance(msg, InitPidReq | AddPartitionsReq | AddOffsetsReq | EndTxnReq):
            return
        if not self.loaded:
            error = TxnResp(msg.rpc, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            self.cluster.network.send(self.node_id, envelope.source, error)
            return
        self._submit(lambda now: self._request(envelope.source, msg, now))

    def _request(
        self, source: int, msg: InitPidReq | AddPartitionsReq | AddOffsetsReq | EndTxnReq, now: int
    ) -> tuple[list[Record], Callable[[], None]]:
        """A client's request on the committed state: its records, and its answer once they
        are committed."""
        answer: ProducerIdAndEpoch
        records: list[Record]
        if isinstance(msg, InitPidReq):
            result = self.core.init_producer_id(msg.transactional_id, TXN_TIMEOUT_MS, now)
            if result.response == NEEDS_PRODUCER_ID:
                result = self.core.init_producer_id(
                    msg.transactional_id,
                    TXN_TIMEOUT_MS,
                    now,
                    new_producer_id=self._new_producer_id(),
                )
            records, answer = list(result.records), result.response
        elif isinstance(msg, AddPartitionsReq | AddOffsetsReq):
            partitions = (
                msg.partitions
                if isinstance(msg, AddPartitionsReq)
                else frozenset({offsets_partition(msg.group_id)})
            )
            added = self.core.add_partitions(
                msg.transactional_id,
                msg.producer_id,
                msg.producer_epoch,
                partitions,
                now,
                transaction_version=2,
            )
            records, answer = list(added.records), ProducerIdAndEpoch(error_code=added.response)
        else:
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
            records, answer = list(ended.records), ended.response
        response = TxnResp(msg.rpc, answer.error_code, answer.producer_id, answer.producer_epoch)
        incarnation = self.incarnation

        def reply() -> None:
            if self.up and incarnation == self.incarnation:
                self.cluster.network.send(self.node_id, source, response)

        return records, reply


def _nothing() -> None:
    pass


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
    "AddOffsetsReq",
    "AddPartitionsReq",
    "EndTxnReq",
    "InitPidReq",
    "TxnChecker",
    "TxnCoordinatorHost",
    "TxnKey",
    "TxnNemesis",
    "TxnResp",
    "leader_lso",
]
