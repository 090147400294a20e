"""Fail fast when a client can reach none of its bootstrap addresses.

A connection refused is a definite answer, known in milliseconds: nothing listens there. A
client that has never heard from any broker or controller, and whose every bootstrap address
refuses its connections for `REFUSED_GRACE_S` (long enough to ride over a node that is
starting and has not bound its port yet), gives up with a `NetworkError` naming the addresses
instead of retrying until its deadline (10 s for the CLI, 60 s for ``max.block.ms``) and then
reporting something else, such as an unknown topic. Once any address has answered, refusals
are the ordinary failures of a cluster in motion (a broker restarting) and are retried as
before.

`BootstrapRefusals` only keeps score; time comes in as ``now`` (monotonic seconds).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Final

from storage.errors import KraftError, NetworkError

REFUSED_GRACE_S: Final = 1.0
"""How long every bootstrap address must have refused before the client gives up."""

REFUSED_MARKER: Final = "refused the connection"
"""In the message of the error `BootstrapRefusals.verdict` returns (the CLI keeps it whole)."""


def is_refusal(error: KraftError) -> bool:
    """Whether ``error`` is a refused connection (gRPC's detail says so)."""
    return isinstance(error, NetworkError) and "Connection refused" in error.message


class BootstrapRefusals:
    """Refused connections per bootstrap address, until any address answers.

    Args:
        addresses: the bootstrap addresses.
        peer: what they are, for the message (``broker``, ``controller``).
        setting: the setting they came from, for the message (``bootstrap.servers``).
    """

    def __init__(
        self, addresses: Sequence[str], *, peer: str, setting: str = "bootstrap.servers"
    ) -> None:
        self._addresses = tuple(dict.fromkeys(addresses))
        self._peer = peer
        self._setting = setting
        self._lock = threading.Lock()
        self._answered = False
        self._refused_since: dict[str, float] = {}

    @property
    def has_answered(self) -> bool:
        """Whether any address ever answered."""
        return self._answered

    def answered(self) -> None:
        """An address answered: from now on refusals are retried like any failure."""
        if not self._answered:
            with self._lock:
                self._answered = True
                self._refused_since.clear()

    def failed(self, address: str, error: KraftError, now: float) -> None:
        """A call to ``address`` failed with ``error``."""
        if self._answered or address not in self._addresses:
            return
        with self._lock:
            if is_refusal(error):
                self._refused_since.setdefault(address, now)
            else:  # it may be there, only slow: not a definite answer
                self._refused_since.pop(address, None)

    def verdict(self, now: float) -> NetworkError | None:
        """The error to give up with, or None to go on retrying."""
        with self._lock:
            if self._answered or len(self._refused_since) < len(self._addresses):
                return None
            if now - min(self._refused_since.values()) < REFUSED_GRACE_S:
                return None
        where = ", ".join(self._addresses)
        every = "every bootstrap address" if len(self._addresses) > 1 else "the bootstrap address"
        return NetworkError(
            f"{every} {REFUSED_MARKER}: nothing listens at {where} ({self._peer}s expected); "
            f"check {self._setting} and that the cluster runs"
        )


__all__ = ["REFUSED_GRACE_S", "REFUSED_MARKER", "BootstrapRefusals", "is_refusal"]
