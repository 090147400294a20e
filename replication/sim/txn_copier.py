"""`TxnCopier`: the consume-transform-produce client of the transactional workload (KIP-447,
`replication.sim.txn`).

It reads every partition of the source topic read_committed from its group's committed
offsets and, in each transaction, writes a copy of each record it read to the same partition
of the output topic and commits the group's next offsets with them, as Kafka's
``sendOffsetsToTransaction`` does: AddPartitionsToTxn (the output partitions),
AddOffsetsToTxn (the group's ``__consumer_offsets`` partition), the copies, TxnOffsetCommit
to the group's coordinator, then EndTxn commit or abort (seeded). After an abort, a fencing
or a crash of its own (a new incarnation's InitProducerId fences the old one's transaction)
it rewinds to the group's committed offsets (OffsetFetch with ``require_stable``), so a
record is copied again only if its copy was never committed.
"""

from __future__ import annotations

import random
from typing import final

from kraft.sim.cluster_network import Envelope
from kraft.types import TopicPartition
from replication.broker.replicas.stable_reads import READ_COMMITTED
from replication.sim.cluster import BrokerCluster
from replication.sim.group_offsets import offsets_partition
from replication.sim.messages import (
    FetchReq,
    FetchResp,
    OffsetFetchReq,
    OffsetFetchResp,
    ProduceResp,
    TxnOffsetCommitReq,
)
from replication.sim.txn import (
    REQUEST_TIMEOUT_MS,
    AddOffsetsReq,
    AddPartitionsReq,
    EndTxnReq,
    InitPidReq,
    TxnChecker,
    TxnResp,
)
from replication.sim.txn_clients import (
    ACKED,
    CONSUME_MAX_BYTES,
    RETRIABLE,
    OpenTxn,
    produce_code,
    read_committed,
)
from replication.sim.workload import consumer_fetch
from storage.errors import ErrorCode

GROUP_ID = "copier"
COPIES_TOPIC = "copies"
"""The output topic: a copy of each record of partition p of the source goes to its p."""
CRASH_CHANCE = 0.003
"""Per tick inside a transaction: the copier process dies and a new one starts."""


@final
class TxnCopier:
    """Copies ``sources`` to ``outputs`` (partition by partition) exactly once."""

    def __init__(
        self,
        cluster: BrokerCluster,
        checker: TxnChecker,
        rng: random.Random,
        *,
        node_id: int,
        coordinator: int,
        sources: list[TopicPartition],
        outputs: list[TopicPartition],
    ) -> None:
        self.cluster = cluster
        self.checker = checker
        self.rng = rng
        self.node_id = node_id
        self.coordinator = coordinator
        self.sources = sources
        self.output_of = dict(zip(sources, outputs, strict=True))
        self.transactional_id = f"copier-{node_id}"
        self.producer_id = -1
        self.producer_epoch = -1
        self.phase = "init"
        self.rpc = -1
        self.deadline_ms = 0
        self.position: dict[TopicPartition, int] = {}
        self.read: list[tuple[TopicPartition, int, bytes]] = []
        """Records read since the last commit or rewind: the next transaction copies them."""
        self.next_source = 0
        self.fetching = sources[0]
        self.txn: OpenTxn | None = None
        self.count = 0
        self.committed = 0
        self.aborted = 0
        self.rewinds = 0
        self.crashes = 0
        self.offset_commits = 0
        self.calm_ms = 1 << 62
        cluster.clients[node_id] = self.deliver

    def start(self, at_ms: int, *, calm_ms: int = 1 << 62) -> None:
        """Run from ``at_ms``; from ``calm_ms`` (the heal) it neither crashes nor aborts, so
        it catches up within the run's liveness bound."""
        self.calm_ms = calm_ms
        self.cluster.scheduler.at(at_ms, self._tick)

    def _stormy(self) -> bool:
        return self.cluster.clock.now_ms < self.calm_ms

    def caught_up(self, ends: dict[TopicPartition, int]) -> bool:
        """Between transactions with nothing left to copy below ``ends`` (each source
        partition's last stable offset)."""
        return (
            self.phase == "consume"
            and not self.read
            and all(self.position.get(tp, 0) >= end for tp, end in ends.items())
        )

    # --- the loop -----------------------------------------------------------------------------

    def _tick(self) -> None:
        cluster = self.cluster
        now = cluster.clock.now_ms
        cluster.scheduler.after(self.rng.randint(5, 20), self._tick)
        if self.txn is not None and self.rng.random() < CRASH_CHANCE and self._stormy():
            self._crash()
        if self.phase == "produce" and self.txn is not None:
            self.txn.send(cluster, self.node_id, self.transactional_id, now)
            return
        if self.rpc != -1 and now < self.deadline_ms:
            return
        txn = self.txn
        if self.phase == "init":
            self._send(self.coordinator, InitPidReq(self.transactional_id, self._rpc(now)))
        elif self.phase == "offsets":
            coordinator = cluster.leader_of(offsets_partition(GROUP_ID))
            self._send(coordinator, OffsetFetchReq(GROUP_ID, self._rpc(now)))
        elif self.phase == "consume":
            self._fetch(now)
        elif self.phase == "add" and txn is not None:
            partitions = frozenset(txn.records)
            self._send(
                self.coordinator,
                AddPartitionsReq(self.transactional_id, *txn.key, partitions, self._rpc(now)),
            )
        elif self.phase == "add_offsets" and txn is not None:
            self._send(
                self.coordinator,
                AddOffsetsReq(self.transactional_id, *txn.key, GROUP_ID, self._rpc(now)),
            )
        elif self.phase == "commit_offsets" and txn is not None:
            coordinator = cluster.leader_of(offsets_partition(GROUP_ID))
            request = TxnOffsetCommitReq(GROUP_ID, *txn.key, txn.offsets, self._rpc(now))
            self._send(coordinator, request)
        elif self.phase == "end" and txn is not None:
            request_end = EndTxnReq(self.transactional_id, *txn.key, txn.commit, self._rpc(now))
            self._send(self.coordinator, request_end)

    def _rpc(self, now: int) -> int:
        self.rpc = self.cluster.next_rpc()
        self.deadline_ms = now + REQUEST_TIMEOUT_MS
        return self.rpc

    def _send(self, destination: int, msg: object) -> None:
        if destination >= 0:
            self.cluster.network.send(self.node_id, destination, msg)

    def _crash(self) -> None:
        """The process dies mid-transaction; a new one starts from nothing."""
        self.crashes += 1
        self.txn = None
        self.read = []
        self.position = {}
        self.phase = "init"
        self.rpc = -1

    def _rewind(self) -> None:
        self.rewinds += 1
        self.read = []
        self.phase = "offsets"

    def _fetch(self, now: int) -> None:
        tp = self.fetching = self.sources[self.next_source % len(self.sources)]
        self.next_source += 1
        request = consumer_fetch(
            tp,
            self.position.get(tp, 0),
            max_bytes=CONSUME_MAX_BYTES,
            isolation_level=READ_COMMITTED,
        )
        self._send(self.cluster.leader_of(tp), FetchReq(request, self._rpc(now)))

    def _begin(self, now: int) -> None:
        """A transaction copying what was read since the last commit."""
        key = (self.producer_id, self.producer_epoch)
        copies: dict[TopicPartition, list[bytes]] = {}
        for tp, _, value in self.read:
            self.count += 1
            copy = b"c%d:%d:%d" % (self.node_id, self.count, self.cluster.seed)
            self.checker.on_copied(copy, value)
            copies.setdefault(self.output_of[tp], []).append(copy)
        offsets = tuple((tp, self.position.get(tp, 0)) for tp in self.sources)
        self.txn = OpenTxn.begin(key, copies, self.checker, now, offsets=offsets)
        self.phase = "add"
        self.rpc = -1

    def _end(self, commit: bool) -> None:
        txn = self.txn
        assert txn is not None
        txn.commit = commit
        self.phase = "end"
        self.rpc = -1

    # --- answers ------------------------------------------------------------------------------

    def deliver(self, envelope: Envelope) -> None:
        msg = envelope.payload
        txn = self.txn
        if isinstance(msg, ProduceResp) and txn is not None and msg.rpc in txn.flights:
            if self.phase == "produce":
                done = txn.answered(msg, self.cluster.clock.now_ms)
                if done:
                    self.phase = "commit_offsets"
                    self.rpc = -1
                elif done is False:
                    self._end(False)
            return
        if self.phase == "consume":
            self._fetched(envelope)
            return
        if getattr(msg, "rpc", None) != self.rpc:
            return
        self.rpc = -1
        if isinstance(msg, OffsetFetchResp):
            self._offsets_fetched(msg)
        elif isinstance(msg, ProduceResp) and self.phase == "commit_offsets":
            code = produce_code(msg)
            if code in ACKED:
                self.offset_commits += 1
                self._end(self.rng.random() < 0.65 or not self._stormy())
            elif code not in RETRIABLE:
                self._end(False)  # fenced, or aborted under it
        elif isinstance(msg, TxnResp):
            self._answered(msg)

    def _fetched(self, envelope: Envelope) -> None:
        msg = envelope.payload
        if not isinstance(msg, FetchResp) or msg.rpc != self.rpc:
            return
        self.rpc = -1
        ((data,),) = (t.partitions for t in msg.response.responses)
        if data.error_code is not ErrorCode.NONE:
            return  # not the leader (any more), or the topic is not there yet: again
        tp = self.fetching
        records, _, next_offset = read_committed(tp, data, self.checker)
        position = self.position.get(tp, 0)
        self.read += [(tp, offset, value) for offset, value in records if offset >= position]
        self.position[tp] = max(position, next_offset)
        if self.read and (not records or self.rng.random() < 0.5):
            self._begin(self.cluster.clock.now_ms)

    def _offsets_fetched(self, msg: OffsetFetchResp) -> None:
        if msg.error_code is not ErrorCode.NONE:
            self.rpc = -2  # not the coordinator, loading, or an open transaction: soon again
            self.deadline_ms = self.cluster.clock.now_ms + 20
            return
        committed = dict(msg.offsets)
        self.position = {tp: committed.get(tp, 0) for tp in self.sources}
        self.read = []
        self.phase = "consume"

    def _answered(self, msg: TxnResp) -> None:
        code = msg.error_code
        txn = self.txn
        if code in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            self.rpc = -2  # retry soon
            self.deadline_ms = self.cluster.clock.now_ms + 20
            return
        if self.phase == "init":
            if code is ErrorCode.NONE:
                self.producer_id, self.producer_epoch = msg.producer_id, msg.producer_epoch
                self._rewind()
        elif self.phase in ("add", "add_offsets") and txn is not None:
            if code is not ErrorCode.NONE:
                self.txn = None
                self.phase = "init"  # fenced: its transaction was aborted for it
            else:
                self.phase = "add_offsets" if self.phase == "add" else "produce"
                txn.next_send_ms = 0
        elif self.phase == "end" and txn is not None:
            self.txn = None
            if code is not ErrorCode.NONE:
                self.phase = "init"
                return
            self.producer_id, self.producer_epoch = msg.producer_id, msg.producer_epoch
            if txn.commit:
                self.checker.on_commit_answered(txn.key)
                self.committed += 1
                self.read = []
                self.phase = "consume"
            else:
                self.aborted += 1
                self._rewind()


__all__ = ["COPIES_TOPIC", "GROUP_ID", "TxnCopier"]
