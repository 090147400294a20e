"""``KRAFT_PROFILE_DIR``: run a node's event loop under cProfile (brokers and controllers).

`run_profiled` runs a node's ``serve`` coroutine under cProfile when the variable is set, and
writes ``<role>-<node id>-<pid>-<n>.pstats`` into that directory on SIGUSR2 (the profile since
the previous dump, then it starts afresh) and on a clean shutdown.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

PROFILE_DIR_ENV: Final = "KRAFT_PROFILE_DIR"
"""When set, broker and controller processes run under cProfile (the event-loop thread, where
every handler runs) and write ``<role>-<node id>-<pid>-<n>.pstats`` into that directory on
SIGUSR2 (the profile since the previous dump, then it starts afresh) and on a clean shutdown."""


class Profiling:
    """The ``KRAFT_PROFILE_DIR`` profiler of one node process."""

    def __init__(self, directory: Path, prefix: str) -> None:
        import cProfile

        self._new = cProfile.Profile
        self._profile = cProfile.Profile()
        self._directory = directory
        self._prefix = f"{prefix}-{os.getpid()}"
        self._dumps = 0

    def start(self) -> None:
        self._profile.enable()

    def dump(self) -> Path:
        """Write the profile so far and start a fresh one; the file written."""
        self._profile.disable()
        self._directory.mkdir(parents=True, exist_ok=True)
        path = self._directory / f"{self._prefix}-{self._dumps}.pstats"
        self._dumps += 1
        self._profile.dump_stats(path)
        self._profile = self._new()
        self._profile.enable()
        return path

    def stop(self) -> Path:
        path = self.dump()
        self._profile.disable()
        return path


def run_profiled(prefix: str, serve: Callable[[], Awaitable[int]]) -> int:
    """``asyncio.run(serve())``, under cProfile when ``KRAFT_PROFILE_DIR`` is set (``prefix``:
    ``broker-101``, ``controller-1``...); the exit code."""
    directory = os.environ.get(PROFILE_DIR_ENV)
    if not directory:
        return asyncio.run(_run(serve))
    profiling = Profiling(Path(directory), prefix)

    async def profiled() -> int:
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, profiling.dump)
        return await serve()

    profiling.start()
    try:
        return asyncio.run(profiled())
    finally:
        profiling.stop()


async def _run(serve: Callable[[], Awaitable[int]]) -> int:
    return await serve()


__all__ = ["PROFILE_DIR_ENV", "Profiling", "run_profiled"]
