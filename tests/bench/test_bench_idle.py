"""`kraft bench idle` reads a node's CPU time from /proc; the figure must move with work."""

from __future__ import annotations

import os
import time

from kraft.bench.idle import cpu_seconds


def test_cpu_seconds_of_a_process_grows_by_the_cpu_it_burns() -> None:
    before = cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    assert cpu_seconds(os.getpid()) - before >= 0.2
