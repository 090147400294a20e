"""The transactional nemesis workload's copier: consume-transform-produce (KIP-98, KIP-447),
as an exactly-once pipeline (Kafka Streams' ``exactly_once_v2``) runs it, with confluent-kafka
over kraft's Kafka listener.

A `TxnCopierWorker` is a consumer in group `COPIER_GROUP` (``isolation.level``
read_committed, no auto-commit) subscribed to one topic, and a transactional producer. For
each batch it polls it begins a transaction, writes a copy of every record to the output
topic (same partition), adds the consumer's positions to the transaction
(``send_offsets_to_transaction`` with the group's metadata, so a zombie of an older
generation is fenced) and commits. Every copy is recorded as a transactional send
(`TxnSend`, value ``"<txn>-<i>"``) with a `TxnCopied` naming its source record, and the
commit or abort as a `TxnEnd`, so `check_txn_history` judges the copies like any
transaction's records, and exactly once through the pipeline besides.

On an abortable error (or a failed commit) it aborts and rewinds: a new consumer resumes from
the group's committed offsets, which the aborted transaction did not move. On a fatal error
(fenced) it starts over with a new producer (``init_transactions``: a new epoch) and a new
consumer. `read_group_offsets` reads the group's committed offsets after the run.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any, Final

import confluent_kafka
import structlog

from replication.nemesis.history import History
from replication.nemesis.txn_history import (
    READ_COMMITTED,
    Outcome,
    TxnBegin,
    TxnCopied,
    TxnGroupOffsets,
    TxnRestart,
    TxnSend,
)
from replication.nemesis.txn_workload import TRANSACTION_TIMEOUT_MS, end_transaction

COPIER_GROUP: Final = "nemesis-copier"
BATCH_RECORDS: Final = 50
"""The most records one transaction copies."""

_logger = structlog.get_logger("replication.nemesis.txn_copier")


class _Abort(Exception):
    """The transaction must be aborted (librdkafka said so, or its commit failed)."""


def _kafka_error(error: confluent_kafka.KafkaException) -> Any:
    return error.args[0] if error.args else None


def _fatal(error: confluent_kafka.KafkaException) -> bool:
    kafka_error = _kafka_error(error)
    return kafka_error is None or bool(kafka_error.fatal())


class TxnCopierWorker(threading.Thread):
    """One consume-transform-produce loop (see the module docstring)."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        source: str,
        output: str,
        history: History,
        clock_ms: Callable[[], int],
    ) -> None:
        super().__init__(name=f"nemesis-{name}", daemon=True)
        self.process = name
        self._bootstrap_servers = bootstrap
        self._source = source
        self._output = output
        self._history = history
        self._clock_ms = clock_ms
        self._stopping = threading.Event()
        self.transactional_id = f"nemesis-{name}-{uuid.uuid4().hex[:6]}"
        self.transactions = 0
        self._n = 0

    def run(self) -> None:
        producer: confluent_kafka.Producer | None = None
        while not self._stopping.is_set():
            consumer = None
            try:
                if producer is None:
                    producer = self._producer()
                consumer = self._consumer()
                self._copy(producer, consumer)
            except confluent_kafka.KafkaException as e:  # fatal: a new epoch, a new member
                producer = None
                self._history.record(
                    TxnRestart(time_ms=self._clock_ms(), process=self.process, error=str(e)[:160])
                )
                self._stopping.wait(0.5)
            except Exception as e:  # never let the worker die silently
                producer = None
                _logger.warning("nemesis_copier_unexpected", copier=self.process, error=str(e))
                self._stopping.wait(0.5)
            finally:
                if consumer is not None:
                    consumer.close()

    def _producer(self) -> confluent_kafka.Producer:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": self._bootstrap_servers,
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                "socket.timeout.ms": 5_000,
                # NB: librdkafka 2.16's re-bootstrap (the default once every connection drops,
                # as the nemesis's heal resets them) left a broker handle in TRY_CONNECT for
                # 70 s, and send_offsets_to_transaction waited on it past its own timeout.
                "metadata.recovery.strategy": "none",
                "log_level": 0,
            }
        )
        producer.init_transactions(30)
        return producer

    def _consumer(self) -> confluent_kafka.Consumer:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self._bootstrap_servers,
                "group.id": COPIER_GROUP,
                "isolation.level": READ_COMMITTED,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "socket.timeout.ms": 5_000,
                "metadata.recovery.strategy": "none",  # as the producer's
                "log_level": 0,
            }
        )
        consumer.subscribe([self._source])
        return consumer

    def _copy(self, producer: confluent_kafka.Producer, consumer: confluent_kafka.Consumer) -> None:
        """Copy batch after batch until stopped; returns to rewind after an abort (the caller
        starts a new consumer); raises `confluent_kafka.KafkaException` on a fatal error."""
        while not self._stopping.is_set():
            batch = [m for m in consumer.consume(BATCH_RECORDS, 0.5) if m.error() is None]
            if not batch:
                continue
            txn = f"{self.process}-{self._n}"
            self._n += 1
            self.transactions += 1
            try:
                self._transaction(producer, consumer, txn, batch)
            except _Abort:
                self._end(producer, txn, "abort")
                return  # rewind: the group's offsets did not move

    def _transaction(
        self,
        producer: confluent_kafka.Producer,
        consumer: confluent_kafka.Consumer,
        txn: str,
        batch: list[Any],
    ) -> None:
        self._history.record(TxnBegin(time_ms=self._clock_ms(), process=self.process, txn=txn))
        try:
            producer.begin_transaction()
            for i, message in enumerate(batch):
                value = f"{txn}-{i}"
                now = self._clock_ms()
                partition = message.partition()
                self._history.record(
                    TxnSend(
                        time_ms=now,
                        process=self.process,
                        txn=txn,
                        topic=self._output,
                        partition=partition,
                        value=value,
                    )
                )
                self._history.record(
                    TxnCopied(
                        time_ms=now,
                        process=self.process,
                        txn=txn,
                        value=value,
                        source_topic=message.topic(),
                        source_partition=partition,
                        source_offset=message.offset(),
                        source_value=(message.value() or b"").decode(errors="replace"),
                    )
                )
                producer.produce(self._output, value=value.encode(), partition=partition)
            positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        except confluent_kafka.KafkaException as e:
            if _fatal(e):
                raise
            raise _Abort from e
        except BufferError as e:
            raise _Abort from e
        if self._end(producer, txn, "commit") == "failed":
            raise _Abort

    def _end(self, producer: confluent_kafka.Producer, txn: str, action: str) -> Outcome:
        return end_transaction(
            producer, self._history, self._clock_ms, process=self.process, txn=txn, action=action
        )

    def stop(self, flush_timeout_s: float) -> None:
        """Finish the transaction under way (up to ``flush_timeout_s``) and stop."""
        self._stopping.set()
        self.join(timeout=flush_timeout_s)
        if self.is_alive():
            _logger.warning("nemesis_copier_hung", copier=self.process)


def read_group_offsets(
    bootstrap: str, topic: str, partitions: int, clock_ms: Callable[[], int]
) -> TxnGroupOffsets:
    """The copier group's committed offsets of ``topic`` (-1 where none)."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": COPIER_GROUP, "log_level": 0}
    )
    try:
        tps = [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
        committed = consumer.committed(tps, timeout=30)
    finally:
        consumer.close()
    return TxnGroupOffsets(
        time_ms=clock_ms(),
        group=COPIER_GROUP,
        offsets=tuple((tp.topic, tp.partition, max(tp.offset, -1)) for tp in committed),
    )


__all__ = ["COPIER_GROUP", "TxnCopierWorker", "read_group_offsets"]
