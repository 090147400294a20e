"""Diagnostics of a process's event loop (brokers and controllers run them).

- **The stall watch** (`watch_loop`): a task that sleeps `TICK_S` again and again and compares
  when it woke with when it asked to. The lateness (the loop's lag: a callback that held the
  loop, or a CPU that was not ours) goes to the histogram ``kraft_event_loop_lag_seconds``, and
  a wake-up ``event.loop.stall.warn.ms`` or more late counts in
  ``kraft_event_loop_stalls_total`` and logs one WARN ``event_loop_stalled`` (``kraft bench
  metadata`` counts them). `LoopLag` is the bookkeeping, pure: times in, readings out.
- **Slow callbacks**: with ``KRAFT_SLOW_CALLBACK_MS``, a log line naming every callback that
  held the loop that long, with the CPU time it took (``cpu_ms``: the loop thread's own, so a
  busy machine does not inflate it); controllers and brokers, for profiling runs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import structlog

from kraft.metrics.registry import counter, histogram
from storage.config_registry import NODE_KEYS

STALL_WARN_KEY: Final = "event.loop.stall.warn.ms"
LOOP_STALL_LOG_MS: Final = int(NODE_KEYS[STALL_WARN_KEY].default or 0)
"""The default of ``event.loop.stall.warn.ms`` (its doc is in the config registry)."""
STALL_WARN_FIELD: Final = {STALL_WARN_KEY: "event_loop_stall_warn_ms"}
"""The key -> the field of a broker's and a controller's node config that holds it."""

TICK_S: Final = 0.05
"""How often the watch wakes: the finest lag it can see is the loop's own jitter, and the
cost is 20 wake-ups a second."""

LAG_BUCKETS_S: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)

SLOW_CALLBACK_ENV = "KRAFT_SLOW_CALLBACK_MS"
"""When set (milliseconds), a controller or broker process logs ``slow_callback`` for every
event-loop callback that ran that long, naming it (a task's coroutine, a gRPC callback...):
which step held the loop through an ``event_loop_stalled``. For profiling runs (``kraft bench
metadata``, ``kraft bench metadata-delta``)."""


@dataclass(frozen=True, slots=True)
class LagReading:
    """One wake-up of the watch: how late it was and whether that is a stall to warn of."""

    lag_s: float
    stalled: bool


@dataclass(slots=True)
class LoopLag:
    """The stall watch's bookkeeping (no clock: the shell passes both times).

    ``warn_s`` 0 (``event.loop.stall.warn.ms=0``) measures without ever warning."""

    warn_s: float
    ticks: int = 0
    stalls: int = 0
    worst_s: float = 0.0

    def woke(self, due_s: float, now_s: float) -> LagReading:
        """The watch asked to wake at ``due_s`` and woke at ``now_s`` (one clock, seconds).
        Waking early (a coarse timer) is no lag."""
        lag = max(0.0, now_s - due_s)
        stalled = self.warn_s > 0 and lag >= self.warn_s
        self.ticks += 1
        self.stalls += stalled
        self.worst_s = max(self.worst_s, lag)
        return LagReading(lag, stalled)


def _lag_histogram() -> Any:
    return histogram(
        "kraft_event_loop_lag_seconds",
        "how late the event loop's stall watch woke, every 50 ms: the loop's lag",
        buckets=LAG_BUCKETS_S,
    )


def _stall_counter() -> Any:
    return counter(
        "kraft_event_loop_stalls_total",
        "wake-ups of the stall watch event.loop.stall.warn.ms or more late",
    )


async def watch_loop(
    log: Any, warn_ms: int, is_active: Callable[[], bool] | None = None, lag: LoopLag | None = None
) -> None:
    """Run the stall watch on this loop until cancelled (see the module docstring);
    ``is_active`` (a controller's) is logged with each stall; ``lag`` keeps the bookkeeping
    where a caller can read it."""
    book = lag if lag is not None else LoopLag(warn_s=warn_ms / 1000)
    observe = _lag_histogram().observe
    stalls = _stall_counter()
    while True:
        due = time.monotonic() + TICK_S
        await asyncio.sleep(TICK_S)
        reading = book.woke(due, time.monotonic())
        observe(reading.lag_s)
        if reading.stalled:
            stalls.inc()
            extra = {} if is_active is None else {"active": is_active()}
            log.warning("event_loop_stalled", late_ms=round(reading.lag_s * 1000), **extra)


def log_slow_callbacks(threshold_ms: float) -> None:
    """From now on, log ``slow_callback`` for each event-loop callback running
    ``threshold_ms`` or longer (wraps asyncio's ``Handle._run``: profiling runs only)."""
    log = structlog.get_logger("kraft.loop_watch")
    run = asyncio.events.Handle._run

    def timed(handle: asyncio.events.Handle) -> None:
        start, cpu = time.perf_counter(), time.thread_time()
        run(handle)
        took_ms = (time.perf_counter() - start) * 1000
        if took_ms >= threshold_ms:
            log.warning(
                "slow_callback",
                took_ms=round(took_ms),
                cpu_ms=round((time.thread_time() - cpu) * 1000),
                callback=_callback_name(handle),
            )

    asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]


def _callback_name(handle: asyncio.events.Handle) -> str:
    """The task a callback steps (its coroutine's name), else the callback's repr."""
    callback = getattr(handle, "_callback", None)
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        return f"task {owner.get_name()}: {getattr(coro, '__qualname__', repr(coro))}"[:300]
    return repr(handle)[:300]


__all__ = [
    "LOOP_STALL_LOG_MS",
    "SLOW_CALLBACK_ENV",
    "STALL_WARN_FIELD",
    "STALL_WARN_KEY",
    "LagReading",
    "LoopLag",
    "log_slow_callbacks",
    "watch_loop",
]
