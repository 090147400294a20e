"""The broker process: `serve` runs a `BrokerServer` until a signal (controlled shutdown) or
until one of its loops dies; `run_broker` is the ``kraft broker`` entry point, optionally under
cProfile (``KRAFT_PROFILE_DIR``)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from kraft.cluster.process import PROFILE_DIR_ENV
from kraft.supervision import serve_until_stopped
from replication.broker.config import BrokerNodeConfig
from replication.broker.server import BrokerServer


async def serve(config: BrokerNodeConfig) -> int:
    """Run a broker until SIGTERM/SIGINT (controlled shutdown, exit code 0), or until one of
    its loops dies (exit code 1, `kraft.supervision`)."""
    server = BrokerServer(config)

    async def shut_down() -> None:
        await server.controlled_shutdown()
        await server.stop()

    return await serve_until_stopped(
        server.supervisor, start=server.start, on_signal=shut_down, on_death=server.stop
    )


class _Profiling:
    """The ``KRAFT_PROFILE_DIR`` profiler of one broker process."""

    def __init__(self, directory: Path, node_id: int) -> None:
        import cProfile

        self._new = cProfile.Profile
        self._profile = cProfile.Profile()
        self._directory = directory
        self._prefix = f"broker-{node_id}-{os.getpid()}"
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


def run_broker(config: BrokerNodeConfig) -> int:
    """The ``kraft broker`` entry point: serve until signalled; the exit code."""
    directory = os.environ.get(PROFILE_DIR_ENV)
    if not directory:
        return asyncio.run(serve(config))
    profiling = _Profiling(Path(directory), config.node_id)

    async def profiled() -> int:
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, profiling.dump)
        return await serve(config)

    profiling.start()
    try:
        return asyncio.run(profiled())
    finally:
        profiling.stop()


__all__ = ["PROFILE_DIR_ENV", "run_broker", "serve"]
