"""A server process dies with its loops: one rule for every shell (issue 10).

A background loop (the Raft Ready loop, the controller's tick, the broker's lifecycle and tick
loops) that ends while its process is meant to run leaves a zombie: the process holds its
port and answers health checks, but does nothing. `LoopSupervisor` watches those tasks, and
the first one that dies, by an exception or by returning, is fatal:

1. one structlog error event, ``background_task_died``, names the task and the exception;
2. every ``on_death`` callback runs at once (the shells mark gRPC health NOT_SERVING);
3. `LoopSupervisor.wait_for_death` resolves: `serve_until_stopped` then stops the server and
   returns `EXIT_LOOP_DIED`, the process's exit code. If stopping hangs, the process exits
   anyway after `STOP_TIMEOUT_S`.

A task that is cancelled is being stopped by its owner and is not a death; nor is anything
that ends after `LoopSupervisor.close` (the server is stopping).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any, Final, final

from structlog.typing import FilteringBoundLogger

from kraft.gc_tuning import collect_periodically, tune_server_gc

EXIT_LOOP_DIED: Final = 1
"""The exit code of a process whose background loop died."""

STOP_TIMEOUT_S: Final = 10.0
"""How long a process whose loop died may take to stop before it exits regardless."""


@final
class LoopSupervisor:
    """Watches a process's background loops; the first to die is fatal (see the module)."""

    def __init__(self, log: FilteringBoundLogger) -> None:
        self._log = log
        self._callbacks: list[Callable[[], None]] = []
        self._death: BaseException | None = None
        self._dead_task: str | None = None
        self._waiter: asyncio.Future[BaseException] | None = None
        self._closed = False

    @property
    def death(self) -> BaseException | None:
        """The error that killed a loop, if one died."""
        return self._death

    def on_death(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` (synchronously, once) when a loop dies."""
        self._callbacks.append(callback)

    def watch(self, task: asyncio.Task[Any], *, may_finish: bool = False) -> None:
        """A loop that must run until `close`; ``may_finish`` allows it to return normally."""

        def done(t: asyncio.Task[Any]) -> None:
            if t.cancelled():
                return
            exc = t.exception()
            if exc is None:
                if may_finish:
                    return
                exc = RuntimeError(f"task {t.get_name()} returned while the server runs")
            self.fail(t.get_name(), exc)

        task.add_done_callback(done)

    def fail(self, task: str, exc: BaseException) -> None:
        """Report a dead loop (or any failure that must take the process down)."""
        if self._closed or self._death is not None:
            return
        self._death = exc
        self._dead_task = task
        self._log.error("background_task_died", task=task, error=repr(exc)[:500], exc_info=exc)
        for callback in self._callbacks:
            try:
                callback()
            except Exception as e:  # pragma: no cover - a callback must not hide the death
                self._log.warning("death_callback_failed", error=repr(e)[:500])
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(exc)

    def close(self) -> None:
        """The server is stopping: loops that end from now on are not deaths."""
        self._closed = True

    async def wait_for_death(self) -> BaseException:
        """Resolves with the error once a loop died."""
        if self._death is not None:
            return self._death
        if self._waiter is None:
            self._waiter = asyncio.get_running_loop().create_future()
        return await asyncio.shield(self._waiter)


async def serve_until_stopped(
    supervisor: LoopSupervisor,
    *,
    start: Callable[[], Awaitable[None]],
    on_signal: Callable[[], Awaitable[None]],
    on_death: Callable[[], Awaitable[None]],
) -> int:
    """Run a server process: ``start`` (then `tune_server_gc` and `collect_periodically`),
    then wait for SIGTERM/SIGINT (``on_signal``, exit 0) or a dead loop (``on_death``, exit
    `EXIT_LOOP_DIED`, within `STOP_TIMEOUT_S`)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await start()
        tune_server_gc()
    except BaseException:
        # Release what the start opened (its servers' ports, their threads) before the error
        # ends the process, so the error, not an unawaited shutdown, is the log's last word.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(on_death(), STOP_TIMEOUT_S)
        raise
    stop_task = asyncio.create_task(stop.wait(), name="wait-for-signal")
    death_task = asyncio.create_task(supervisor.wait_for_death(), name="wait-for-death")
    collector = asyncio.create_task(collect_periodically(), name="full-collections")
    done, _ = await asyncio.wait({stop_task, death_task}, return_when=asyncio.FIRST_COMPLETED)
    died = death_task in done
    for task in (stop_task, death_task, collector):
        task.cancel()
    supervisor.close()
    if not died:
        await on_signal()
        return 0
    # NB: a process whose loop died must not linger, even if stopping hangs (a stuck thread
    # in the default executor would hold asyncio.run's shutdown forever).
    loop.call_later(STOP_TIMEOUT_S, os._exit, EXIT_LOOP_DIED)
    with contextlib.suppress(Exception):  # already dying, and the death was logged
        await asyncio.wait_for(on_death(), STOP_TIMEOUT_S)
    return EXIT_LOOP_DIED


__all__ = ["EXIT_LOOP_DIED", "STOP_TIMEOUT_S", "LoopSupervisor", "serve_until_stopped"]
