"""Real broker process clusters for the process tests, with fast failure detection."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from kraft.cluster import LocalCluster


@contextmanager
def running_cluster(
    *,
    controllers: int = 1,
    broker_config: Mapping[str, str] | None = None,
    controller_config: Mapping[str, str] | None = None,
) -> Iterator[LocalCluster]:
    """Three brokers and ``controllers`` controllers, healthy: a broker that stops
    heartbeating (every 250 ms) is fenced after a 2 s session timeout."""
    with LocalCluster(
        controllers=controllers,
        brokers=3,
        controller_config={"broker.session.timeout.ms": "2000", **(controller_config or {})},
        broker_config={"broker.heartbeat.interval.ms": "250", **(broker_config or {})},
    ) as c:
        c.wait_until_healthy(timeout=60)
        yield c


__all__ = ["running_cluster"]
