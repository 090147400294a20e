"""`SimNetwork`: an in-memory network that delays, drops, duplicates, reorders and partitions.

Each message gets a random delay (so messages on one link reorder), may be lost or
delivered twice, and is dropped if any filter blocks its link at send or delivery time.
Filters follow Kafka's ``RaftEventSimulationTest``: `DropAll` isolates a node, `DropOutboundTo`
cuts the links from a node to some others (a one-way partition).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, final

from kraft.raft.messages import RaftMessage
from kraft.sim.scheduler import Scheduler
from kraft.types import NodeId


class NetworkFilter(Protocol):
    """Decides whether an outbound message of the node it is installed on may leave."""

    def allows(self, destination: NodeId) -> bool: ...


@dataclass(frozen=True, slots=True)
class DropAll:
    """Nothing in or out: the node is cut off (installed on the node, checked both ways)."""

    def allows(self, destination: NodeId) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class DropOutboundTo:
    """Drop what this node sends to ``destinations`` (a one-way partition)."""

    destinations: frozenset[NodeId]

    def allows(self, destination: NodeId) -> bool:
        return destination not in self.destinations


@dataclass(slots=True, kw_only=True)
class LinkProfile:
    delay_min_ms: int = 1
    delay_max_ms: int = 5
    loss: float = 0.0
    duplicate: float = 0.0

    def draw_delays_ms(self, rng: random.Random) -> tuple[int, ...]:
        """The delay of each copy of one message: none if it is lost, two if duplicated.

        NB: the draws (loss, duplicate, then one delay per copy) are what the simulators'
        seeds replay; keep their order.
        """
        if self.loss and rng.random() < self.loss:
            return ()
        if self.duplicate and rng.random() < self.duplicate:
            return (
                rng.randint(self.delay_min_ms, self.delay_max_ms),
                rng.randint(self.delay_min_ms, self.delay_max_ms),
            )
        return (rng.randint(self.delay_min_ms, self.delay_max_ms),)

    def lossy(self, loss: float, *, delay_factor: int) -> LinkProfile:
        """This link made worse: ``loss``, ``delay_factor`` times the delay, some duplication."""
        return LinkProfile(
            delay_min_ms=self.delay_min_ms,
            delay_max_ms=self.delay_max_ms * delay_factor,
            loss=loss,
            duplicate=max(self.duplicate, 0.05),
        )


@final
class SimNetwork:
    """Delivers messages through the scheduler to ``deliver(msg)``."""

    __slots__ = (
        "_deliver",
        "_filters",
        "_rng",
        "_scheduler",
        "messages_dropped",
        "messages_sent",
        "profile",
    )

    def __init__(
        self,
        *,
        scheduler: Scheduler,
        rng: random.Random,
        deliver: Callable[[RaftMessage], None],
        profile: LinkProfile | None = None,
    ) -> None:
        self._scheduler = scheduler
        self._rng = rng
        self._deliver = deliver
        self._filters: dict[NodeId, list[NetworkFilter]] = {}
        self.profile = profile or LinkProfile()
        self.messages_sent = 0
        self.messages_dropped = 0

    # --- faults -------------------------------------------------------------------------------

    def add_filter(self, node: NodeId, flt: NetworkFilter) -> None:
        self._filters.setdefault(node, []).append(flt)

    def isolate(self, node: NodeId) -> None:
        self.add_filter(node, DropAll())

    def partition(self, *groups: frozenset[NodeId]) -> None:
        """Symmetric partition: nodes talk only within their group."""
        everyone = frozenset().union(*groups)
        for group in groups:
            for node in group:
                self.add_filter(node, DropOutboundTo(everyone - group))

    def block_one_way(self, source: NodeId, destinations: frozenset[NodeId]) -> None:
        self.add_filter(source, DropOutboundTo(destinations))

    def heal(self) -> None:
        self._filters.clear()

    @property
    def is_healed(self) -> bool:
        return not self._filters

    # --- traffic ------------------------------------------------------------------------------

    def _passes(self, msg: RaftMessage) -> bool:
        return self._open(msg.source, msg.destination)

    def _open(self, source: NodeId, destination: NodeId) -> bool:
        filters = self._filters
        if not filters:
            return True
        for flt in filters.get(source, ()):
            if not flt.allows(destination):
                return False
        return not any(isinstance(f, DropAll) for f in filters.get(destination, ()))

    def connection_closed(
        self, source: NodeId, destination: NodeId, closed: Callable[[], None]
    ) -> None:
        """``source``'s process died: its kernel's FIN or RST reaches ``destination`` (one
        packet, so once, after one delay, if the path lets it through), and ``closed`` runs
        there."""
        delays = self.profile.draw_delays_ms(self._rng) if self._open(source, destination) else ()
        if delays:
            self._scheduler.after(
                delays[0], lambda: closed() if self._open(source, destination) else None
            )

    def send(self, msg: RaftMessage) -> None:
        self.messages_sent += 1
        delays = self.profile.draw_delays_ms(self._rng) if self._passes(msg) else ()
        if not delays:
            self.messages_dropped += 1
            return
        for delay in delays:
            self._scheduler.after(delay, lambda m=msg: self._arrive(m))  # type: ignore[misc]

    def _arrive(self, msg: RaftMessage) -> None:
        if not self._passes(msg):
            self.messages_dropped += 1
            return
        self._deliver(msg)


__all__ = ["DropAll", "DropOutboundTo", "LinkProfile", "NetworkFilter", "SimNetwork"]
