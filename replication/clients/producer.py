"""`Producer`: batching, idempotent, thread-safe; Kafka's ``KafkaProducer`` over gRPC.

Theory of operation
-------------------
``send`` picks a partition (the one given; murmur2 of the key; else the KIP-480 sticky
partition), appends the record to the `RecordAccumulator` under the producer's lock and returns
a `RecordFuture` at once. It is the per-record hot path (under 1 µs): one lock acquisition, the
partition's queue found by index (`RecordAccumulator.topic_queues`, cached per topic and
metadata snapshot), the record encoded inline into the open batch by ``try_append`` (the
accumulator is called only when a batch fills up or none is open); callbacks are queued
per batch without a lock (`ProduceResult`), a ``send(..., callback=)`` one inside its record's
future, with no object of its own. Only a topic the producer has never seen blocks
it, for up to ``max.block.ms``, until the sender thread has fetched that topic's metadata.

One sender thread (Kafka's ``Sender``) loops:

1. refresh metadata when it is stale or a response said so (`MetadataCache.needs_update`);
2. with idempotence, get a producer id (InitProducerId) once, and a new one when a failed
   batch left a sequence gap (the broker answers a fresh id to a producer without a
   transactional id, as Kafka's does), waiting first for nothing to be in flight;
3. expire queued batches past ``delivery.timeout.ms``;
4. drain and send ONE Produce per broker that leads a ready partition, carrying the first
   batch of every partition it leads (Kafka's ``RecordAccumulator.drain``: lingering ones
   ride along, none in retry backoff; up to ``max.request.size``), keeping at most
   ``max.in.flight.requests.per.connection`` requests outstanding per broker, on one
   ``ProduceStream`` call per broker that answers them in the order sent, as a Kafka broker
   answers a connection's requests (`replication.clients.produce_stream`);
5. sleep until the next batch may be ready (``linger.ms``, a retry backoff) or a wake-up
   (a full batch, a response, flush, close).

A Produce request that has waited ``retry.backoff.max.ms`` without an answer is *stalled*: the
producer marks its broker suspect and refreshes metadata (once per ``retry.backoff.max.ms``
while the stall lasts, asking other brokers first). When the metadata names another leader for
a partition that a stalled request carries, every request to that broker carrying a moved
partition is *abandoned*: cancelled, its batches put back in order with their sequences and
sent to the new leader at once (KIP-951: no backoff after a leader change). A paused or
partitioned leader thus costs about the cluster's failover time plus ``retry.backoff.max.ms``,
not ``request.timeout.ms`` (Kafka waits for ``request.timeout.ms``, then disconnects and
retries; the same re-send, earlier). With idempotence this is safe: a batch keeps its sequence,
the new leader drops it as a duplicate if the old one had replicated it, and the old leader,
fenced by the new leader epoch, truncates what only it had appended (KIP-101). Without
idempotence the re-send may duplicate records, as a Kafka retry after a timeout may.

Responses arrive on gRPC threads: per batch, `replication.clients.sequencing.decide` says
complete, retry (re-enqueue with backoff, refreshing metadata first on a stale-leader error),
fail with the typed exception of the error code, or fail and reset the producer id. Futures complete
outside the lock, as their callbacks are user code.

With ``transactional.id`` the producer is transactional (KIP-98, KIP-447):
``init_transactions``, ``begin_transaction``, ``send_offsets_to_transaction``,
``commit_transaction`` and ``abort_transaction`` drive its `TransactionManager`
(`replication.clients.transactions`: states, partitions added before their first batch, and
errors), and its batches carry the transactional bit.

Guarantees (as Kafka's, with ``enable.idempotence=true``, the default): no duplicates from
retries and per-partition order, for batches acknowledged under one producer id and epoch.
After a reset, a batch whose first attempt was written but whose response was lost may be written
again (Kafka has the same window).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from kraft.logs import ensure_configured
from kraft.types import TopicPartition
from replication.clients.accumulator import RecordAccumulator
from replication.clients.batch import ProduceResult, RecordFuture
from replication.clients.bulk import (
    BatchFuture,
    Values,
    as_value_list,
    failed_batch_future,
    fill_routed,
    first_oversized,
)
from replication.clients.config import ProducerConfig
from replication.clients.group_membership import ConsumerGroupMetadata
from replication.clients.in_flight import InFlightRequests
from replication.clients.metadata import MetadataCache
from replication.clients.network import BrokerNetwork
from replication.clients.partitioner import StickyPartitioner
from replication.clients.routing import KeyPartitions, TopicState
from replication.clients.sender import ProducerSender
from replication.clients.sequencing import IdempotenceState
from replication.clients.transactions import TransactionManager
from storage.errors import (
    InvalidTxnStateError,
    KraftError,
    NetworkError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
    error_for,
)
from storage.records import Header

Headers = Sequence[Header] | None


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Producer(ProducerSender):
    """A thread-safe producer. Options are Kafka's producer configs (see `ProducerConfig`),
    given by snake_case name or Kafka key.

    Args:
        bootstrap: ``"host:port,host:port"`` of (some of) the brokers.
        clock_ms: wall-clock milliseconds (record timestamps, linger, timeouts); tests inject.
        rng: the sticky partitioner's random generator.
        network: a `BrokerNetwork` to use instead of one built from ``bootstrap`` (tests).

    Raises:
        ValueError: an unknown option or an invalid combination.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        rng: random.Random | None = None,
        network: BrokerNetwork | None = None,
        **options: Any,
    ) -> None:
        ensure_configured()  # no output unless the application configures logging
        self.config = config = ProducerConfig.create(options)
        self._clock = clock_ms
        self._time_ns = time.time_ns if clock_ms is wall_clock_ms else None  # send(): no call
        self._network = network or BrokerNetwork(
            bootstrap,
            request_timeout_s=config.request_timeout_ms / 1000,
            tls=config.tls(),
            client_id=config.client_id,
        )
        self._metadata = MetadataCache(
            refresh_backoff_ms=config.retry_backoff_ms, max_age_ms=config.metadata_max_age_ms
        )
        self._idempotence = IdempotenceState() if config.enable_idempotence else None
        self._accumulator = RecordAccumulator(
            batch_size=config.batch_size,
            linger_ms=config.linger_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            delivery_timeout_ms=config.delivery_timeout_ms,
            max_in_flight_per_partition=config.max_in_flight_requests_per_connection,
            idempotence=self._idempotence,
        )
        self._partitioner = StickyPartitioner(rng)
        self._compression = config.compression
        self._lock = threading.Lock()
        self._metadata_changed = threading.Condition()
        self._wakeup = threading.Event()
        self._in_flight = InFlightRequests()  # under the lock
        self._last_stall_refresh_ms = 0
        self._retry_noted = {}
        self._topics: dict[str, TopicState] = {}
        self._max_record_size = config.max_request_size
        self.produce_requests_sent = 0
        """Produce requests sent (with `produce_batches_sent`: batches per request)."""
        self.produce_batches_sent = 0
        self._key_partitions = KeyPartitions()
        self._fatal: KraftError | None = None
        self._transactions = (
            TransactionManager(self._network, config, self._fail_fatally)
            if config.transactional_id
            else None
        )
        self._closing = False
        self._stopped = False
        self._sender = threading.Thread(target=self._run, name="kraft-producer-sender", daemon=True)
        self._sender.start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the public surface --------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers = None,
        timestamp_ms: int | None = None,
        callback: Callable[[RecordFuture], object] | None = None,
    ) -> RecordFuture:
        """Queue one record; the future gives its `RecordMetadata` once acknowledged.

        Blocks only to learn the metadata of a topic not seen before (``max.block.ms``).
        A failure to learn it, and every delivery failure, is raised by the future's
        ``result()`` as the typed exception of its error code.

        ``callback`` (Kafka's ``send(record, callback)``) runs with the record's future once it
        completes, as ``send(...).add_done_callback(callback)`` would, for less: on the
        producer's I/O thread (it must not block), and in send order among the callbacks of
        one partition.

        Raises:
            RuntimeError: the producer is closed.
            ValueError: ``partition`` is not a partition of the topic.
            KraftError: the producer hit a fatal error earlier (e.g. `ProducerFencedError`).
        """
        if self._closing:
            raise RuntimeError("cannot send after the producer is closed")
        if self._fatal is not None:
            raise self._fatal
        if self._transactions is not None:
            self._transactions.check_send()
        size = (len(value) if value else 0) + (len(key) if key else 0)
        if size > self._max_record_size:
            return _failed_future(
                TopicPartition(topic, partition or 0),
                RecordTooLargeError(
                    f"the record is {size} bytes, more than max.request.size "
                    f"({self.config.max_request_size})"
                ),
                callback,
            )
        state = self._topics.get(topic)
        if state is None or state.snapshot is not self._metadata.snapshot:
            found = self._topic_state(topic)
            if isinstance(found, KraftError):
                return _failed_future(TopicPartition(topic, partition or 0), found, callback)
            state = found
        now = self._clock() if self._time_ns is None else self._time_ns() // 1_000_000
        ts = now if timestamp_ms is None else timestamp_ms
        hdrs = tuple(headers) if headers else None
        accumulator = self._accumulator
        # NB: one lock acquisition per send (acquire/release: a ``with`` costs twice as much);
        # under it, the common case is one try_append on the open batch of the partition's
        # queue (`RecordAccumulator.append_to`'s first step, inlined: no lookups by
        # TopicPartition, no call). Only a new or sealed batch sets `wakeup_needed`, so only
        # `append_to` is followed by reading it.
        lock = self._lock
        lock.acquire()
        try:
            sticky = partition is None and key is None
            if sticky:
                index = state.sticky  # the partitioner's choice, cached: it changes only here
                if index < 0:
                    index = state.sticky = self._partitioner.partition(
                        topic, state.count, state.snapshot.available_partitions(topic)
                    )
            elif partition is None:
                index = self._key_partitions.partition(topic, key, state.count)  # type: ignore[arg-type]
            elif 0 <= partition < state.count:
                index = partition
            else:
                raise ValueError(f"{topic} has partitions 0..{state.count - 1}, not {partition}")
            queue = state.queues[index]
            if queue and not (last := queue[-1]).sealed:
                future = last.try_append(ts, key, value, hdrs, callback)
                if future is not None:
                    return future
            future = accumulator.append_to(
                queue, state.tps[index], ts, key, value, hdrs, now, sticky, callback
            )
            if future is None:  # KIP-480: a new batch is due, so switch partitions
                index = state.sticky = self._partitioner.on_new_batch(
                    topic, state.count, state.snapshot.available_partitions(topic), index
                )
                future = accumulator.append_to(
                    state.queues[index],
                    state.tps[index],
                    ts,
                    key,
                    value,
                    hdrs,
                    now,
                    False,
                    callback,
                )
            wake = accumulator.wakeup_needed
            accumulator.wakeup_needed = False
        finally:
            lock.release()
        assert future is not None
        if wake:
            self._wakeup.set()
        return future

    def send_batch(
        self, topic: str, values: Values, keys: Values | None = None, partition: int | None = None
    ) -> BatchFuture:
        """Queue many records (``bytes`` or None, or a pyarrow binary/string array) with one
        future for all: `replication.clients.bulk` (guarantees as ``send``'s, per record).

        Raises:
            RuntimeError, KraftError: as ``send``.
            ValueError: ``partition`` is not the topic's, or ``keys`` and ``values`` differ
                in length.
            TypeError: an element is neither ``bytes`` nor None.
        """
        if self._closing:
            raise RuntimeError("cannot send after the producer is closed")
        if self._fatal is not None:
            raise self._fatal
        if self._transactions is not None:
            self._transactions.check_send()
        vals = as_value_list(values, "values")
        ks = None if keys is None else as_value_list(keys, "keys")
        if ks is not None and len(ks) != len(vals):
            raise ValueError(f"send_batch: {len(ks)} keys for {len(vals)} values")
        state = self._topics.get(topic)
        if state is None or state.snapshot is not self._metadata.snapshot:
            found = self._topic_state(topic)
            if isinstance(found, KraftError):
                return failed_batch_future(topic, partition or 0, found)
            state = found
        if partition is not None and not 0 <= partition < state.count:
            raise ValueError(f"{topic} has partitions 0..{state.count - 1}, not {partition}")
        too_large = first_oversized(vals, ks, self._max_record_size)
        if too_large is not None:
            return failed_batch_future(topic, partition or 0, too_large)
        future = fill_routed(
            self._lock,
            self._accumulator,
            self._partitioner,
            self._key_partitions,
            state,
            topic,
            self._clock(),
            ks,
            vals,
            partition,
        )
        with self._lock:
            wake = self._accumulator.wakeup_needed
            self._accumulator.wakeup_needed = False
        if wake:
            self._wakeup.set()
        return future

    def _topic_state(self, topic: str) -> TopicState | KraftError:
        """What `send` needs of ``topic`` under the current metadata snapshot (waiting for
        the topic's metadata the first time), or the error that prevented learning it."""
        count = self._metadata.snapshot.partition_count(topic)
        if count is None:
            count, error = self._wait_for_topic(topic)
            if error is not None:
                return error
        snapshot = self._metadata.snapshot
        old = self._topics.get(topic)
        if old is not None and old.count == count:
            tps, queues = old.tps, old.queues
        else:
            tps = [TopicPartition(topic, p) for p in range(count)]
            with self._lock:
                queues = self._accumulator.topic_queues(tps)
        state = self._topics[topic] = TopicState(
            snapshot=snapshot, count=count, tps=tps, queues=queues
        )
        return state

    def flush(self, timeout: float | None = None) -> None:
        """Send every queued record now and wait until each has succeeded or failed.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """
        with self._lock:
            waiting = self._accumulator.begin_flush()
        self._wakeup.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            for batch in waiting:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not batch.result.wait(left):
                    raise TimeoutError(f"flush: {batch.tp} still pending after {timeout}s")
        finally:
            with self._lock:
                self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued (waiting up to ``timeout`` seconds, forever if None), then
        stop. Records still pending after the timeout fail with `NetworkError`."""
        if self._stopped:
            return
        with self._lock:
            self._closing = True
            self._accumulator.closing = True
        with contextlib.suppress(TimeoutError):
            self.flush(timeout)
        self._stopped = True
        self._wakeup.set()
        self._sender.join(timeout=5)
        with self._lock:
            aborted = self._accumulator.abort_all()
        for batch in aborted:
            batch.result.complete(-1, -1, NetworkError("the producer was closed"))
        self._network.close()

    # -- transactions (KIP-98, KIP-447: `replication.clients.transactions`) ---------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register ``transactional.id`` with its coordinator: a producer id and a new epoch,
        fencing every older producer of the id and aborting its open transaction. Call once,
        before the first ``begin_transaction``.

        Raises:
            InvalidTxnStateError: not a transactional producer, or called twice.
            KraftError: e.g. `InvalidTransactionTimeoutError`, or a retriable error once
                ``timeout`` (default ``max.block.ms``) ran out.
        """
        txn = self._transactional("init_transactions")
        producer_id, epoch = txn.init(self._block_s(timeout), -1, -1)
        self._adopt(producer_id, epoch)

    def begin_transaction(self) -> None:
        """Start a transaction: every ``send`` until the commit or abort belongs to it.

        Raises:
            InvalidTxnStateError: before ``init_transactions`` or inside a transaction.
        """
        self._transactional("begin_transaction").begin()

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_metadata: ConsumerGroupMetadata | str,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer's ``offsets`` (each the next offset to read) with the transaction
        (consume-transform-produce). ``group_metadata`` is the consumer's
        ``Consumer.group_metadata()`` (KIP-447: a zombie member's offsets are refused), or a
        bare group id (no member check).

        Raises:
            InvalidTxnStateError: no transaction is open.
            KraftError: the coordinator's error; the transaction must then be aborted
                (`ProducerFencedError`: the producer must be closed).
        """
        txn = self._transactional("send_offsets_to_transaction")
        group = (
            ConsumerGroupMetadata(group_metadata)
            if isinstance(group_metadata, str)
            else group_metadata
        )
        pid, epoch = self._producer_id_and_epoch()
        txn.send_offsets(offsets, group, self._block_s(timeout), pid, epoch)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush every record of the transaction, then commit it: its records and offsets
        become visible to ``read_committed`` consumers together.

        Raises:
            KraftError: a record or the commit failed: call ``abort_transaction``;
                `ProducerFencedError` (a newer producer took the transactional id) and other
                fatal errors: close the producer.
            TimeoutError: the flush did not finish within ``timeout`` (abort, or retry).
        """
        txn = self._transactional("commit_transaction")
        txn.begin_commit()
        self.flush(self._block_s(timeout))
        if self._fatal is not None:
            raise self._fatal
        if txn.error is not None:
            raise txn.error
        pid, epoch = self._producer_id_and_epoch()
        after = txn.end(
            commit=True, timeout_s=self._block_s(timeout), producer_id=pid, producer_epoch=epoch
        )
        if after != (pid, epoch):  # KIP-890 part 2: the epoch bumped at the end
            self._adopt(*after)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records still queued after an error are dropped, those sent
        are hidden from ``read_committed`` consumers by the abort markers.

        Raises:
            KraftError: a fatal error (`ProducerFencedError`: close the producer).
        """
        txn = self._transactional("abort_transaction")
        if txn.begin_abort():
            with self._lock:
                dropped = self._accumulator.abort_all()
            error = txn.error or InvalidTxnStateError("the transaction was aborted")
            for batch in dropped:
                batch.result.complete(-1, -1, error)
        self.flush(self._block_s(timeout))
        pid, epoch = self._producer_id_and_epoch()
        after = txn.end(
            commit=False, timeout_s=self._block_s(timeout), producer_id=pid, producer_epoch=epoch
        )
        state = self._idempotence
        if after != (pid, epoch):  # KIP-890 part 2: the epoch bumped at the end
            self._adopt(*after)  # NB: which also forgets a lost sequence
        elif state is not None and state.epoch_bump_requested:  # KIP-360: a sequence was lost
            self._adopt(*txn.init(self._block_s(timeout), pid, epoch))

    def _transactional(self, call: str) -> TransactionManager:
        if self._transactions is None:
            raise InvalidTxnStateError(f"{call} needs transactional.id")
        if self._fatal is not None:
            raise self._fatal
        return self._transactions

    def _block_s(self, timeout: float | None) -> float:
        return self.config.max_block_ms / 1000 if timeout is None else timeout

    def _producer_id_and_epoch(self) -> tuple[int, int]:
        state = self._idempotence
        assert state is not None, "a transactional producer is idempotent"
        with self._lock:
            return state.producer_id, state.producer_epoch

    def _adopt(self, producer_id: int, producer_epoch: int) -> None:
        state = self._idempotence
        assert state is not None, "a transactional producer is idempotent"
        with self._lock:
            state.set_producer_id_and_epoch(producer_id, producer_epoch)
            self._accumulator.resequence()
        self._wakeup.set()

    def partitions_for(self, topic: str) -> list[int]:
        """The partitions of ``topic`` (fetching its metadata if needed)."""
        count = self._metadata.snapshot.partition_count(topic)
        if count is None:
            count, error = self._wait_for_topic(topic)
            if error is not None:
                raise error
        return list(range(count))

    # -- metadata ------------------------------------------------------------------------------

    def _wait_for_topic(self, topic: str) -> tuple[int, KraftError | None]:
        """Block until ``topic``'s partition count is known (Kafka's ``waitOnMetadata``)."""
        self._metadata.add_topics([topic])
        self._metadata.request_update()
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        with self._metadata_changed:
            while True:
                snapshot = self._metadata.snapshot
                count = snapshot.partition_count(topic)
                if count is not None:
                    return count, None
                code = snapshot.topic_errors.get(topic)
                if code is not None and not error_for(code).retriable:
                    return 0, error_for(code, f"topic {topic}: {code.name}")
                unreachable = self._network.unreachable()
                if unreachable is not None:
                    return 0, unreachable
                left = deadline - time.monotonic()
                if left <= 0 and not self._network.ever_answered:
                    return 0, NetworkError(
                        f"no broker answered at {', '.join(self._network.bootstrap)} within "
                        f"max.block.ms ({self.config.max_block_ms} ms); check "
                        "bootstrap.servers and that the cluster runs"
                    )
                if left <= 0:
                    return 0, UnknownTopicOrPartitionError(
                        f"topic {topic} not present in metadata after {self.config.max_block_ms} ms"
                    )
                self._wakeup.set()
                self._metadata_changed.wait(min(left, 0.1))


def _failed_future(
    tp: TopicPartition, error: KraftError, callback: Callable[[RecordFuture], object] | None
) -> RecordFuture:
    result = ProduceResult(tp)
    result.complete(-1, -1, error)
    future = RecordFuture(result, 0, -1)
    if callback is not None:
        future.add_done_callback(callback)  # runs it now
    return future


__all__ = ["Producer", "wall_clock_ms"]
