"""The sender thread of a `Producer` (Kafka's ``Sender``): refresh metadata, get a producer
id, expire, drain and send one Produce per broker, detect stalled requests and abandon those
whose partitions moved, and settle each batch from its response. The loop and its guarantees
are described in `replication.clients.producer`'s docstring.

A transactional producer (`replication.clients.transactions`) sends no InitProducerId of its
own, adds the queued partitions to its transaction before draining, drains only those added,
marks its batches transactional and reports failed batches to its `TransactionManager`.

`ProducerSender` is a mixin of `Producer`: it holds no state of its own; the attributes it
declares are the producer's, set in ``Producer.__init__`` and shared under ``_lock``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from kraft.types import TopicPartition
from replication.clients.accumulator import Drained, RecordAccumulator
from replication.clients.batch import ProducerBatch
from replication.clients.config import ProducerConfig
from replication.clients.in_flight import InFlightRequest, InFlightRequests
from replication.clients.metadata import ClusterSnapshot, MetadataCache
from replication.clients.network import BrokerNetwork
from replication.clients.sequencing import IdempotenceState, ProduceAction, decide
from replication.clients.transactions import TransactionManager
from replication.messages import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from storage.compression import Compression
from storage.errors import ErrorCode, KraftError, RequestTimedOutError, error_for

log = structlog.get_logger("kraft.producer")


class ProducerSender:
    """The sender thread's half of `Producer` (see the module docstring)."""

    config: ProducerConfig
    _clock: Callable[[], int]
    _network: BrokerNetwork
    _metadata: MetadataCache
    _idempotence: IdempotenceState | None
    _accumulator: RecordAccumulator
    _compression: Compression
    _lock: threading.Lock
    _metadata_changed: threading.Condition
    _wakeup: threading.Event
    _in_flight: InFlightRequests
    _last_stall_refresh_ms: int
    _retry_noted: dict[TopicPartition, ErrorCode]
    """Per partition, the error whose retries were last announced (`_note_retry`)."""
    produce_requests_sent: int
    produce_batches_sent: int
    _fatal: KraftError | None
    _stopped: bool
    _transactions: TransactionManager | None

    def _refresh_metadata(self) -> None:
        snapshot = self._metadata.snapshot
        try:
            response = self._network.fetch_metadata(
                self._metadata.topics,
                addresses=snapshot.brokers.values(),
                timeout_s=min(self.config.request_timeout_ms / 1000, 2.0),
            )
        except KraftError as e:
            log.warning("metadata_refresh_failed", error=str(e))
            return
        self._metadata.update(response, self._clock())
        with self._metadata_changed:
            self._metadata_changed.notify_all()

    # -- the sender thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopped:
            try:
                delay_ms = self._run_once()
            except Exception:  # never let the sender die silently
                log.exception("producer_sender_failed")
                delay_ms = self.config.retry_backoff_ms
            self._wakeup.wait(max(delay_ms, 1) / 1000)
            self._wakeup.clear()

    def _run_once(self) -> int:
        """One round of the sender loop; returns the milliseconds it may sleep."""
        metadata = self._metadata
        stalled = self._stalled_nodes(self._clock())
        if metadata.topics and metadata.needs_update(self._clock()):
            self._refresh_metadata()
        if stalled:
            self._abandon_moved(stalled)
        state = self._idempotence
        txn = self._transactions
        if state is not None and (not state.has_producer_id or state.epoch_bump_requested):
            if txn is not None:
                # init_transactions gives the id; after a lost sequence abort_transaction
                # bumps the epoch (KIP-360): nothing is sent meanwhile.
                return self.config.retry_backoff_ms
            with self._lock:
                quiet = self._accumulator.in_flight_count == 0
                idle = not self._accumulator.has_incomplete()
            if idle and not state.has_producer_id:
                return 1_000  # no work yet: no InitProducerId (a send wakes us)
            if not quiet:
                return self.config.retry_backoff_ms  # responses will wake us
            if not self._init_producer_id(state):
                return self.config.retry_backoff_ms
        if txn is not None and state is not None:
            with self._lock:
                queued = self._accumulator.queued_partitions()
            adding = txn.partitions_to_add(queued)
            if adding:  # before draining: a partition is sent to once it is in the transaction
                txn.add_partitions(adding, state.producer_id, state.producer_epoch)
        now = self._clock()
        with self._lock:
            expired = self._accumulator.expire(now)
            if expired and state is not None:
                state.request_epoch_bump()  # their sequences will never be sent
            snapshot = metadata.snapshot
            if state is not None and state.epoch_bump_requested:
                drained = Drained(next_ready_check_ms=self.config.retry_backoff_ms)
            else:
                drained = self._accumulator.drain(
                    now,
                    snapshot.leader_for,
                    self._node_ready,
                    self.config.max_request_size,
                    None if txn is None else txn.is_added,
                )
            for node in drained.batches_by_node:
                self._in_flight.drained(node)
        if drained.unknown_leader_topics:
            metadata.add_topics(drained.unknown_leader_topics)
            metadata.request_update()
        if any(
            self._network.is_suspect(snapshot.brokers[node])
            for node in drained.retrying_leaders
            if node in snapshot.brokers
        ):
            metadata.request_update()  # retrying against an unreachable leader: find the next
        for batch in expired:
            if txn is not None:
                txn.on_batch_failed(RequestTimedOutError(f"a batch for {batch.tp} expired"))
            batch.result.complete(
                -1,
                -1,
                RequestTimedOutError(
                    f"expiring {batch.record_count} record(s) for {batch.tp}: "
                    f"{now - batch.created_ms} ms has passed since batch creation"
                ),
            )
        for node, batches in drained.batches_by_node.items():
            self.produce_requests_sent += 1
            self.produce_batches_sent += len(batches)
            self._send_produce(node, batches, snapshot)
        wait = min(drained.next_ready_check_ms, metadata.time_to_next_update_ms(now) or 1_000)
        if stalled or self._in_flight:
            wait = min(wait, self._stall_ms)  # look again when a request may have stalled
        return wait

    @property
    def _stall_ms(self) -> int:
        return self.config.retry_backoff_max_ms

    def _stalled_nodes(self, now: int) -> set[int]:
        """Brokers with a Produce unanswered for ``retry.backoff.max.ms``: marked suspect, and
        a metadata refresh requested (at most once per ``retry.backoff.max.ms``)."""
        with self._lock:
            stalled = self._in_flight.stalled(now, self._stall_ms)
        if not stalled:
            return set()
        for address in stalled.values():
            self._network.mark_suspect(address)
        if now - self._last_stall_refresh_ms >= self._stall_ms:
            self._last_stall_refresh_ms = now
            self._metadata.request_update()
            log.info("produce_request_stalled", brokers=sorted(stalled))
        return set(stalled)

    def _abandon_moved(self, stalled: set[int]) -> None:
        """Abandon the requests to ``stalled`` brokers that carry a partition the metadata now
        says another broker leads (see the module docstring); their batches go back in
        creation order, with their sequences, to the new leader without a backoff."""
        snapshot = self._metadata.snapshot
        now = self._clock()
        with self._lock:
            abandoned = self._in_flight.abandon_moved(stalled, snapshot)
            for request in abandoned:
                for batch in request.batches:
                    self._accumulator.reenqueue(batch, now)
        for request in abandoned:
            if request.call is not None:
                request.call.cancel()
            log.warning(
                "produce_request_abandoned",
                broker=request.node,
                batches=len(request.batches),
                waited_ms=now - request.sent_ms,
            )
        if abandoned:
            self._wakeup.set()

    def _node_ready(self, node: int) -> bool:
        limit = self.config.max_in_flight_requests_per_connection
        return self._in_flight.count(node) < limit

    def _init_producer_id(self, state: IdempotenceState) -> bool:
        """InitProducerId once, or again after a failed batch left a sequence gap (the broker
        answers a fresh producer id; KIP-360's role); True when the producer may send."""

        def check(response: InitProducerIdResponse) -> None:
            if response.error_code is not ErrorCode.NONE:
                raise error_for(response.error_code, response.error_message)

        request = InitProducerIdRequest(
            producer_id=state.producer_id, producer_epoch=state.producer_epoch
        )
        try:
            response = self._network.call_any(
                "InitProducerId",
                request,
                InitProducerIdResponse,
                addresses=self._metadata.snapshot.brokers.values(),
                timeout_s=self.config.request_timeout_ms / 1000,
                check=check,
            )
        except KraftError as e:
            if e.retriable:
                log.warning("init_producer_id_failed", error=str(e))
                return False
            self._fail_fatally(e)
            return False
        with self._lock:
            state.set_producer_id_and_epoch(response.producer_id, response.producer_epoch)
            self._accumulator.resequence()
        log.info(
            "producer_id_assigned",
            producer_id=response.producer_id,
            producer_epoch=response.producer_epoch,
        )
        return True

    def _send_produce(
        self, node: int, batches: list[ProducerBatch], snapshot: ClusterSnapshot
    ) -> None:
        by_topic: dict[str, list[ProducePartitionData]] = {}
        for batch in batches:
            by_topic.setdefault(batch.tp.topic, []).append(
                ProducePartitionData(
                    index=batch.tp.partition,
                    records=batch.encode(self._compression, self._transactions is not None),
                )
            )
        request = ProduceRequest(
            transactional_id=self.config.transactional_id or "",
            acks=self.config.acks,
            timeout_ms=self.config.request_timeout_ms,
            topic_data=tuple(
                ProduceTopicData(name=name, partition_data=tuple(parts))
                for name, parts in by_topic.items()
            ),
        )

        address = snapshot.brokers[node]
        if self.config.acks == 0:
            # Kafka: with acks=0 a record succeeds once sent; its offset is unknown (-1).
            with self._lock:
                for batch in batches:
                    self._accumulator.on_done(batch)
            for batch in batches:
                batch.result.complete(-1, -1, None)

            def sent(response: ProduceResponse | None, error: KraftError | None) -> None:
                with self._lock:
                    self._in_flight.done_untracked(node)
                self._wakeup.set()

            self._network.call_async(address, "Produce", request, ProduceResponse, sent)
            return

        pending = InFlightRequest(
            node=node, address=address, batches=batches, sent_ms=self._clock()
        )

        def on_done(response: ProduceResponse | None, error: KraftError | None) -> None:
            self._handle_produce_response(pending, response, error)

        with self._lock:
            self._in_flight.track(pending)
        call = self._network.call_async(address, "Produce", request, ProduceResponse, on_done)
        with self._lock:
            if not pending.settled:
                pending.call = call

    def _handle_produce_response(
        self,
        request: InFlightRequest,
        response: ProduceResponse | None,
        error: KraftError | None,
    ) -> None:
        batches = request.batches
        now = self._clock()
        results: dict[tuple[str, int], ProducePartitionResponse] = {}
        if response is not None:
            for topic in response.responses:
                for answer in topic.partition_responses:
                    results[(topic.name, answer.index)] = answer
        done: list[tuple[ProducerBatch, int, int, KraftError | None]] = []
        aborted: list[ProducerBatch] = []
        # Kafka: a request that failed in transport (the broker unreachable or silent until
        # request.timeout.ms) disconnects the node and refreshes metadata.
        refresh = error is not None
        state = self._idempotence
        with self._lock:
            if not self._in_flight.settle(request):
                return  # abandoned: its batches were sent elsewhere
            for batch in batches:
                tp = batch.tp
                part = results.get((tp.topic, tp.partition))
                if error is not None:
                    code, message = error.code, error.message
                elif part is None:
                    code, message = ErrorCode.UNKNOWN_SERVER_ERROR, f"no response for {tp}"
                else:
                    code, message = part.error_code, part.error_message
                if part is not None and part.current_leader is not None:  # KIP-951
                    leader = part.current_leader
                    self._metadata.update_leader(tp, leader.leader_id, leader.leader_epoch)
                idempotent = state is not None and batch.producer_id >= 0
                action = decide(
                    code,
                    idempotent=idempotent,
                    has_time_left=self._accumulator.has_time_left(batch, now),
                    is_next_sequence=state is None
                    or state.is_next_sequence(tp, batch.base_sequence),
                )
                if action in (ProduceAction.RETRY, ProduceAction.RETRY_REFRESH_METADATA):
                    self._accumulator.reenqueue(batch, now)
                    refresh |= action is ProduceAction.RETRY_REFRESH_METADATA
                    self._note_retry(tp, code, message, batch.attempts)
                    continue
                self._retry_noted.pop(tp, None)
                self._accumulator.on_done(batch)
                if action is ProduceAction.COMPLETE:
                    if idempotent and state is not None:
                        state.on_batch_acked(tp, batch.last_sequence)
                    base = part.base_offset if part is not None else -1
                    append_time = part.log_append_time_ms if part is not None else -1
                    done.append((batch, base, append_time, None))
                    continue
                failure = error_for(code, message or f"{code.name} producing to {tp}")
                done.append((batch, -1, -1, failure))
                if action is ProduceAction.FAIL_BUMP_EPOCH and state is not None:
                    state.request_epoch_bump()
                elif action is ProduceAction.FATAL:
                    self._fatal = failure
                    aborted = self._accumulator.abort_all()
        if refresh:
            self._metadata.request_update()
        txn = self._transactions
        for batch, base, append_time, outcome in done:
            if outcome is not None and txn is not None:
                txn.on_batch_failed(outcome)
            batch.result.complete(base, append_time, outcome)
        for batch in aborted:
            batch.result.complete(-1, -1, self._fatal)
        self._wakeup.set()

    def _note_retry(self, tp: TopicPartition, code: ErrorCode, message: str, attempt: int) -> None:
        """Say once, at warning, that a partition's batches are being retried and why (as
        Kafka's Sender warns "retrying ... Error: NOT_ENOUGH_REPLICAS"): the wait until
        ``delivery.timeout.ms`` is long and its cause known at once. Again only when the
        error changes; every retry at debug."""
        if self._retry_noted.get(tp) is code:
            log.debug("produce_retried", tp=str(tp), error=code.name, attempt=attempt)
            return
        self._retry_noted[tp] = code
        why = message or code.name
        log.warning(
            "produce_retrying",
            tp=str(tp),
            error=code.name,
            message=f"{tp.topic}-{tp.partition}: {why} ({code.name}); the producer retries "
            f"until delivery.timeout.ms ({self.config.delivery_timeout_ms} ms) runs out",
        )

    def _fail_fatally(self, error: KraftError) -> None:
        with self._lock:
            self._fatal = error
            aborted = self._accumulator.abort_all()
        log.error("producer_failed", error=str(error))
        for batch in aborted:
            batch.result.complete(-1, -1, error)
