"""`Scheduler` and `SimClock`: simulated time as a priority queue of events.

Events at the same time run in the order they were scheduled (a sequence number breaks
ties), so a run is a pure function of its seed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import final

MAX_EVENTS = 2_000_000
"""No simulation may run more events than this (TigerBeetle-style bound on every loop)."""


@final
class SimClock:
    """Simulated milliseconds since the start of the run; only the scheduler moves it."""

    __slots__ = ("now_ms",)

    def __init__(self) -> None:
        self.now_ms = 0


@final
class Scheduler:
    """A priority queue of ``(time, seq, action)``; `run_until` pops and runs them in order."""

    __slots__ = ("_queue", "_seq", "clock", "events_run")

    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self.events_run = 0

    def at(self, time_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` at ``time_ms`` (now, if that is in the past)."""
        self._seq += 1
        heapq.heappush(self._queue, (max(time_ms, self.clock.now_ms), self._seq, action))

    def after(self, delay_ms: int, action: Callable[[], None]) -> None:
        self.at(self.clock.now_ms + delay_ms, action)

    def run_until(
        self,
        end_ms: int,
        *,
        after_event: Callable[[], None] | None = None,
        max_events: int = MAX_EVENTS,
    ) -> None:
        """Run every event due at or before ``end_ms``; the clock ends at ``end_ms``."""
        queue = self._queue
        clock = self.clock
        while queue and queue[0][0] <= end_ms:
            time_ms, _, action = heapq.heappop(queue)
            clock.now_ms = time_ms
            action()
            self.events_run += 1
            if after_event is not None:
                after_event()
            if self.events_run > max_events:
                raise RuntimeError(f"simulation exceeded {max_events} events")
        clock.now_ms = max(clock.now_ms, end_ms)

    def __len__(self) -> int:
        return len(self._queue)


__all__ = ["MAX_EVENTS", "Scheduler", "SimClock"]
