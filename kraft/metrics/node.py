"""The metrics endpoint of a controller or a broker process: the state gauges of
`kraft.metrics.kafka` registered on this process's registry, served on ``metrics.port``.

A node calls `serve_node_metrics` once it has started, with a snapshot function over its own
state; the scrape runs on the endpoint's thread and only reads (an image is immutable, Raft's
leader and epoch are plain ints), so it never waits on the node's event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import structlog

from kraft.metrics.registry import GaugeSpec, GaugeValue, StateGauges, start_endpoint


def serve_node_metrics(
    port: int,
    listen: str,
    specs: Iterable[GaugeSpec],
    snapshot: Callable[[], Mapping[str, GaugeValue]],
    *,
    role: str,
    node_id: int,
) -> int | None:
    """Register the node's gauges and serve ``/metrics`` on ``port`` (-1: none; 0: a free
    one) at ``listen``'s host; the port bound, or None.

    Raises:
        OSError: the port cannot be bound.
    """
    if port < 0:
        return None
    StateGauges(specs, snapshot).register()
    host = listen.rpartition(":")[0] or "127.0.0.1"
    bound = start_endpoint(port, host)
    structlog.get_logger("kraft.metrics").info(
        "metrics_endpoint_started", role=role, node_id=node_id, address=f"{host}:{bound}"
    )
    return bound


__all__ = ["serve_node_metrics"]
