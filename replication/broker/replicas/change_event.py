"""`ChangeEvent` and `wait_any`: how a long-poll Fetch waits for any of its partitions to move.

A replica's ``changed`` (`PartitionReplica.changed`) is a one-shot event: set when its log end
offset or high watermark moves, then replaced by a fresh one. A Fetch naming several
partitions waits until any of them is set or its ``max_wait_ms`` passes. `wait_any` does that
with one future and one timer per wait, registered on each `ChangeEvent` (as Kafka's fetch
purgatory watches one delayed fetch under every partition it names), instead of a task per
partition around ``Event.wait`` plus ``asyncio.wait``: a follower's fetch waits once per
batch the leader appends, so the waiting is per-request overhead on the replication path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final

_PRUNE_AT: Final = 16
"""Drop the already-woken futures of an event that has not been set once it holds this many
(an idle partition's event outlives many timed-out waits)."""


class ChangeEvent(asyncio.Event):
    """An `asyncio.Event` that also wakes the futures `wait_any` registers on it."""

    def __init__(self) -> None:
        super().__init__()
        self._futures: list[asyncio.Future[None]] = []

    def set(self) -> None:
        super().set()
        futures, self._futures = self._futures, []
        for future in futures:
            _wake(future)

    def add_waiter(self, future: asyncio.Future[None]) -> None:
        """Wake ``future`` when this event is set (at once if it is already)."""
        if self.is_set():
            _wake(future)
            return
        if len(self._futures) >= _PRUNE_AT:
            self._futures = [f for f in self._futures if not f.done()]
        self._futures.append(future)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def wait_any(events: Sequence[asyncio.Event], timeout_s: float) -> None:
    """Return when any of ``events`` is set, or after ``timeout_s``. A plain `asyncio.Event`
    among them (not a `ChangeEvent`) is waited on through a task."""
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()
    tasks: list[asyncio.Future[object]] = []
    for event in events:
        if isinstance(event, ChangeEvent):
            event.add_waiter(woken)
        else:
            task: asyncio.Future[object] = asyncio.ensure_future(event.wait())
            task.add_done_callback(lambda _: _wake(woken))
            tasks.append(task)
    timer = loop.call_later(timeout_s, _wake, woken)
    try:
        await woken
    finally:
        timer.cancel()
        for task in tasks:
            task.cancel()


__all__ = ["ChangeEvent", "wait_any"]
