"""`InflightFetches`: a consumer's Fetch calls, at most one outstanding per broker, kept across
polls.

Kafka's consumer (its ``Fetcher``) sends a Fetch to every broker that has none outstanding and
returns from ``poll`` as soon as any answer brings records; the others stay outstanding and are
read by a later poll. Waiting for every broker's answer instead made each poll as slow as the
slowest long poll (``fetch.max.wait.ms``), which was most of kraft's end-to-end latency.

A Fetch of caught-up partitions only (a long poll that waits for new records) is given up and
replaced when more partitions of its broker become fetchable (`take_over`): otherwise those
partitions, drained from the buffer while it waited, would wait out its ``fetch.max.wait.ms``
although the broker had their records.

Answers arrive on gRPC's threads (`BrokerNetwork.call_async`) and are queued here; the polling
thread takes them (`wait`). An answer of a call that was given up (`expire`, `close`) is
dropped. Each call remembers the positions it fetched from, so that the consumer can drop data
of a partition sought or unassigned meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kraft.types import TopicPartition
from replication.clients.network import Cancellable
from replication.messages import BrokerFetchResponse
from storage.errors import KraftError

OnDone = Callable[[BrokerFetchResponse | None, KraftError | None], None]


class _NotStarted:
    def cancel(self) -> bool:
        return False


@dataclass(slots=True, eq=False)
class Inflight:
    """One outstanding Fetch."""

    leader: int
    address: str
    positions: dict[TopicPartition, int]
    """The partitions it fetches, at the positions it fetches them from."""
    expires_s: float
    """Monotonic time after which it is given up (its long poll plus a margin)."""
    caught_up: bool = False
    """Every partition it carries was at its end when it was sent: the broker holds it for
    ``fetch.max.wait.ms`` unless new records come (`take_over`)."""
    call: Cancellable = field(default_factory=_NotStarted)


Reply = tuple[Inflight, BrokerFetchResponse | None, KraftError | None]


class InflightFetches:
    """The outstanding Fetch calls of one consumer, by broker id."""

    def __init__(self) -> None:
        self._calls: dict[int, Inflight] = {}
        self._fetching: set[TopicPartition] = set()
        self._replies: list[Reply] = []
        self._arrived = threading.Condition()

    def __len__(self) -> int:
        return len(self._calls)

    def busy(self, leader: int) -> bool:
        """A Fetch to ``leader`` is outstanding."""
        return leader in self._calls

    def fetching(self, tp: TopicPartition) -> bool:
        """An outstanding Fetch carries ``tp``."""
        return tp in self._fetching

    def start(self, entry: Inflight, send: Callable[[OnDone], Cancellable]) -> None:
        """Send ``entry``'s Fetch with ``send(on_done)`` (which may call ``on_done`` at once)."""
        with self._arrived:
            assert entry.leader not in self._calls, "one Fetch per broker"
            self._calls[entry.leader] = entry
            self._fetching.update(entry.positions)

        def on_done(response: BrokerFetchResponse | None, error: KraftError | None) -> None:
            with self._arrived:
                if self._calls.get(entry.leader) is entry:
                    self._replies.append((entry, response, error))
                    self._arrived.notify_all()

        entry.call = send(on_done)

    def wait(self, until_s: float) -> list[Reply]:
        """The answers that came, waiting until at least one has or the monotonic time
        ``until_s``; their calls are no longer outstanding."""
        with self._arrived:
            timeout_s = max(0.0, until_s - time.monotonic())
            self._arrived.wait_for(lambda: bool(self._replies), timeout_s)
            replies, self._replies = self._replies, []
            for entry, _, _ in replies:
                self._forget(entry)
        return replies

    def take_over(self, leader: int) -> Inflight | None:
        """Give up ``leader``'s outstanding Fetch if it is a long poll of caught-up partitions
        that has not answered yet, so that its partitions can go in a new Fetch with others of
        that broker; the given-up Fetch, or None (none outstanding, not caught up, or its
        answer came: it is taken by the next `wait`).

        NB: with one Fetch per broker, a partition drained from the buffer while its broker's
        Fetch (sent without it) waited for records of caught-up partitions waited
        ``fetch.max.wait.ms`` for that Fetch, though its own records were on the broker."""
        with self._arrived:
            entry = self._calls.get(leader)
            if entry is None or not entry.caught_up:
                return None
            if any(reply[0] is entry for reply in self._replies):
                return None
        self._give_up(entry)
        return entry

    def earliest_expiry_s(self) -> float:
        return min((e.expires_s for e in self._calls.values()), default=float("inf"))

    def expire(self, now_s: float) -> list[Inflight]:
        """Give up (cancel) the calls past their expiry; those calls."""
        gone = [e for e in self._calls.values() if e.expires_s <= now_s]
        for entry in gone:
            self._give_up(entry)
        return gone

    def close(self) -> None:
        """Give up every outstanding call."""
        for entry in list(self._calls.values()):
            self._give_up(entry)

    def _give_up(self, entry: Inflight) -> None:
        with self._arrived:
            self._forget(entry)
            self._replies = [r for r in self._replies if r[0] is not entry]
        entry.call.cancel()

    def _forget(self, entry: Inflight) -> None:
        if self._calls.get(entry.leader) is entry:
            del self._calls[entry.leader]
            self._fetching.difference_update(entry.positions)


__all__ = ["Inflight", "InflightFetches", "Reply"]
