"""`RaftConfig`: the Raft timeouts and limits, under Kafka's ``controller.quorum.*`` keys.

The fetch timeout is Kafka's, 2 s: it covers several TCP retransmissions of a lost packet
(Linux's minimum retransmission timeout is 200 ms, then 400, 800 ms), a starved event loop and
a GC-like pause of the leader, so one leader holds through packet loss and a loaded machine
(issue 29: 250 ms changed leaders every 2-3 s at 5% loss). A *crashed* leader does not cost
that long: its host closes its connections, and the followers campaign at once in turn
(`Election.leader_connection_lost`), so a SIGKILLed leader is replaced in well under 0.2 s; a
leader that is cut off, paused or powered off is found by the fetch timeout. The election
timeout (300 ms, Kafka's is 1 s) only runs while no leader is known, so it stays short and a
cluster starts fast. The simulator and unit tests set their own values.

This module is the one place that converts the dotted keys to snake_case fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import final

from storage.config import int_fields_from_properties
from storage.config_registry import node_property_fields
from storage.errors import InvalidConfigError

_KEYS = node_property_fields("RaftConfig")
"""``controller.quorum.*`` key -> field, from the config registry (defaults and docs there)."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RaftConfig:
    """Raft timing and size limits. All times are milliseconds of the shell's clock."""

    election_timeout_ms: int = 300
    """Candidates and unattached voters wait a random time in [T, 2T) before campaigning."""
    fetch_timeout_ms: int = 2000
    """A follower that has not fetched from its leader for this long campaigns (KIP-595);
    a leader that has not been fetched from by a majority for 1.5x this long resigns
    (check-quorum)."""
    election_backoff_max_ms: int = 100
    """Upper bound of the random back-off after a lost election, and of the EndQuorumEpoch
    successor back-off."""
    append_linger_ms: int = 2
    """The leader gathers proposals this long into one batch (Kafka's accumulator)."""
    request_timeout_ms: int = 400
    """A request with no response after this long is sent again."""
    retry_backoff_ms: int = 20
    """Wait after an error response before asking again."""
    fetch_max_wait_ms: int = 60
    """The leader parks a caught-up fetch this long waiting for new data (long poll)."""
    high_watermark_linger_ms: int = 5
    """A caught-up fetch that only needs to learn a newer high watermark is parked this long
    for new data (0: answered at once, as Kafka does). The next entry then rides the fetch
    already waiting at the leader instead of waiting a round trip for a new one, which is
    what one-at-a-time commits wait on; an idle follower learns the high watermark at most
    this late."""
    fetch_max_bytes: int = 1 << 20
    fetch_snapshot_max_bytes: int = 1 << 20
    append_batch_bytes_max: int = 1 << 20
    """A lingering batch is closed early once its records reach this size."""
    apply_bytes_max: int = 1 << 20
    """At most this many committed bytes per `Ready` (at least one batch)."""
    log_cache_bytes_max: int = 32 << 20
    """Recent batches kept in memory to serve fetches and commits without storage reads."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or value < 0:
                raise InvalidConfigError(f"{field.name} must be a non-negative int, got {value!r}")
        if self.election_timeout_ms <= 0 or self.fetch_timeout_ms <= 0:
            raise InvalidConfigError("election and fetch timeouts must be positive")
        if self.request_timeout_ms <= 0:
            raise InvalidConfigError("controller.quorum.request.timeout.ms must be positive")
        if self.fetch_max_wait_ms >= min(self.request_timeout_ms, self.fetch_timeout_ms):
            raise InvalidConfigError(
                "controller.quorum.fetch.max.wait.ms must be below the request and fetch timeouts"
            )
        if self.fetch_snapshot_max_bytes <= 0 or self.fetch_max_bytes <= 0:
            raise InvalidConfigError("fetch sizes must be positive")

    @property
    def check_quorum_timeout_ms(self) -> int:
        """KIP-595: a leader resigns when no majority has fetched for 1.5x the fetch timeout."""
        return self.fetch_timeout_ms * 3 // 2

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> RaftConfig:
        """Build a config from Kafka-style properties; keys outside ``controller.quorum.*``
        are ignored, as are the ones this class does not know (``controller.quorum.voters``).

        Raises:
            InvalidConfigError: a value is not a non-negative integer or breaks a constraint.
        """
        return cls(**int_fields_from_properties(properties, _KEYS))

    def to_properties(self) -> dict[str, str]:
        """The config as Kafka-style properties (the inverse of `from_properties`)."""
        return {key: str(getattr(self, name)) for key, name in _KEYS.items()}


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class UnsafeOptions:
    """Deliberate protocol bugs, for proving that the simulator's checkers can fail.

    Never set these outside tests.
    """

    commit_without_majority: bool = False
    """The leader advances its high watermark to its own log end, ignoring the voters."""
    concurrent_voter_changes: bool = False
    """KIP-853 AddVoter/RemoveVoter skip the one-uncommitted-change-at-a-time rule."""


__all__ = ["RaftConfig", "UnsafeOptions"]
