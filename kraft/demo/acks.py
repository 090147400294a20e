"""The main job's records and acknowledgements: the demo's values (each carries its sequence
number) and `AckTracker`, which follows the producer's futures in send order."""

from __future__ import annotations

import contextlib
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from kraft.demo.console import Console, bar
from kraft.demo.report import DemoError

VALUE_PREFIX = b"kraft-demo "
"""Each value is ``kraft-demo <sequence number, 10 digits>``: 21 bytes, unique."""

ACK_TIMEOUT_S = 120.0
"""A record not acknowledged this long after it became the oldest pending one fails the demo."""


class RecordFuture(Protocol):
    """What the demo uses of `replication.clients.RecordFuture` (kraft does not import the
    clients' modules: they sit above it; the `kraft` facade names them lazily)."""

    def done(self) -> bool: ...
    def result(self, timeout: float | None = None) -> Any: ...
    def exception(self, timeout: float | None = None) -> BaseException | None: ...


def value_of(seq: int) -> bytes:
    return VALUE_PREFIX + b"%010d" % seq


def seq_of(value: bytes | None) -> int:
    """The sequence number in a demo value; -1 for anything else."""
    if value is None or not value.startswith(VALUE_PREFIX):
        return -1
    try:
        return int(value[len(VALUE_PREFIX) :])
    except ValueError:
        return -1


class AckTracker(threading.Thread):
    """Follows the futures of sent records in send order as they complete (the progress line
    and the longest pause in acknowledgements); `resolve` then reads the partition and offset
    each acknowledgement gave, or its error.

    NB: while producing, only ``done()`` is called (cheap): resolving a future costs about as
    much as sending its record, and this process's GIL is the producer's bottleneck.
    """

    def __init__(self, total: int, console: Console) -> None:
        super().__init__(name="kraft-demo-acks", daemon=True)
        self.total = total
        self.futures: list[RecordFuture] = []
        self.cursor = 0
        """Every record before this index is done (acknowledged or failed)."""
        self.partition_of = bytearray(b"\xff") * total
        """Per sequence number: the acknowledged partition, 255 if not acknowledged."""
        self.offset_of = array("q", [-1]) * total
        self.failures: dict[str, int] = {}
        self.failed = 0
        self.started = time.monotonic()
        self.stalled_s = 0.0
        """The longest time no acknowledgement arrived (the producer's view of the failover)."""
        self._console = console
        self._stopping = threading.Event()
        self._last_line = -1
        self._samples: deque[tuple[float, int]] = deque()

    def run(self) -> None:
        last_progress = time.monotonic()
        while not self._stopping.is_set():
            before = self.cursor
            futures, cursor = self.futures, self.cursor
            end = len(futures)
            while cursor < end and futures[cursor].done():
                cursor += 1
            self.cursor = cursor
            now = time.monotonic()
            if cursor != before or cursor == self.total:
                self.stalled_s = max(self.stalled_s, now - last_progress)
                last_progress = now
            self._show(now)
            if cursor == self.total:
                return
            self._stopping.wait(0.05)

    def resolve(self) -> None:
        """Read every (done) future's partition and offset, or its error; free the futures."""
        from storage.errors import KraftError

        partition_of, offset_of = self.partition_of, self.offset_of
        for seq, future in enumerate(self.futures):
            try:
                md = future.result(0)
            except KraftError as e:
                self.failed += 1
                name = type(e).__name__
                self.failures[name] = self.failures.get(name, 0) + 1
            else:
                partition_of[seq] = md.partition
                offset_of[seq] = md.offset
        self.futures = []

    def _show(self, now: float) -> None:
        done, total = self.cursor, self.total
        samples = self._samples
        samples.append((now, done))
        while len(samples) > 2 and now - samples[1][0] >= 1.0:
            samples.popleft()  # keep about one second
        then, done_then = samples[0]
        rate = (done - done_then) / (now - then) if now > then else 0.0
        text = (
            f"  produce {bar(done, total)} {100 * done // max(total, 1):3d}%  "
            f"{done:>{len(f'{total:,}')},}/{total:,} acknowledged  {rate:>9,.0f} records/s now"
        )
        tenth = 10 * done // max(total, 1)
        line = tenth != self._last_line
        self._last_line = tenth
        self._console.progress(text, line=line)

    def wait_for(self, index: int, act: Callable[[], None]) -> None:
        """Block until record ``index`` is acknowledged (or failed), calling ``act`` meanwhile.

        Raises:
            DemoError: it took longer than ``ACK_TIMEOUT_S``.
        """
        deadline = time.monotonic() + ACK_TIMEOUT_S
        while True:
            future = self.futures[index]
            if future.done():
                return
            act()
            _wait_done(future, 0.05)
            if time.monotonic() > deadline:
                raise DemoError(f"record {index} not acknowledged within {ACK_TIMEOUT_S:.0f}s")

    def wait_all(self, act: Callable[[], None]) -> None:
        """Block until every record is resolved (the thread then ends), calling ``act``."""
        deadline = time.monotonic() + ACK_TIMEOUT_S
        while self.is_alive():
            act()
            self.join(timeout=0.05)
            if time.monotonic() > deadline:
                raise DemoError(
                    f"{self.total - self.cursor} records not acknowledged within "
                    f"{ACK_TIMEOUT_S:.0f}s"
                )

    def close(self) -> None:
        self._stopping.set()
        if self.is_alive():
            self.join(timeout=5)


def _wait_done(future: RecordFuture, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):
        future.exception(timeout)


__all__ = ["ACK_TIMEOUT_S", "AckTracker", "RecordFuture", "seq_of", "value_of"]
