"""`clock_ms`: the wall clock the shells feed the cores."""

from __future__ import annotations

import time

_last_clock_ms = 0


def clock_ms() -> int:
    """Wall-clock milliseconds that never go backwards: what the shells feed the cores.

    The cores need time that does not jump back (they assert it), and the batches they build
    carry it as their CreateTime, which Kafka's tools, time indexes, ``segment.ms`` and
    retention read as wall-clock time. A clock step backwards freezes it until wall time
    catches up.
    """
    global _last_clock_ms
    now = time.time_ns() // 1_000_000
    if now > _last_clock_ms:
        _last_clock_ms = now
    return _last_clock_ms


__all__ = ["clock_ms"]
