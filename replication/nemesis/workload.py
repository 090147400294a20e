"""The nemesis workloads: idempotent producers writing unique values, readers polling all
the time, each recording what it saw into the run's `History`.

A producer thread sends ``"<name>-<n>"`` to partition ``n % partitions`` at a steady rate,
keeping at most `MAX_OUTSTANDING` records unacknowledged; every send is recorded, and so is
its outcome when the producer's future completes (on the producer's I/O thread). A reader
thread assigns itself every partition from the beginning and records every record it polls;
if its consumer fails it starts a new one, from the beginning again, and records the `Seek`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

import structlog

from kraft.types import TopicPartition
from replication.clients.batch import RecordFuture
from replication.clients.consumer import Consumer
from replication.clients.producer import Producer
from replication.nemesis.history import Ack, History, Poll, Seek, Send, SendFailed
from storage.errors import ErrorCode, KraftError

MAX_OUTSTANDING: Final = 2_000
"""Records a producer lets wait for their acknowledgement before it pauses sending."""

DEFINITE_FAILURES: Final = frozenset(
    {
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.INVALID_RECORD,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
)
"""Errors that say the write did not happen. Anything else (a timeout, a lost connection,
NOT_ENOUGH_REPLICAS_AFTER_APPEND) leaves it indeterminate: it may be in the log."""

_logger = structlog.get_logger("replication.nemesis.workload")


class ProducerWorker(threading.Thread):
    """One idempotent producer writing unique values (see the module docstring)."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        partitions: int,
        history: History,
        clock_ms: Callable[[], int],
        *,
        rate_per_s: float,
        acks: str = "all",
    ) -> None:
        super().__init__(name=f"nemesis-{name}", daemon=True)
        self.process = name
        self._topic = topic
        self._partitions = partitions
        self._history = history
        self._clock_ms = clock_ms
        self._interval_s = 1.0 / rate_per_s
        self._stopping = threading.Event()
        self._outstanding = threading.Semaphore(MAX_OUTSTANDING)
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self.sent = 0
        self.producer = Producer(
            bootstrap,
            acks=acks,
            enable_idempotence=acks == "all",
            request_timeout_ms=5_000,
            delivery_timeout_ms=60_000,
        )

    def run(self) -> None:
        n = 0
        next_at = time.monotonic()
        while not self._stopping.is_set():
            delay = next_at - time.monotonic()
            if delay > 0 and self._stopping.wait(delay):
                break
            next_at = max(next_at + self._interval_s, time.monotonic() - 1.0)
            if not self._outstanding.acquire(timeout=0.5):
                continue
            value = f"{self.process}-{n}"
            partition = n % self._partitions
            n += 1
            self._history.record(
                Send(
                    time_ms=self._clock_ms(),
                    process=self.process,
                    topic=self._topic,
                    partition=partition,
                    value=value,
                )
            )
            with self._lock:
                self._pending.add(value)
            try:
                future = self.producer.send(self._topic, value.encode(), partition=partition)
            except KraftError as e:
                self._failed(value, partition, e)
                continue
            self.sent += 1
            future.add_done_callback(
                lambda f, v=value, p=partition: self._completed(f, v, p)  # type: ignore[misc]
            )

    def _completed(self, future: RecordFuture, value: str, partition: int) -> None:
        error = future.exception()
        if error is not None:
            self._failed(value, partition, error)
            return
        metadata = future.result()
        if not self._resolve(value):
            return
        self._history.record(
            Ack(
                time_ms=self._clock_ms(),
                process=self.process,
                topic=self._topic,
                partition=partition,
                value=value,
                offset=metadata.offset,
            )
        )

    def _resolve(self, value: str) -> bool:
        """Settle ``value`` once: False if it was settled already (then record nothing)."""
        with self._lock:
            if value not in self._pending:
                return False
            self._pending.discard(value)
        self._outstanding.release()
        return True

    def _failed(self, value: str, partition: int, error: BaseException) -> None:
        if not self._resolve(value):
            return
        code = getattr(error, "code", None)
        self._history.record(
            SendFailed(
                time_ms=self._clock_ms(),
                process=self.process,
                topic=self._topic,
                partition=partition,
                value=value,
                definite=code in DEFINITE_FAILURES,
                error=f"{type(error).__name__}: {str(error)[:120]}",
            )
        )

    def stop(self, flush_timeout_s: float) -> None:
        """Stop sending, wait up to ``flush_timeout_s`` for the outstanding records, and
        record what is still unresolved as indeterminate."""
        self._stopping.set()
        self.join(timeout=10)
        try:
            self.producer.flush(timeout=flush_timeout_s)
        except Exception as e:
            _logger.warning("nemesis_flush_failed", producer=self.process, error=str(e))
        deadline = time.monotonic() + 10  # callbacks run just after the futures complete
        while self._pending and time.monotonic() < deadline:
            time.sleep(0.05)
        with self._lock:
            unresolved = sorted(self._pending)
        for value in unresolved:
            n = int(value.rsplit("-", 1)[1])
            self._failed(value, n % self._partitions, TimeoutError("unresolved at the end"))
        self.producer.close(timeout=5)


class ReaderWorker(threading.Thread):
    """A consumer assigned every partition, polling all the time (see the module
    docstring)."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        partitions: int,
        history: History,
        clock_ms: Callable[[], int],
    ) -> None:
        super().__init__(name=f"nemesis-{name}", daemon=True)
        self.process = name
        self._bootstrap_servers = bootstrap
        self._tps = [TopicPartition(topic, p) for p in range(partitions)]
        self._history = history
        self._clock_ms = clock_ms
        self._stopping = threading.Event()
        self.polled = 0
        self.restarts = 0

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._read()
            except Exception as e:
                self.restarts += 1
                _logger.info("nemesis_reader_restarted", reader=self.process, error=str(e))
                self._stopping.wait(0.5)

    def _read(self) -> None:
        with Consumer(self._bootstrap_servers, auto_offset_reset="earliest") as consumer:
            consumer.assign(self._tps)
            consumer.seek_to_beginning(self._tps)
            now = self._clock_ms()
            for tp in self._tps:
                self._history.record(
                    Seek(
                        time_ms=now,
                        process=self.process,
                        topic=tp.topic,
                        partition=tp.partition,
                        offset=0,
                    )
                )
            while not self._stopping.is_set():
                for record in consumer.poll(timeout=0.5):
                    self.polled += 1
                    self._history.record(
                        Poll(
                            time_ms=self._clock_ms(),
                            process=self.process,
                            topic=record.topic,
                            partition=record.partition,
                            offset=record.offset,
                            value=(record.value or b"").decode(errors="replace"),
                        )
                    )

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=15)


__all__ = ["DEFINITE_FAILURES", "MAX_OUTSTANDING", "ProducerWorker", "ReaderWorker"]
