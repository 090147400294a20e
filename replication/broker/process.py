"""The broker process: `serve` runs a `BrokerServer` until a signal (controlled shutdown) or
until one of its loops dies; `run_broker` is the ``kraft broker`` entry point, optionally under
cProfile (``KRAFT_PROFILE_DIR``)."""

from __future__ import annotations

import os

from kraft.loop_watch import SLOW_CALLBACK_ENV, log_slow_callbacks
from kraft.profiling import PROFILE_DIR_ENV, run_profiled
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


def run_broker(config: BrokerNodeConfig) -> int:
    """The ``kraft broker`` entry point: serve until signalled; the exit code (with
    ``KRAFT_SLOW_CALLBACK_MS``, every slow event-loop callback logged, `kraft.loop_watch`)."""
    threshold = os.environ.get(SLOW_CALLBACK_ENV)
    if threshold:
        log_slow_callbacks(float(threshold))
    return run_profiled(f"broker-{config.node_id}", lambda: serve(config))


__all__ = ["PROFILE_DIR_ENV", "run_broker", "serve"]
