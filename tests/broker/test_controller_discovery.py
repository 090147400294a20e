"""KIP-853 on the broker: its controller channel follows the voter set and leader the metadata
observer reads in the log (`replication.broker.lifecycle.controllers`), and a broker may bootstrap
from ``controller.quorum.bootstrap.servers`` instead of a static voter list."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kraft.controller.client import ControllerClient
from replication.broker.config import BrokerNodeConfig
from replication.broker.lifecycle.controllers import ControllerDiscovery
from storage.errors import InvalidConfigError


class _View:
    def __init__(self, voters: dict[int, str], leader: int | None) -> None:
        self.voters = voters
        self.leader = leader
        self.applied: list[tuple[list[str], str | None]] = []

    def discovery(self) -> ControllerDiscovery:
        def apply(addresses: Sequence[str], leader: str | None) -> None:
            self.applied.append((list(addresses), leader))

        return ControllerDiscovery(lambda: self.voters, lambda: self.leader, apply)


def test_the_channel_follows_a_voter_absent_from_the_config_and_drops_a_removed_one() -> None:
    view = _View({1: "h:1"}, leader=1)
    discovery = view.discovery()
    assert discovery.refresh()
    assert view.applied[-1] == (["h:1"], "h:1")
    view.voters = {1: "h:1", 4: "h:4"}  # VotersRecord: 4 added
    assert discovery.refresh()
    view.voters, view.leader = {4: "h:4"}, 4  # 1 removed, 4 leads
    assert discovery.refresh()
    assert view.applied[-1] == (["h:4"], "h:4")
    assert not discovery.refresh()  # nothing changed: the channel is left alone


def test_a_leader_without_a_known_endpoint_keeps_the_voters_without_a_hint() -> None:
    view = _View({2: "h:2", 3: "h:3"}, leader=7)
    discovery = view.discovery()
    assert discovery.refresh()
    assert view.applied[-1] == (["h:2", "h:3"], None)


def test_no_known_endpoint_keeps_the_bootstrap_list() -> None:
    view = _View({}, leader=None)
    assert not view.discovery().refresh()
    view.voters = {1: ""}
    assert not view.discovery().refresh()
    assert view.applied == []


def test_the_controller_client_targets_the_new_leader_and_forgets_a_removed_one() -> None:
    with ControllerClient("h:1,h:2") as client:
        client.set_addresses(["h:3", "h:4"], leader="h:4")
        assert client.addresses == ["h:3", "h:4"]
        assert client._target() == "h:4"
        client.set_addresses(["h:3"])  # the leader h:4 was removed: round-robin the others
        assert client._target() == "h:3"


def _props(**extra: str) -> dict[str, str]:
    return {
        "node.id": "101",
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": "/tmp/kraft-test-unused",
        **extra,
    }


def test_a_broker_may_bootstrap_from_the_controllers_and_then_follows_the_log() -> None:
    config = BrokerNodeConfig.from_properties(
        _props(**{"controller.quorum.bootstrap.servers": "1@127.0.0.1:9091"})
    )
    assert config.dynamic_voters
    assert dict(config.voters) == {1: "127.0.0.1:9091"}
    again = BrokerNodeConfig.from_properties(config.to_properties())
    assert again.dynamic_voters and dict(again.voters) == dict(config.voters)
    static = BrokerNodeConfig.from_properties(
        _props(**{"controller.quorum.voters": "1@127.0.0.1:9091"})
    )
    assert not static.dynamic_voters


def test_a_broker_refuses_both_a_static_and_a_dynamic_voter_list() -> None:
    with pytest.raises(InvalidConfigError, match="not both"):
        BrokerNodeConfig.from_properties(
            _props(
                **{
                    "controller.quorum.voters": "1@127.0.0.1:9091",
                    "controller.quorum.bootstrap.servers": "1@127.0.0.1:9091",
                }
            )
        )
