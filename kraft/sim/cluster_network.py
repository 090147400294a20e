"""`EnvelopeNetwork`: the simulator's network for any message type (brokers, clients).

`SimNetwork` carries Raft messages, which name their own source and destination; the broker
simulation sends many message types, so it wraps each in an `Envelope`. The fault model is
the same: a random delay per message (so messages on a link reorder), loss, duplication,
symmetric and one-way partitions and isolated nodes, all drawn from one seeded generator.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import final

from kraft.sim.network import LinkProfile
from kraft.sim.scheduler import Scheduler


@dataclass(frozen=True, slots=True)
class Envelope:
    """One message in flight from ``source`` to ``destination``."""

    source: int
    destination: int
    payload: object


@final
class EnvelopeNetwork:
    """Delivers envelopes through the scheduler to ``deliver(envelope)``."""

    __slots__ = (
        "_blocked",
        "_deliver",
        "_isolated",
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
        deliver: Callable[[Envelope], None],
        profile: LinkProfile | None = None,
    ) -> None:
        self._scheduler = scheduler
        self._rng = rng
        self._deliver = deliver
        self._isolated: set[int] = set()
        self._blocked: set[tuple[int, int]] = set()
        self.profile = profile or LinkProfile()
        self.messages_sent = 0
        self.messages_dropped = 0

    # --- faults -------------------------------------------------------------------------------

    def isolate(self, node: int) -> None:
        """Nothing in or out of ``node``."""
        self._isolated.add(node)

    def partition(self, *groups: frozenset[int]) -> None:
        """Symmetric partition: nodes talk only within their group (others are unaffected)."""
        for group in groups:
            for other in groups:
                if other is not group:
                    self._blocked.update((a, b) for a in group for b in other)

    def block_one_way(self, source: int, destinations: frozenset[int]) -> None:
        self._blocked.update((source, d) for d in destinations)

    def heal(self) -> None:
        self._isolated.clear()
        self._blocked.clear()

    @property
    def is_healed(self) -> bool:
        return not self._isolated and not self._blocked

    def passes(self, source: int, destination: int) -> bool:
        return (
            source not in self._isolated
            and destination not in self._isolated
            and (source, destination) not in self._blocked
        )

    # --- traffic ------------------------------------------------------------------------------

    def send(self, source: int, destination: int, payload: object) -> None:
        self.messages_sent += 1
        delays = self.profile.draw_delays_ms(self._rng) if self.passes(source, destination) else ()
        if not delays:
            self.messages_dropped += 1
            return
        envelope = Envelope(source, destination, payload)
        for delay in delays:
            self._scheduler.after(delay, lambda e=envelope: self._arrive(e))  # type: ignore[misc]

    def _arrive(self, envelope: Envelope) -> None:
        if not self.passes(envelope.source, envelope.destination):
            self.messages_dropped += 1
            return
        self._deliver(envelope)


__all__ = ["Envelope", "EnvelopeNetwork"]
