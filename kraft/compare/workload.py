"""The workload of ``kraft compare``: a paced probe producer that remembers every send, a
final read of a topic, and a watcher of a topic's leader and ISR.

Times are seconds since the run's origin (`Clock`), so every mode's timeline, every fault and
every ISR change share one axis.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kraft.bench.produce_consume import percentiles


class Clock:
    """Seconds since the run started (monotonic)."""

    def __init__(self) -> None:
        self._origin = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._origin


@dataclass(slots=True)
class Send:
    """One record sent: when, and when (and whether) it was acknowledged."""

    seq: int
    sent_s: float
    acked_s: float | None = None
    error: str | None = None


@dataclass
class ProbeProducer:
    """A producer thread that sends ``rate_per_s`` records a second to ``topic`` (values
    ``<topic>:<seq>``, padded to ``record_size``), at most ``window`` unacknowledged, and
    records each send's outcome. ``delivery_timeout_ms`` bounds how long a send may be retried:
    a short one makes a refused write fail instead of waiting for the cluster to heal."""

    bootstrap: str
    topic: str
    clock: Clock
    acks: str = "all"
    rate_per_s: float = 200.0
    window: int = 5000
    record_size: int = 100
    delivery_timeout_ms: int = 60_000
    request_timeout_ms: int = 5_000
    sends: list[Send] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _pending: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    failure: BaseException | None = None
    _producer: Any = None

    def value(self, seq: int) -> bytes:
        head = f"{self.topic}:{seq}:".encode()
        return head + b"x" * max(0, self.record_size - len(head))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"probe-{self.topic}", daemon=True)
        self._thread.start()

    def stop(self, drain_s: float = 10.0) -> None:
        """Stop sending, and wait up to ``drain_s`` for the answers still due."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=drain_s + self.delivery_timeout_ms / 1000 + 5)

    def _run(self) -> None:
        try:
            self._connect()
        except Exception as e:
            self.failure = e
            return
        try:
            interval = 1.0 / self.rate_per_s
            next_at = time.monotonic()
            seq = 0
            while not self._stop.is_set():
                now = time.monotonic()
                if now < next_at:
                    self._wait(min(next_at - now, 0.05))
                    continue
                next_at = max(next_at + interval, now - 1.0)  # no burst after a stall
                if self._pending >= self.window:
                    continue  # the window is full: skip this slot (the buffer is bounded)
                send = Send(seq=seq, sent_s=self.clock.now())
                self.sends.append(send)
                with self._lock:
                    self._pending += 1
                self._send(send)
                seq += 1
            self._flush(self.delivery_timeout_ms / 1000 + 5)
        except Exception as e:
            self.failure = e
        finally:
            self._close()

    # -- the client: kraft's (gRPC); `LibrdkafkaProbe` overrides these ---------------------------

    def _connect(self) -> None:
        from kraft import Producer

        options: dict[str, Any] = {
            "acks": self.acks,
            "linger_ms": 0,
            "delivery_timeout_ms": self.delivery_timeout_ms,
            "request_timeout_ms": self.request_timeout_ms,
        }
        if self.acks != "all":
            options["enable_idempotence"] = False
        self._producer = Producer(self.bootstrap, **options)

    def _send(self, send: Send) -> None:
        future = self._producer.send(self.topic, self.value(send.seq))
        future.add_done_callback(lambda f, s=send: self._done(s, f))

    def _wait(self, seconds: float) -> None:
        """Until the next send is due (the client calls back on its own threads meanwhile)."""
        time.sleep(seconds)

    def _flush(self, timeout_s: float) -> None:
        self._producer.flush(timeout=timeout_s)

    def _close(self) -> None:
        self._producer.close(timeout=5)

    def _done(self, send: Send, future: Any) -> None:
        error = future.exception(0)
        self._answered(send, None if error is None else type(error).__name__)

    def _answered(self, send: Send, error: str | None) -> None:
        if error is None:
            send.acked_s = self.clock.now()
        else:
            send.error = error
        with self._lock:
            self._pending -= 1

    # -- what the sends show ---------------------------------------------------------------------

    def acknowledged_values(self) -> list[bytes]:
        return [self.value(s.seq) for s in list(self.sends) if s.acked_s is not None]

    def first_ack_sent_after(self, t: float) -> float | None:
        """The acknowledgement time of the first record sent after ``t`` that was acked."""
        for s in list(self.sends):
            if s.sent_s > t and s.acked_s is not None:
                return s.acked_s
        return None

    def acked_after(self, t: float) -> int:
        return sum(1 for s in list(self.sends) if s.sent_s > t and s.acked_s is not None)


@dataclass
class LibrdkafkaProbe(ProbeProducer):
    """The same probe through librdkafka (confluent-kafka) to a Kafka listener: Apache
    Kafka's, or kraft's (`LocalCluster.kafka_bootstrap`). acks and timeouts as above,
    idempotent with acks=all, ``linger.ms`` 0; delivery reports are served by this thread."""

    def _connect(self) -> None:
        from confluent_kafka import Producer

        self._producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": self.acks,
                "enable.idempotence": self.acks == "all",
                "linger.ms": 0,
                "delivery.timeout.ms": self.delivery_timeout_ms,
                "request.timeout.ms": min(self.request_timeout_ms, self.delivery_timeout_ms),
                "queue.buffering.max.messages": max(self.window, 1),
                "log_level": 2,  # a fault's refused connections are expected: no noise
            }
        )

    def _send(self, send: Send) -> None:
        def on_delivery(error: Any, _message: Any) -> None:
            self._answered(send, None if error is None else error.name())

        try:
            self._producer.produce(self.topic, self.value(send.seq), on_delivery=on_delivery)
        except BufferError:
            self._answered(send, "QUEUE_FULL")

    def _wait(self, seconds: float) -> None:
        self._producer.poll(seconds)  # serves delivery reports as they come

    def _flush(self, timeout_s: float) -> None:
        self._producer.flush(timeout_s)

    def _close(self) -> None:
        self._producer.flush(5)


def latency_series(sends: list[Send], bucket_s: float) -> list[dict[str, Any]]:
    """Per bucket of send time: count and p50/p99/p999 of the acknowledged sends' latency."""
    buckets: dict[int, list[float]] = {}
    for s in sends:
        if s.acked_s is not None:
            buckets.setdefault(int(s.sent_s // bucket_s), []).append((s.acked_s - s.sent_s) * 1e3)
    return [
        {"t": round(k * bucket_s, 3), "n": len(v), **percentiles(v)}
        for k, v in sorted(buckets.items())
    ]


def throughput_series(sends: list[Send], bucket_s: float, start: float, end: float) -> list[Any]:
    """Acknowledgements per second, per bucket of acknowledgement time, ``start`` to ``end``."""
    n = max(1, int((end - start) / bucket_s) + 1)
    counts = [0] * n
    for s in sends:
        if s.acked_s is not None and start <= s.acked_s < end:
            counts[int((s.acked_s - start) / bucket_s)] += 1
    return [[round(start + i * bucket_s, 3), round(c / bucket_s, 1)] for i, c in enumerate(counts)]


def unavailable_s(sends: list[Send], start: float, end: float, gap_s: float = 0.5) -> float:
    """Seconds of ``[start, end)`` in gaps longer than ``gap_s`` between consecutive
    acknowledgements of records sent in it (phase edges count as acknowledgements)."""
    acks = sorted(s.acked_s for s in sends if s.acked_s is not None and start <= s.sent_s < end)
    acks = [a for a in acks if a < end]
    edges = [start, *acks, end]
    return round(sum(b - a for a, b in itertools.pairwise(edges) if b - a > gap_s), 3)


@dataclass(frozen=True, slots=True)
class IsrChange:
    t: float
    topic: str
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


class TopicWatcher:
    """Polls ``describe(topic)`` (the description of its partition 0) of some topics every
    ``interval_s`` and records each change of leader or ISR (the ISR shrink and expand moments
    the plots mark)."""

    def __init__(
        self,
        describe: Callable[[str], Any],
        topics: list[str],
        clock: Clock,
        interval_s: float = 0.1,
    ) -> None:
        self._describe = describe
        self._topics = topics
        self._clock = clock
        self._interval_s = interval_s
        self.changes: list[IsrChange] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="topic-watcher", daemon=True)

    def __enter__(self) -> TopicWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        last: dict[str, tuple[int, int, tuple[int, ...]]] = {}
        while not self._stop.wait(self._interval_s):
            for topic in self._topics:
                try:
                    p = self._describe(topic)  # the partition's description
                except Exception:
                    continue
                state = (p.leader, p.leader_epoch, tuple(sorted(p.isr)))
                if last.get(topic) != state:
                    last[topic] = state
                    self.changes.append(IsrChange(self._clock.now(), topic, *state))

    def of(self, topic: str) -> list[IsrChange]:
        return [c for c in self.changes if c.topic == topic]


__all__ = [
    "Clock",
    "IsrChange",
    "LibrdkafkaProbe",
    "ProbeProducer",
    "Send",
    "TopicWatcher",
    "latency_series",
    "throughput_series",
    "unavailable_s",
]
