"""The producer's Produce requests awaiting an answer (Kafka's ``InFlightRequests``), and the
rules for a *stalled* one (see `replication.clients.producer`, "stalled" and "abandoned").

Not thread-safe: the producer calls it under its lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from replication.clients.batch import ProducerBatch
from replication.clients.metadata import ClusterSnapshot
from replication.clients.network import Cancellable


@dataclass(slots=True, kw_only=True, eq=False)
class InFlightRequest:
    """One Produce in flight (acks 1 or all)."""

    node: int
    address: str
    batches: list[ProducerBatch]
    sent_ms: int
    call: Cancellable | None = None
    settled: bool = False
    """Answered or abandoned: whatever arrives later for it is ignored."""


@final
class InFlightRequests:
    """Produce requests per broker: counted from the drain that makes them (so the limit
    ``max.in.flight.requests.per.connection`` holds at once), tracked once sent with acks."""

    __slots__ = ("_per_node", "_requests")

    def __init__(self) -> None:
        self._requests: set[InFlightRequest] = set()
        self._per_node: dict[int, int] = {}

    def __bool__(self) -> bool:
        return bool(self._requests)

    def count(self, node: int) -> int:
        return self._per_node.get(node, 0)

    def drained(self, node: int) -> None:
        """A request to ``node`` is about to be sent."""
        self._per_node[node] = self._per_node.get(node, 0) + 1

    def track(self, request: InFlightRequest) -> None:
        """Await the answer to ``request`` (counted by `drained` already)."""
        self._requests.add(request)

    def done_untracked(self, node: int) -> None:
        """An acks=0 request to ``node`` went out: it no longer counts."""
        self._per_node[node] -= 1

    def settle(self, request: InFlightRequest) -> bool:
        """``request`` is answered or abandoned; False if it already was (ignore it)."""
        if request.settled:
            return False
        request.settled = True
        self._requests.discard(request)
        self._per_node[request.node] -= 1
        return True

    def stalled(self, now_ms: int, stall_ms: int) -> dict[int, str]:
        """Broker id -> address of every broker with a request unanswered for ``stall_ms``."""
        return {r.node: r.address for r in self._requests if now_ms - r.sent_ms >= stall_ms}

    def abandon_moved(self, stalled: set[int], snapshot: ClusterSnapshot) -> list[InFlightRequest]:
        """Settle and return the requests to ``stalled`` brokers that carry a partition
        ``snapshot`` says another broker now leads (their batches go to the new leader)."""
        abandoned = []
        for request in list(self._requests):
            if request.node not in stalled:
                continue
            if any(
                (leader := snapshot.leader_for(b.tp)) is not None and leader != request.node
                for b in request.batches
            ):
                self.settle(request)
                abandoned.append(request)
        return abandoned


__all__ = ["InFlightRequest", "InFlightRequests"]
