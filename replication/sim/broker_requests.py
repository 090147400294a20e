"""`ClientRequests`: a `SimBroker`'s answers to the requests of clients and followers.

- Fetch (a follower's or a consumer's) and Produce go through the broker's own handlers
  (`replication.broker.service.BrokerService`); only the waiting is the simulator's, without
  an event loop: a produce waits for its partitions' cores to complete it, and a fetch that is
  not `fetch_satisfied` is parked for up to its ``max_wait_ms`` and run again when a batch is
  appended to one of its partitions.
- WriteTxnMarkers (`WriteMarkersReq`): each marker goes to the partition's core where this
  broker leads, after the broker's gate (`ProducerStateManager.check_marker`), as
  `replication.broker.coordinators.txn_markers.write_markers` does.
- A coordinator's append (`AppendReq`) to an internal topic it hosts: straight to the
  partition's core where this broker leads, as the broker's coordinator runtimes append to
  their replica (a client's Produce to an internal topic is refused). A coordinator that
  loads the partition from this leader fences the appends of its earlier incarnations
  (`fence`): the simulated coordinator is a node of its own, so an append it sent before it
  failed over may still be on its way (or in a paused leader's inbox), where the broker's
  coordinator appends in its own process and such an append never outlives it.
- The group coordinator's transactional offsets (`replication.sim.group_offsets`), where this
  broker leads the group's ``__consumer_offsets`` partition: a TxnOffsetCommit
  (`TxnOffsetCommitReq`) appends its transactional batch the way a coordinator's append
  goes, and an OffsetFetch (`OffsetFetchReq`) answers from the partition's committed
  records, once the leader has committed its whole log (its load).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, final

from kraft.types import TopicPartition
from replication.broker.service import fetch_satisfied
from replication.core import ProduceCompletion
from replication.messages import ProducePartitionResponse, ProduceResponse, ProduceTopicResponse
from replication.sim.group_offsets import (
    offset_fetch,
    offsets_partition,
    txn_offset_commit_batch,
)
from replication.sim.messages import (
    AppendReq,
    FetchReq,
    FetchResp,
    OffsetFetchReq,
    OffsetFetchResp,
    ProduceReq,
    ProduceResp,
    TxnOffsetCommitReq,
    WriteMarkersReq,
)
from storage.errors import ErrorCode
from storage.records import read_header

if TYPE_CHECKING:
    from replication.sim.broker import SimBroker
    from replication.sim.replica import SimReplica

MARKER_TIMEOUT_MS = 5000
"""A marker's acks=all append (the broker's ``MARKER_TIMEOUT_MS``)."""
OFFSET_COMMIT_TIMEOUT_MS = 300
"""A TxnOffsetCommit's acks=all append (``offsets.commit.timeout.ms``, scaled down as the
simulated clients' produce timeouts are)."""

ClientRequest = (
    FetchReq | ProduceReq | WriteMarkersReq | AppendReq | TxnOffsetCommitReq | OffsetFetchReq
)


@dataclass(slots=True)
class _Parked:
    """A fetch that was not `fetch_satisfied`: run again at its deadline or on an append."""

    source: int
    msg: FetchReq
    deadline_ms: int
    partitions: frozenset[TopicPartition]


@dataclass(slots=True)
class _PendingProduce:
    """A Produce whose partitions' cores have not all completed yet."""

    source: int
    rpc: int
    answers: dict[TopicPartition, ProducePartitionResponse | None] = field(default_factory=dict)


@final
class ClientRequests:
    """One broker incarnation's client-facing requests and their waiting (module docstring)."""

    def __init__(self, broker: SimBroker) -> None:
        self.broker = broker
        self.parked: list[_Parked] = []
        self.waiting: dict[int, tuple[_PendingProduce, TopicPartition, SimReplica]] = {}
        self.next_request_id = 1
        self.coordinator_epochs: dict[TopicPartition, int] = {}
        """tp -> the newest coordinator epoch that loaded it from this leader (`fence`)."""

    def handle(self, source: int, msg: ClientRequest) -> None:
        if isinstance(msg, FetchReq):
            self._answer_fetch(source, msg, park=True)
        elif isinstance(msg, ProduceReq):
            request = msg.request
            parts = [
                (TopicPartition(t.name, d.index), d.records)
                for t in request.topic_data
                for d in t.partition_data
            ]
            self._produce(source, msg.rpc, request.acks, request.timeout_ms, parts)
        elif isinstance(msg, WriteMarkersReq):
            parts = [(tp, msg.batch) for tp in msg.partitions]
            self._produce(
                source,
                msg.rpc,
                -1,
                MARKER_TIMEOUT_MS,
                parts,
                marker_version=msg.transaction_version,
            )
        elif isinstance(msg, AppendReq):
            if msg.coordinator_epoch < self.coordinator_epochs.get(msg.tp, -1):
                refused = _refused(msg.tp, ErrorCode.NOT_COORDINATOR)
                self._maybe_answer(_PendingProduce(source, msg.rpc, {msg.tp: refused}))
            else:
                self._produce(
                    source, msg.rpc, -1, msg.timeout_ms, [(msg.tp, msg.batch)], direct=True
                )
        elif isinstance(msg, TxnOffsetCommitReq):
            batch = txn_offset_commit_batch(
                msg.group_id,
                dict(msg.offsets),
                producer_id=msg.producer_id,
                producer_epoch=msg.producer_epoch,
                now_ms=self.broker.cluster.clock.now_ms,
            )
            tp = offsets_partition(msg.group_id)
            self._produce(source, msg.rpc, -1, OFFSET_COMMIT_TIMEOUT_MS, [(tp, batch)], direct=True)
        else:
            self._offset_fetch(source, msg)

    def _offset_fetch(self, source: int, msg: OffsetFetchReq) -> None:
        replica = self._leading(offsets_partition(msg.group_id))
        code, offsets = offset_fetch(replica, msg.group_id)
        answer = OffsetFetchResp(msg.rpc, code, tuple(offsets.items()))
        self.broker.cluster.network.send(self.broker.node_id, source, answer)

    def fence(self, tp: TopicPartition, coordinator_epoch: int) -> None:
        """A coordinator of ``coordinator_epoch`` loads ``tp`` from this leader: appends of
        earlier coordinator epochs are refused from now on (as a new leader epoch fences
        the appends of the coordinator it replaces, in Kafka)."""
        self.coordinator_epochs[tp] = max(coordinator_epoch, self.coordinator_epochs.get(tp, -1))

    def tick(self, now: int) -> None:
        """Answer the parked fetches whose wait is over."""
        due = [p for p in self.parked if p.deadline_ms <= now]
        if due:
            self.parked = [p for p in self.parked if p.deadline_ms > now]
            for p in due:
                self._answer_fetch(p.source, p.msg, park=False)

    def forget(self, tp: TopicPartition) -> None:
        """The replica of ``tp`` is gone from this broker: its parked fetches with it."""
        self.parked = [p for p in self.parked if tp not in p.partitions]

    # --- fetch --------------------------------------------------------------------------------

    def _answer_fetch(self, source: int, msg: FetchReq, *, park: bool) -> None:
        """A Fetch (a follower's or a consumer's), through the broker's handler; parked if it
        is not satisfied yet and may wait."""
        broker = self.broker
        request = msg.request
        partitions = frozenset(
            TopicPartition(t.topic, p.partition) for t in request.topics for p in t.partitions
        )
        before = {tp: r.high_watermark for tp in partitions if (r := broker.replicas.get(tp))}
        response, size, errors = broker.service.fetch_once(request)
        for tp, high_watermark in before.items():
            replica = broker.replicas.get(tp)
            if replica is not None and replica.high_watermark > high_watermark:
                broker.cluster.notify("high_watermark_advanced", broker.node_id, tp)
        if (
            park
            and request.max_wait_ms > 0
            and not fetch_satisfied(request, response, size, errors)
        ):
            deadline = broker.cluster.clock.now_ms + request.max_wait_ms
            self.parked.append(_Parked(source, msg, deadline, partitions))
            return
        broker.cluster.network.send(broker.node_id, source, FetchResp(response, msg.rpc))

    # --- produce ------------------------------------------------------------------------------

    def _produce(
        self,
        source: int,
        rpc: int,
        acks: int,
        timeout_ms: int,
        parts: list[tuple[TopicPartition, bytes]],
        *,
        marker_version: int | None = None,
        direct: bool = False,
    ) -> None:
        """A Produce routed and answered by the broker's handler; with ``marker_version``,
        transaction markers of that transaction version, and with ``direct``, a coordinator's
        own append, each appended where this broker leads. Each partition's core completes it
        (`answer_produce`)."""
        pending = _PendingProduce(source, rpc)
        now = self.broker.cluster.clock.now_ms
        appended: set[TopicPartition] = set()
        for tp, records in parts:
            target: object
            if marker_version is not None:
                target = self._marker_target(tp, records, marker_version)
            elif direct:
                target = self._leading(tp) or _refused(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            else:
                target = self.broker.service.produce_to(tp, records)
            if isinstance(target, ProducePartitionResponse):
                pending.answers[tp] = target
                continue
            replica = self.broker.replicas[tp]  # the replica found leading
            pending.answers[tp] = None
            rid = self.next_request_id
            self.next_request_id += 1
            self.waiting[rid] = (pending, tp, replica)
            replica.driver.produce(rid, acks, timeout_ms, records, now)
            appended.add(tp)
        # A parked fetch of an appended partition runs again now (the broker's long poll
        # wakes on the replica's ``changed``).
        woken = [p for p in self.parked if p.partitions & appended]
        if woken:
            self.parked = [p for p in self.parked if not p.partitions & appended]
            for p in woken:
                self._answer_fetch(p.source, p.msg, park=False)
        self._maybe_answer(pending)

    def _marker_target(
        self, tp: TopicPartition, marker: bytes, transaction_version: int
    ) -> SimReplica | ProducePartitionResponse:
        """The leader's replica of ``tp`` if it may append ``marker`` now (the broker's
        `write_markers` gate), else the answer."""
        replica = self._leading(tp)
        if replica is None:
            return _refused(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        header = read_header(marker)
        code = replica.driver.producer_state.check_marker(
            header.producer_id,
            header.producer_epoch,
            header.coordinator_epoch,
            transaction_version=transaction_version,
            high_watermark=replica.driver.high_watermark,
        )
        return replica if code is ErrorCode.NONE else _refused(tp, code)

    def _leading(self, tp: TopicPartition) -> SimReplica | None:
        replica = self.broker.replicas.get(tp)
        return replica if replica is not None and replica.driver.is_leader else None

    def answer_produce(self, completion: ProduceCompletion) -> None:
        waiting = self.waiting.pop(completion.request_id, None)
        if waiting is not None:
            pending, tp, replica = waiting
            pending.answers[tp] = self.broker.service.produce_answered(tp, replica, completion)
            self._maybe_answer(pending)

    def _maybe_answer(self, pending: _PendingProduce) -> None:
        answers = pending.answers
        if any(answer is None for answer in answers.values()):
            return
        by_topic: dict[str, list[ProducePartitionResponse]] = {}
        for tp, answer in answers.items():
            assert answer is not None
            by_topic.setdefault(tp.topic, []).append(answer)
        response = ProduceResponse(
            responses=tuple(
                ProduceTopicResponse(name=name, partition_responses=tuple(parts))
                for name, parts in by_topic.items()
            )
        )
        broker = self.broker
        broker.cluster.network.send(
            broker.node_id, pending.source, ProduceResp(response, pending.rpc)
        )


def _refused(tp: TopicPartition, code: ErrorCode) -> ProducePartitionResponse:
    return ProducePartitionResponse(index=tp.partition, error_code=code)


__all__ = ["MARKER_TIMEOUT_MS", "ClientRequests"]
