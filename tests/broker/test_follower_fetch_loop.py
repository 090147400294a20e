"""`follower_fetch_loop` waits on the replica's *current* change event: each change sets the
event and replaces it, so a loop that kept the first one would spin through the event loop
until the driver's backoff ended (brokers stalled 4-10 s in a broker-kill nemesis run)."""

from __future__ import annotations

import asyncio
from typing import Any

from replication.broker.replicas.change_event import ChangeEvent
from replication.broker.replicas.fetcher import follower_fetch_loop


class _Backoff:
    """A follower driver with nothing to fetch (a backoff) until stopped."""

    is_follower = True
    generation = 0

    def __init__(self) -> None:
        self.asked = 0

    def build_fetch_request(self, now_ms: int) -> None:
        self.asked += 1
        if self.asked > 1000:  # a spinning loop: end it, so the test fails at once
            self.is_follower = False

    def next_deadline_ms(self) -> None:
        return None


def test_a_waiting_follower_loop_sleeps_through_the_current_change_event_not_the_first() -> None:
    async def run() -> int:
        driver = _Backoff()
        events = [ChangeEvent()]

        def notify() -> None:  # as PartitionReplica.notify: set the event, then replace it
            events[0].set()
            events[0] = ChangeEvent()

        async def never(_: Any) -> Any:
            raise AssertionError("no request was built")

        loop_task = asyncio.create_task(
            follower_fetch_loop(driver, lambda: events[0], never, lambda: None)  # type: ignore[arg-type]
        )
        await asyncio.sleep(0.01)
        notify()  # one change: the loop asks again once, then waits on the new event
        await asyncio.sleep(0.35)
        driver.is_follower = False
        notify()
        await asyncio.wait_for(loop_task, 5)
        return driver.asked

    asked = asyncio.run(run())
    # about one ask per 100 ms wait, plus one per change; a spinning loop asks thousands of times
    assert 2 <= asked <= 10, asked
