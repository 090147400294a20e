"""`ControllerDiscovery`: the broker's channel to the active controller follows the voter set.

KIP-853: a broker configured with ``controller.quorum.bootstrap.servers`` knows only where to
start. Its metadata observer (a `RaftServer` with ``dynamic_voters``) fetches the metadata log
and learns the voter set and each voter's endpoint from the latest VotersRecord, and the
leader from the Raft responses; the broker's `ControllerClient` (registration, heartbeats,
AlterPartition, forwarded admin requests, the quorum partitions' reports) must follow them,
including a voter that was not in its config, and stop dialling a voter that was removed.

`refresh` reads the observer's view (the voters with their endpoints and the leader id) and,
when it changed, hands the client the voters' addresses and the leader's (if known) as the
next target. The broker calls it on every leader change and before every registration and
heartbeat (at least every ``broker.heartbeat.interval.ms``), so a voter change reaches the
channel within one heartbeat of the observer reading it. A static ``controller.quorum.voters``
set never changes, and only the leader hint moves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import final

import structlog
from structlog.typing import FilteringBoundLogger

_log: FilteringBoundLogger = structlog.get_logger("replication.broker.controllers")


@final
class ControllerDiscovery:
    """Pushes the observer's voter endpoints and leader to the controller channel.

    Args:
        voter_endpoints: the voter set in use with each voter's ``host:port`` ("" if unknown).
        leader_id: the metadata quorum's leader as the observer knows it (None: unknown).
        apply: ``(addresses, leader address or None)``: re-point the channel
            (`ControllerClient.set_addresses`).
    """

    def __init__(
        self,
        voter_endpoints: Callable[[], Mapping[int, str]],
        leader_id: Callable[[], int | None],
        apply: Callable[[Sequence[str], str | None], None],
        *,
        logger: FilteringBoundLogger | None = None,
    ) -> None:
        self._voter_endpoints = voter_endpoints
        self._leader_id = leader_id
        self._apply = apply
        self._log = logger or _log
        self._seen: tuple[tuple[tuple[int, str], ...], str | None] | None = None

    def refresh(self) -> bool:
        """Re-point the channel if the voters or the leader changed; True if it did."""
        voters = tuple(sorted((int(v), e) for v, e in self._voter_endpoints().items() if e))
        if not voters:
            return False  # not started, or no endpoint known yet: keep the bootstrap list
        leader = self._leader_id()
        leader_address = dict(voters).get(leader) if leader is not None else None
        seen = (voters, leader_address)
        if seen == self._seen:
            return False
        old = self._seen
        self._seen = seen
        self._apply([e for _, e in voters], leader_address)
        if old is None or old[0] != voters:
            self._log.info(
                "controller_endpoints_changed",
                voters={v: e for v, e in voters},
                leader_id=leader,
            )
        return True


__all__ = ["ControllerDiscovery"]
