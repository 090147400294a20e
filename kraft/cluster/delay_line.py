"""When a delayed chunk or packet is delivered: the one home of delay and jitter for kraft's
network faults, used by the TCP fault proxy (`kraft.cluster.fault_proxy`, per chunk) and by
the packet relay between network namespaces (`kraft.cluster.netns_relay`, per packet).

Pure: the time and a random draw come in as arguments (the shell owns the clock and a seeded
``random.Random``), so a relay's schedule is a function of its seed and its arrivals.

Each item is held ``delay`` plus a jitter drawn uniformly from ``[-jitter, +jitter]`` (never
below zero), and never delivered before the item ahead of it: jitter varies the delay, the
order is kept (netem's ``delay D J`` with its default order-keeping queue does the same for a
constant rate). With ``reorder`` each item leaves at its own time instead, so a later one may
overtake an earlier one: reordering, a fault of its own.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Generic, TypeVar

_T = TypeVar("_T")


def delivery_time(
    now: float, delay_s: float, jitter_s: float, draw: float, previous: float = 0.0
) -> float:
    """When an item that arrives at ``now`` leaves: ``now + delay ± jitter``, where ``draw``
    (uniform in [0, 1)) picks the point of the jitter window, at no earlier than ``now`` and
    no earlier than ``previous`` (the item ahead of it)."""
    if delay_s < 0 or jitter_s < 0:
        raise ValueError(f"delay {delay_s} and jitter {jitter_s} must be >= 0")
    held = max(0.0, delay_s + (2 * draw - 1) * jitter_s) if jitter_s else delay_s
    return max(now + held, previous)


class DelayLine(Generic[_T]):
    """A queue of items, each released at its `delivery_time` (order kept, unless
    ``reorder``: then each at its own time, so one may overtake another)."""

    def __init__(self, delay_s: float, jitter_s: float = 0.0, *, reorder: bool = False) -> None:
        delivery_time(0.0, delay_s, jitter_s, 0.0)  # validates
        self.delay_s = delay_s
        self.jitter_s = jitter_s
        self.reorder = reorder
        self._items: list[tuple[float, int, _T]] = []
        self._pushed = 0
        self._last = 0.0

    def push(self, now: float, item: _T, draw: float) -> float:
        """Hold ``item`` (arrived at ``now``); its delivery time."""
        previous = 0.0 if self.reorder else self._last
        due = delivery_time(now, self.delay_s, self.jitter_s, draw, previous)
        self._last = max(self._last, due)
        self._pushed += 1
        heapq.heappush(self._items, (due, self._pushed, item))  # ties: in arrival order
        return due

    def pop_due(self, now: float) -> Iterator[_T]:
        """The items due by ``now``, in delivery order (removed as they are yielded)."""
        while self._items and self._items[0][0] <= now:
            yield heapq.heappop(self._items)[2]

    @property
    def next_due(self) -> float | None:
        """When the first item held is due (None: none held)."""
        return self._items[0][0] if self._items else None

    def __len__(self) -> int:
        return len(self._items)


__all__ = ["DelayLine", "delivery_time"]
