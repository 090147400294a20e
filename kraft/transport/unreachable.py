"""Fail fast when a client can reach none of its bootstrap addresses.

A connection refused is a definite answer, known in milliseconds: nothing listens there; so
is a port that answers with something other than HTTP/2 (gRPC's "Failed parsing HTTP/2": an
HTTP server, a metrics endpoint), and a kraft broker's Kafka listener, which answers a gRPC
client with `KAFKA_LISTENER_REPLY` so that the error can name it. A client that has never
heard from any broker or controller, and whose every bootstrap address fails in one of these
ways for `REFUSED_GRACE_S` (long enough to ride over a node that is starting and has not
bound its port yet), gives up with a `NetworkError` naming the addresses
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

KAFKA_LISTENER_REPLY: Final = (
    b"kraft: this port speaks the Kafka protocol; kraft's own clients connect to the broker's "
    b"gRPC port (`kraft cluster env` prints KRAFT_BOOTSTRAP)\r\n"
)
"""What a kraft Kafka listener answers a client of another protocol before it closes. A gRPC
client reads its first bytes as an HTTP/2 frame header whose type byte is the ``f`` of
``kraft`` (`KAFKA_LISTENER_FRAME_TYPE`), and names that type in its error; a person with
``nc`` reads the line."""

KAFKA_LISTENER_FRAME_TYPE: Final = KAFKA_LISTENER_REPLY[3]

REFUSED_MARKER: Final = "no bootstrap address answers as a kraft"
"""Starts the message of the error `BootstrapRefusals.verdict` returns (the CLI keeps it)."""


def definite_failure(error: KraftError) -> str | None:
    """Why ``error`` says that nothing usable is at that address, or None (it may be only
    slow, or not up yet)."""
    if not isinstance(error, NetworkError):
        return None
    if "Connection refused" in error.message:
        return "refused the connection (nothing listens there)"
    if f"got frame type {KAFKA_LISTENER_FRAME_TYPE})" in error.message:
        return (
            "is a kraft broker's Kafka listener (for Kafka clients: KAFKA_BOOTSTRAP_SERVERS); "
            "kraft's clients take the gRPC port, KRAFT_BOOTSTRAP in `kraft cluster env`"
        )
    if "Failed parsing HTTP/2" in error.message:
        return "answered, but not in gRPC (another service's port: HTTP, a Kafka listener?)"
    return None


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
        self._reasons: dict[str, str] = {}

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
        reason = definite_failure(error)
        with self._lock:
            if reason is not None:
                self._refused_since.setdefault(address, now)
                self._reasons[address] = reason
            else:  # it may be there, only slow: not a definite answer
                self._refused_since.pop(address, None)

    def verdict(self, now: float) -> NetworkError | None:
        """The error to give up with, or None to go on retrying."""
        with self._lock:
            if self._answered or len(self._refused_since) < len(self._addresses):
                return None
            if now - min(self._refused_since.values()) < REFUSED_GRACE_S:
                return None
            why = "; ".join(f"{a} {self._reasons[a]}" for a in self._addresses)
        return NetworkError(
            f"{REFUSED_MARKER} {self._peer}: {why}; check {self._setting} and that the cluster runs"
        )


__all__ = [
    "KAFKA_LISTENER_FRAME_TYPE",
    "KAFKA_LISTENER_REPLY",
    "REFUSED_GRACE_S",
    "REFUSED_MARKER",
    "BootstrapRefusals",
    "definite_failure",
]
