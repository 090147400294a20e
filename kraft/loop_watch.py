"""Diagnostics of a process's event loop (the controller uses them): a stall watch that logs
``event_loop_stalled`` when a short sleep wakes late (``kraft bench metadata`` counts them), and,
with ``KRAFT_SLOW_CALLBACK_MS``, a log line naming every callback that held the loop that long."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog

LOOP_STALL_LOG_MS = 200
"""A wake-up of the stall watch (every `_STALL_WATCH_S`) this much later than asked is logged
as ``event_loop_stalled``: something held the event loop (or the CPU was not ours) long enough
to put Raft's fetch timeout (600 ms by default) at risk."""

_STALL_WATCH_S = 0.05

SLOW_CALLBACK_ENV = "KRAFT_SLOW_CALLBACK_MS"
"""When set (milliseconds), a controller process logs ``slow_callback`` for every event-loop
callback that ran that long, naming it (a task's coroutine, a gRPC callback...): which step held
the loop through an ``event_loop_stalled``. For profiling runs (``kraft bench metadata``)."""


async def watch_stalls(log: Any, is_active: Callable[[], bool]) -> None:
    """Log ``event_loop_stalled`` whenever a short sleep wakes `LOOP_STALL_LOG_MS` late."""
    while True:
        before = time.monotonic()
        await asyncio.sleep(_STALL_WATCH_S)
        late_ms = (time.monotonic() - before - _STALL_WATCH_S) * 1000
        if late_ms >= LOOP_STALL_LOG_MS:
            log.warning("event_loop_stalled", late_ms=round(late_ms), active=is_active())


def log_slow_callbacks(threshold_ms: float) -> None:
    """From now on, log ``slow_callback`` for each event-loop callback running
    ``threshold_ms`` or longer (wraps asyncio's ``Handle._run``: profiling runs only)."""
    log = structlog.get_logger("kraft.controller")
    run = asyncio.events.Handle._run

    def timed(handle: asyncio.events.Handle) -> None:
        start = time.perf_counter()
        run(handle)
        took_ms = (time.perf_counter() - start) * 1000
        if took_ms >= threshold_ms:
            log.warning("slow_callback", took_ms=round(took_ms), callback=_callback_name(handle))

    asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]


def _callback_name(handle: asyncio.events.Handle) -> str:
    """The task a callback steps (its coroutine's name), else the callback's repr."""
    callback = getattr(handle, "_callback", None)
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        return f"task {owner.get_name()}: {getattr(coro, '__qualname__', repr(coro))}"[:300]
    return repr(handle)[:300]


__all__ = ["LOOP_STALL_LOG_MS", "SLOW_CALLBACK_ENV", "log_slow_callbacks", "watch_stalls"]
