"""`BrokerNetwork.call_any` when every broker it knows is *suspect* (issue 12's stuck
producer: after leader kills, each restarted broker stays suspect until a call to it succeeds,
so once the last unsuspected leader died every metadata refresh went to one dead broker)."""

from __future__ import annotations

from typing import Any

import pytest

from replication.clients.network import BrokerNetwork
from storage.errors import NetworkError

pytestmark = pytest.mark.timeout(30)

ADDRESSES = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]


class _FakeCalls(BrokerNetwork):
    """No gRPC: ``dead`` addresses refuse, the others answer ``"ok"``; every call is noted."""

    def __init__(self, dead: set[str] | None = None) -> None:
        super().__init__(",".join(ADDRESSES), request_timeout_s=0.2)
        self.dead = dead
        self.calls: list[str] = []

    def call(
        self,
        address: str,
        method: str,
        request: Any,
        response_cls: Any,
        timeout_s: float | None = None,
    ) -> Any:
        self.calls.append(address)
        if self.dead is None:
            self.dead = {address}  # the first broker asked is the one that died
        if address in self.dead:
            self._note_outcome(address, NetworkError(f"{address}: connection refused"))
            raise NetworkError(f"{address}: connection refused")
        self._note_outcome(address, None)
        return "ok"


def test_when_every_broker_is_suspect_call_any_tries_each_in_turn_not_one_dead_one() -> None:
    network = _FakeCalls()
    for address in ADDRESSES:
        network.mark_suspect(address)  # killed and restarted earlier, never asked since
    assert network.call_any("Metadata", None, object, timeout_s=2.0) == "ok"
    assert network.calls[0] in network.dead  # type: ignore[operator]
    assert len(set(network.calls)) >= 2
    assert network.calls[-1] not in network.dead  # type: ignore[operator]


def test_unsuspected_brokers_are_still_asked_before_suspects() -> None:
    network = _FakeCalls(dead=set())
    network.mark_suspect(ADDRESSES[0])
    network.mark_suspect(ADDRESSES[1])
    for _ in range(3):
        assert network.call_any("Metadata", None, object, timeout_s=1.0) == "ok"
    assert network.calls == [ADDRESSES[2]] * 3
