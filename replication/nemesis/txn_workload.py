"""The transactional nemesis workload: confluent-kafka (librdkafka) transactional producers and
read_committed / read_uncommitted readers over kraft's Kafka listener, recording into the
run's `History` (operations of `replication.nemesis.txn_history`).

A `TxnProducerWorker` has its own ``transactional.id``. Each transaction writes
`RECORDS_PER_TXN` records to partitions of both topics (value ``"<txn>-<i>"``), waits for
their delivery (so that aborted records are in the log too), then commits or aborts, as a
generator seeded by the run's seed decides (`COMMIT_RATIO`). librdkafka's
error classes decide what follows (as its documentation asks):

- an abortable error (``txn_requires_abort``: a failed send, a fenced epoch on a partition) or
  a failed commit: abort, and go on with the next transaction;
- a retriable error of a commit or an abort: ask again, until `END_TIMEOUT_S`; a commit that
  never got an answer is ``indeterminate``;
- a fatal error (``fatal``: fenced by a newer epoch, an invalid state): a new client and
  ``init_transactions`` (a new epoch, which aborts or completes what the old one left), and go
  on.

A `TxnReaderWorker` assigns itself every partition of both topics from the beginning and
records every record it polls; on an error it starts a new consumer, from the beginning.
`final_txn_reads` waits until no transaction holds a partition's last stable offset below
its high watermark, then reads everything read_committed.
"""

from __future__ import annotations

import functools
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final

import confluent_kafka
import structlog

from replication.nemesis.history import History
from replication.nemesis.txn_history import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Outcome,
    TxnBegin,
    TxnDelivered,
    TxnEnd,
    TxnFinalRead,
    TxnPoll,
    TxnReaderStart,
    TxnRestart,
    TxnSend,
)
from replication.nemesis.workload import ReaderWorker

RECORDS_PER_TXN: Final = (2, 6)
"""The fewest and most records of one transaction."""
COMMIT_RATIO: Final = 0.7
"""The share of transactions a producer asks to commit (the others it aborts)."""
TRANSACTION_TIMEOUT_MS: Final = 10_000
"""``transaction.timeout.ms``: a transaction a dead producer left open is aborted after it."""
END_TIMEOUT_S: Final = 30.0
"""How long a producer asks again for a commit or an abort that gets retriable errors."""

_logger = structlog.get_logger("replication.nemesis.txn_workload")


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error)[:160]}"


def _place(message: Any) -> tuple[str, int, int]:
    """A consumed message's topic, partition and offset (a message, not an error, has all
    three)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None and offset is not None
    return topic, partition, offset


def _kafka_error(error: BaseException) -> Any:
    """The ``KafkaError`` of a ``KafkaException`` (None for other exceptions)."""
    if isinstance(error, confluent_kafka.KafkaException) and error.args:
        return error.args[0]
    return None


class TxnProducerWorker(threading.Thread):
    """One transactional producer (see the module docstring)."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topics: Sequence[str],
        partitions: int,
        history: History,
        clock_ms: Callable[[], int],
        *,
        seed: int,
        rate_per_s: float,
    ) -> None:
        super().__init__(name=f"nemesis-{name}", daemon=True)
        self.process = name
        self._bootstrap_servers = bootstrap
        self._topics = tuple(topics)
        self._partitions = partitions
        self._history = history
        self._clock_ms = clock_ms
        self._rng = random.Random(seed)
        self._interval_s = 1.0 / rate_per_s
        self._stopping = threading.Event()
        self.transactional_id = f"nemesis-{name}-{uuid.uuid4().hex[:6]}"
        self.transactions = 0
        self.producer: confluent_kafka.Producer | None = None

    def _new_producer(self) -> confluent_kafka.Producer:
        """A client with this worker's transactional id, initialized (retried until it is, or
        the worker stops)."""
        while True:
            producer = confluent_kafka.Producer(
                {
                    "bootstrap.servers": self._bootstrap_servers,
                    "transactional.id": self.transactional_id,
                    "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                    "socket.timeout.ms": 5_000,
                    "log_level": 0,
                }
            )
            try:
                producer.init_transactions(30)
                return producer
            except confluent_kafka.KafkaException as e:
                _logger.info("nemesis_txn_init_failed", producer=self.process, error=str(e))
                if self._stopping.wait(0.5):
                    raise

    def run(self) -> None:
        n = 0
        try:
            self.producer = self._new_producer()
        except confluent_kafka.KafkaException:
            return
        next_at = time.monotonic()
        while not self._stopping.is_set():
            delay = next_at - time.monotonic()
            if delay > 0 and self._stopping.wait(delay):
                break
            next_at = max(next_at + self._interval_s, time.monotonic() - 1.0)
            txn = f"{self.process}-{n}"
            n += 1
            self.transactions += 1
            try:
                self._transaction(txn)
            except confluent_kafka.KafkaException as e:
                self._restart(e)
            except Exception as e:  # never let the worker die silently
                _logger.warning("nemesis_txn_unexpected", producer=self.process, error=str(e))
                self._restart(e)

    def _restart(self, error: BaseException) -> None:
        """A fatal error: start over with a new client and a new epoch."""
        self._history.record(
            TxnRestart(time_ms=self._clock_ms(), process=self.process, error=_error_text(error))
        )
        self.producer = None
        try:
            self.producer = self._new_producer()
        except confluent_kafka.KafkaException:
            return  # stopping

    def _transaction(self, txn: str) -> None:
        """One transaction, ended; raises `confluent_kafka.KafkaException` on a fatal error."""
        producer = self.producer
        assert producer is not None
        self._history.record(TxnBegin(time_ms=self._clock_ms(), process=self.process, txn=txn))
        commit = self._rng.random() < COMMIT_RATIO
        count = self._rng.randint(*RECORDS_PER_TXN)
        places = [
            (self._rng.choice(self._topics), self._rng.randrange(self._partitions))
            for _ in range(count)
        ]
        try:
            producer.begin_transaction()
            for i, (topic, partition) in enumerate(places):
                value = f"{txn}-{i}"
                self._history.record(
                    TxnSend(
                        time_ms=self._clock_ms(),
                        process=self.process,
                        txn=txn,
                        topic=topic,
                        partition=partition,
                        value=value,
                    )
                )
                producer.produce(
                    topic,
                    value=value.encode(),
                    partition=partition,
                    on_delivery=functools.partial(self._delivered, txn),
                )
                producer.poll(0)
        except confluent_kafka.KafkaException as e:
            if _kafka_error(e) is not None and _kafka_error(e).fatal():
                raise
            self._end(txn, "abort")  # abortable (or the transaction cannot go on)
            return
        except BufferError:
            producer.poll(0.5)
            self._end(txn, "abort")
            return
        # NB: the records go out before the end: abort_transaction purges what librdkafka
        # still queues, so without this most aborted records would never reach the log, and
        # the readers would have nothing to be tested against.
        producer.flush(END_TIMEOUT_S)
        if not commit or self._end(txn, "commit") == "failed":
            self._end(txn, "abort")

    def _end(self, txn: str, action: str) -> Outcome:
        producer = self.producer
        assert producer is not None
        return end_transaction(
            producer, self._history, self._clock_ms, process=self.process, txn=txn, action=action
        )

    def _delivered(self, txn: str, error: Any, message: Any) -> None:
        self._history.record(
            TxnDelivered(
                time_ms=self._clock_ms(),
                process=self.process,
                txn=txn,
                topic=message.topic(),
                partition=message.partition(),
                value=(message.value() or b"").decode(errors="replace"),
                offset=message.offset() if error is None else -1,
                error=str(error) if error is not None else "",
            )
        )

    def stop(self, flush_timeout_s: float) -> None:
        """Finish the transaction under way (its outcome recorded; waiting up to
        ``flush_timeout_s`` for it) and stop."""
        self._stopping.set()
        self.join(timeout=flush_timeout_s)
        if self.is_alive():
            _logger.warning("nemesis_txn_producer_hung", producer=self.process)
        self.producer = None


class TxnReaderWorker(ReaderWorker):
    """A consumer at ``isolation`` assigned every partition of ``topics``, polling all the
    time, started afresh from the beginning after an error (`ReaderWorker`'s loop; see the
    module docstring)."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topics: Sequence[str],
        partitions: int,
        history: History,
        clock_ms: Callable[[], int],
        *,
        isolation: str,
    ) -> None:
        super().__init__(name, bootstrap, topics[0], partitions, history, clock_ms)
        self.isolation = isolation
        self._topics = tuple(topics)
        self._partitions = partitions

    def _read(self) -> None:
        consumer = _consumer(self._bootstrap_servers, self.isolation)
        try:
            consumer.assign(
                [
                    confluent_kafka.TopicPartition(t, p, confluent_kafka.OFFSET_BEGINNING)
                    for t in self._topics
                    for p in range(self._partitions)
                ]
            )
            self._history.record(
                TxnReaderStart(
                    time_ms=self._clock_ms(), process=self.process, isolation=self.isolation
                )
            )
            while not self._stopping.is_set():
                for m in consumer.consume(500, 0.5):
                    error = m.error()
                    if error is not None:
                        if error.fatal():
                            raise confluent_kafka.KafkaException(error)
                        continue
                    self.polled += 1
                    topic, partition, offset = _place(m)
                    self._history.record(
                        TxnPoll(
                            time_ms=self._clock_ms(),
                            process=self.process,
                            isolation=self.isolation,
                            topic=topic,
                            partition=partition,
                            offset=offset,
                            value=(m.value() or b"").decode(errors="replace"),
                        )
                    )
        finally:
            consumer.close()


def end_transaction(
    producer: confluent_kafka.Producer,
    history: History,
    clock_ms: Callable[[], int],
    *,
    process: str,
    txn: str,
    action: str,
) -> Outcome:
    """Commit or abort ``txn``, asking again on retriable errors until `END_TIMEOUT_S`;
    record the outcome (`TxnEnd`). Raises `confluent_kafka.KafkaException`, after recording,
    on a fatal error, on an end never answered, and on an abort that failed abortably (the
    caller starts over)."""
    start_ms = clock_ms()
    deadline = time.monotonic() + END_TIMEOUT_S
    end = producer.commit_transaction if action == "commit" else producer.abort_transaction

    def record(outcome: Outcome, error: BaseException | None = None) -> None:
        history.record(
            TxnEnd(
                time_ms=clock_ms(),
                start_ms=start_ms,
                process=process,
                txn=txn,
                action="commit" if action == "commit" else "abort",
                outcome=outcome,
                error=_error_text(error) if error is not None else "",
            )
        )

    while True:
        try:
            end(10)
            record("ok")
            return "ok"
        except confluent_kafka.KafkaException as e:
            error = _kafka_error(e)
            if error.retriable() and time.monotonic() < deadline:
                continue
            if error.txn_requires_abort() and not error.fatal():
                record("failed", e)
                if action == "abort":
                    raise  # abort_transaction itself failed abortably: start over
                return "failed"
            # Fatal, or retriable until the deadline: did the commit happen? Unknown.
            record("indeterminate", e)
            raise


def _consumer(bootstrap: str, isolation: str) -> confluent_kafka.Consumer:
    return confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"nemesis-{uuid.uuid4().hex[:8]}",  # never joined: assign() only
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "socket.timeout.ms": 5_000,
            "log_level": 0,
        }
    )


def final_txn_reads(
    bootstrap: str,
    topics: Sequence[str],
    partitions: int,
    clock_ms: Callable[[], int],
    timeout_s: float = 120.0,
) -> list[TxnFinalRead]:
    """Every partition read_committed from its beginning, once its last stable offset has
    reached its high watermark (no transaction open: `TRANSACTION_TIMEOUT_MS` bounds the wait
    for one a dead producer left).

    Raises:
        TimeoutError: a partition's last stable offset stayed below its high watermark, or the
            read did not reach it, within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    tps = [confluent_kafka.TopicPartition(t, p) for t in topics for p in range(partitions)]
    committed, uncommitted = (
        _consumer(bootstrap, READ_COMMITTED),
        _consumer(bootstrap, READ_UNCOMMITTED),
    )
    try:
        ends: dict[tuple[str, int], int] = {}
        for tp in tps:
            while True:
                _, stable = committed.get_watermark_offsets(tp, timeout=10, cached=False)
                _, high = uncommitted.get_watermark_offsets(tp, timeout=10, cached=False)
                if stable == high:
                    ends[(tp.topic, tp.partition)] = high
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{tp.topic}-{tp.partition}: LSO {stable} < HW {high}")
                time.sleep(0.5)
        committed.assign(
            [
                confluent_kafka.TopicPartition(t, p, confluent_kafka.OFFSET_BEGINNING)
                for t, p in ends
            ]
        )
        records: dict[tuple[str, int], list[tuple[int, str]]] = {k: [] for k in ends}
        remaining = {k for k, end in ends.items() if end > 0}
        while remaining:
            if time.monotonic() > deadline:
                raise TimeoutError(f"final read incomplete: {sorted(remaining)}")
            for m in committed.consume(1000, 0.5):
                error = m.error()
                if error is not None and error.code() != confluent_kafka.KafkaError._PARTITION_EOF:
                    continue
                topic, partition, offset = _place(m)
                key = (topic, partition)
                if error is not None:  # the end of what is stable: the whole partition
                    if offset >= ends[key]:
                        remaining.discard(key)
                elif offset < ends[key]:
                    records[key].append((offset, (m.value() or b"").decode(errors="replace")))
        now = clock_ms()
        return [
            TxnFinalRead(
                time_ms=now,
                topic=topic,
                partition=partition,
                isolation=READ_COMMITTED,
                end_offset=ends[(topic, partition)],
                records=tuple(records[(topic, partition)]),
            )
            for topic, partition in ends
        ]
    finally:
        committed.close()
        uncommitted.close()


__all__ = [
    "COMMIT_RATIO",
    "RECORDS_PER_TXN",
    "TRANSACTION_TIMEOUT_MS",
    "TxnProducerWorker",
    "TxnReaderWorker",
    "end_transaction",
    "final_txn_reads",
]
