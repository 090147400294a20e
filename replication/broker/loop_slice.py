"""`LoopSlice`: how much of a long pass one event-loop callback may do before it yields.

A broker's loop also answers follower fetches, produces and heartbeats, so a pass over every
replica it hosts (thousands of them) is cut into slices: a slice ends once it has taken
``most`` steps or run ``seconds``, and the pass yields the loop before the next step. The
replica manager retires removed replicas this way (`ReplicaManager._retire`, each slice a
reconcile pass), and the periodic passes (retention, producer-id expiration, the log cleaner's
plans) yield between slices (`sum_in_slices`), as Kafka runs them off its request threads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Final, TypeVar

T = TypeVar("T")

PASS_SLICE_STEPS: Final = 64
"""Replicas a periodic pass visits in one loop callback at most. A visit that finds nothing to
do costs a few microseconds; one that deletes segments or writes a checkpoint costs fsyncs."""
PASS_SLICE_BUDGET_S: Final = 0.01
"""...and a slice stops early once it has run this long (a few visits that fsync)."""


class LoopSlice:
    """The bookkeeping of one slice: the steps taken and the time spent since `renew`.

    Args:
        seconds: the slice ends once it has run this long.
        most: ...or taken this many steps (None: no limit).
        clock: seconds, monotonic.
    """

    def __init__(
        self,
        seconds: float = PASS_SLICE_BUDGET_S,
        most: int | None = PASS_SLICE_STEPS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._seconds, self._most, self._clock = seconds, most, clock
        self._until = 0.0
        self._taken = 0
        self.renew()

    def renew(self) -> None:
        """Start a new slice (after yielding the loop)."""
        self._until = self._clock() + self._seconds
        self._taken = 0

    def over(self) -> bool:
        """This slice has taken its ``most`` steps or run its ``seconds``: yield, then
        `renew`."""
        return (self._most is not None and self._taken >= self._most) or (
            self._clock() > self._until
        )

    def took(self) -> None:
        """One more step in this slice."""
        self._taken += 1

    def end(self) -> None:
        """End this slice now (a pass that counts another budget, bytes say): the next `turn`
        yields."""
        self._until = float("-inf")

    async def turn(self) -> bool:
        """Before one step of an async pass: yield the loop first if the slice is over; whether
        it yielded (a new slice began)."""
        yielded = self.over()
        if yielded:
            await asyncio.sleep(0)
            self.renew()
        self.took()
        return yielded


async def sum_in_slices(
    items: Iterable[T], step: Callable[[T], int], loop_slice: LoopSlice | None = None
) -> int:
    """``step`` each of ``items`` in order, yielding the loop between slices; the sum of what
    the steps return."""
    cut = LoopSlice() if loop_slice is None else loop_slice
    total = 0
    for item in items:
        await cut.turn()
        total += step(item)
    return total


__all__ = ["PASS_SLICE_BUDGET_S", "PASS_SLICE_STEPS", "LoopSlice", "sum_in_slices"]
