"""``kraft bench e2e --trace DIR``: where a record's milliseconds go between ``send`` and the
``poll`` that returns it.

The brokers of the bench's local cluster write a line per event to ``DIR/broker-<pid>.log``:
a Produce answered (when it arrived, the base offset), a log append (leader or follower, the
offsets it covers), a high watermark advance on a leader, a consumer Fetch answered (when it
arrived, each partition's high watermark). The bench's consumer notes when each Fetch answer
reached it. Joining them by partition and offset gives, per record:

1. send -> the Produce reaches the leader (linger, the producer's sender, the call);
2. -> the leader appends it;
3. -> the first follower appends it (the leader answers its parked fetch);
4. -> the second follower appends it;
5. -> the high watermark covers it (the follower's next fetch says it has it: acks=all);
6. -> the leader answers the consumer's Fetch that carries it;
7. -> the answer reaches the consumer;
8. -> ``poll`` returns it.

Times are ``time.perf_counter_ns``, one clock for every process on Linux (CLOCK_MONOTONIC).
The hooks wrap a few methods of the broker's classes when its modules load (a generated
``sitecustomize`` on the brokers' ``PYTHONPATH``); nothing in the broker knows of them, and a
run without ``--trace`` loads none. Tracing costs the brokers some CPU: the steps are for
finding the waits, the untraced run's percentiles are the figures.
"""

from __future__ import annotations

import bisect
import importlib.abc
import importlib.util
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

TRACE_ENV = "KRAFT_E2E_TRACE"
"""The directory the brokers write their events to (set by `prepare`)."""

STEPS = (
    "send -> leader has the Produce",
    "-> leader appended",
    "-> 1st follower appended",
    "-> 2nd follower appended",
    "-> high watermark covers it",
    "-> leader answers the consumer's Fetch",
    "-> the answer reaches the consumer",
    "-> poll returns it",
)

_clock = time.perf_counter_ns


def prepare(directory: Path) -> None:
    """Make the brokers started from now on by this process trace into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    hooks = directory / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "sitecustomize.py").write_text(
        "import kraft.bench.e2e_trace as _t\n_t.install_from_env()\n"
    )
    path = [str(hooks), *filter(None, [os.environ.get("PYTHONPATH")])]
    os.environ["PYTHONPATH"] = os.pathsep.join(path)
    os.environ[TRACE_ENV] = str(directory)


def install_from_env() -> None:
    """In a broker process (`prepare`'s sitecustomize): wrap the traced methods as their
    modules load."""
    directory = os.environ.get(TRACE_ENV)
    if not directory or "broker" not in sys.argv:
        return
    out = open(Path(directory) / f"broker-{os.getpid()}.log", "a", buffering=1 << 16)  # noqa: SIM115
    lock = threading.Lock()

    def flush_every_second() -> None:
        while True:
            time.sleep(1)
            with lock:
                out.flush()

    threading.Thread(target=flush_every_second, daemon=True, name="e2e-trace").start()
    sys.meta_path.insert(0, _Hooks(out, lock))


class _Hooks(importlib.abc.MetaPathFinder):
    _MODULES = frozenset({"replication.broker.replicas.partition", "replication.broker.service"})

    def __init__(self, out: TextIO, lock: threading.Lock) -> None:
        self._out, self._lock, self._seen = out, lock, set[str]()

    def event(self, *parts: object) -> None:
        with self._lock:
            self._out.write(" ".join(map(str, (_clock(), *parts))) + "\n")

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self._MODULES or name in self._seen:
            return None
        self._seen.add(name)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            self._wrap(name, module)

        loader.exec_module = exec_module
        return spec

    def _wrap(self, name: str, module: Any) -> None:
        event = self.event
        if name == "replication.broker.replicas.partition":
            replica = module.PartitionReplica
            published, appended = replica.high_watermark_published, replica.log_appended

            def high_watermark_published(self: Any, old: int, new: int, *a: Any, **kw: Any) -> Any:
                if new != old and kw.get("is_leader"):
                    event("hw", self.topic_partition.partition, new)
                return published(self, old, new, *a, **kw)

            def log_appended(self: Any, epoch: int, base: int, *, as_leader: bool) -> Any:
                tp = self.topic_partition.partition
                event("append", tp, base, self.log.log_end_offset, int(as_leader))
                return appended(self, epoch, base, as_leader=as_leader)

            replica.high_watermark_published = high_watermark_published
            replica.log_appended = log_appended
            return
        service = module.BrokerService
        fetch, produce = service.fetch, service.produce

        async def traced_fetch(self: Any, request: Any, client: Any = None) -> Any:
            start = _clock()
            response = await fetch(self, request, client)
            if request.replica_id < 0:
                parts = [
                    f"{p.partition_index}:{p.high_watermark}"
                    for t in response.responses
                    for p in t.partitions
                    if p.records
                ]
                event("fetch", start, *parts)
            return response

        async def traced_produce(self: Any, request: Any, *a: Any) -> Any:
            start = _clock()
            response = await produce(self, request, *a)
            parts = [
                f"{p.index}:{p.base_offset}"
                for t in response.responses
                for p in t.partition_responses
            ]
            event("produce", start, *parts)
            return response

        service.fetch, service.produce = traced_fetch, traced_produce


def watch_consumer(consumer: Any) -> dict[tuple[int, int], int]:
    """When each record's Fetch answer reached ``consumer`` (partition, offset -> ns), filled
    as it polls."""
    from replication.clients.fetches_in_flight import InflightFetches
    from storage.records import iter_batches

    arrived: dict[tuple[int, int], int] = {}
    fetches: InflightFetches = consumer._inflight
    start = fetches.start

    def traced_start(entry: Any, send: Any) -> None:
        def traced_send(on_done: Any) -> Any:
            def done(response: Any, error: Any) -> None:
                now = _clock()
                for topic in response.responses if response is not None else ():
                    for part in topic.partitions:
                        for _, header in iter_batches(part.records):
                            for offset in range(header.base_offset, header.last_offset + 1):
                                arrived.setdefault((part.partition_index, offset), now)
                on_done(response, error)

            return send(done)

        start(entry, traced_send)

    fetches.start = traced_start  # type: ignore[method-assign]
    return arrived


def breakdown(
    directory: Path,
    records: Sequence[tuple[int, int, int, int]],
    arrived: dict[tuple[int, int], int],
) -> dict[str, dict[str, float]]:
    """p50/p90/p99 ms of each step (`STEPS`) over ``records`` (partition, offset, sent ns,
    polled ns), skipping the first tenth (warm-up) and records with a step not traced."""
    trace = _Trace()
    for log in sorted(directory.glob("broker-*.log")):
        trace.read(log)
    steps: list[list[float]] = [[] for _ in STEPS]
    for p, offset, sent, polled in records[len(records) // 10 :]:
        reached = arrived.get((p, offset))
        times = trace.times(p, offset)
        if times is None or reached is None:
            continue
        marks = [sent, *times, reached, polled]
        for i in range(len(STEPS)):
            steps[i].append((marks[i + 1] - marks[i]) / 1e6)
    return {name: _quantiles(values) for name, values in zip(STEPS, steps, strict=True)}


class _Spans:
    """Events that cover offsets ``[base, end)``, looked up by offset."""

    def __init__(self) -> None:
        self._events: list[tuple[int, int, int]] = []  # base, end, ns
        self._bases: list[int] = []

    def add(self, base: int, end: int, now: int) -> None:
        self._events.append((base, end, now))

    def done(self) -> None:
        self._events.sort()
        self._bases = [base for base, _, _ in self._events]

    def at(self, offset: int) -> int | None:
        """The time of the event with the highest base offset at or below ``offset``, if it
        covers ``offset`` (appends and Produce requests of one partition do not overlap)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0:
            return None
        _, end, now = self._events[i]
        return now if offset < end else None


class _Marks:
    """Events that move an offset up (a high watermark, a Fetch answer), in time order."""

    def __init__(self) -> None:
        self._events: list[tuple[int, int]] = []  # ns, offset

    def add(self, now: int, offset: int) -> None:
        self._events.append((now, offset))

    def done(self) -> None:
        self._events.sort()
        # NB: a leader's offsets only grow with time: a running maximum keeps the list sorted
        top = -1
        self._tops = [top := max(top, offset) for _, offset in self._events]

    def first_above(self, offset: int) -> int | None:
        i = bisect.bisect_right(self._tops, offset)
        return self._events[i][0] if i < len(self._events) else None


class _Trace:
    def __init__(self) -> None:
        self.produced: dict[int, _Spans] = defaultdict(_Spans)
        self.leader: dict[int, _Spans] = defaultdict(_Spans)
        self.followers: dict[tuple[int, str], _Spans] = defaultdict(_Spans)
        self.high_watermarks: dict[int, _Marks] = defaultdict(_Marks)
        self.answered: dict[int, _Marks] = defaultdict(_Marks)
        self._ready = False

    def read(self, log: Path) -> None:
        for line in log.read_text().splitlines():
            fields = line.split()
            if len(fields) < 3:
                continue
            now, kind = int(fields[0]), fields[1]
            if kind == "produce":
                for part in fields[3:]:
                    p, base = map(int, part.split(":"))
                    self.produced[p].add(base, 2**62, int(fields[2]))
            elif kind == "append":
                p, base, end = int(fields[2]), int(fields[3]), int(fields[4])
                spans = self.leader[p] if fields[5] == "1" else self.followers[p, log.name]
                spans.add(base, end, now)
            elif kind == "hw":
                self.high_watermarks[int(fields[2])].add(now, int(fields[3]))
            elif kind == "fetch":
                for part in fields[3:]:
                    p, high = map(int, part.split(":"))
                    self.answered[p].add(now, high)

    def times(self, p: int, offset: int) -> list[int] | None:
        """The ns of steps 1-6 of one record, or None if one is missing from the trace."""
        if not self._ready:
            for group in (self.produced, self.leader, self.followers):
                for spans in group.values():
                    spans.done()
            for marks in (*self.high_watermarks.values(), *self.answered.values()):
                marks.done()
            self._ready = True
        produce = self.produced[p].at(offset) if p in self.produced else None
        append = self.leader[p].at(offset) if p in self.leader else None
        firsts = sorted(
            t
            for (q, _), spans in self.followers.items()
            if q == p and (t := spans.at(offset)) is not None
        )
        covered = self.high_watermarks[p].first_above(offset) if p in self.high_watermarks else None
        answer = self.answered[p].first_above(offset) if p in self.answered else None
        if produce is None or append is None or len(firsts) < 2:
            return None
        if covered is None or answer is None:
            return None
        return [produce, append, firsts[0], firsts[1], covered, answer]


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50_ms": float("nan"), "p90_ms": float("nan"), "p99_ms": float("nan")}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99)}


def render(steps: dict[str, dict[str, float]]) -> str:
    lines = [f"{'where a record waits':<42}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}"]
    for i, (name, f) in enumerate(steps.items(), 1):
        lines.append(f"{i} {name:<40}{f['p50_ms']:>9}{f['p90_ms']:>9}{f['p99_ms']:>9}")
    total = sum(f["p50_ms"] for f in steps.values())
    lines.append(f"  (the p50s add up to {total:.2f} ms)")
    return "\n".join(lines)


__all__ = ["STEPS", "breakdown", "install_from_env", "prepare", "render", "watch_consumer"]
