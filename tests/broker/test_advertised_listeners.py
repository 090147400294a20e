"""``advertised.listeners``: what a broker registers for clients and other brokers. It defaults
to the listener; the meta-address ``0.0.0.0`` may be listened on but never advertised (Kafka
refuses it too), so a broker never hands clients an address they cannot connect to."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kraft.metadata.records import Endpoint
from replication.broker.config import BrokerNodeConfig
from replication.broker.server import BrokerServer
from storage.errors import InvalidConfigError


def _props(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "node.id": "101",
        "controller.quorum.voters": "1@127.0.0.1:1",
        "listeners": "PLAINTEXT://127.0.0.1:9192",
        "log.dirs": str(tmp_path / "b"),
        **extra,
    }


def test_advertised_listeners_defaults_to_the_listener(tmp_path: Path) -> None:
    config = BrokerNodeConfig.from_properties(_props(tmp_path))
    assert config.advertised_listener is None
    assert config.advertised_address == "127.0.0.1:9192"


def test_advertised_listeners_is_read_and_round_trips(tmp_path: Path) -> None:
    props = _props(
        tmp_path,
        listeners="PLAINTEXT://0.0.0.0:9192",
        **{"advertised.listeners": "PLAINTEXT://broker-1.example:9192"},
    )
    config = BrokerNodeConfig.from_properties(props)
    assert (config.listen, config.advertised_address) == ("0.0.0.0:9192", "broker-1.example:9192")
    assert BrokerNodeConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize(
    "extra",
    [
        {"listeners": "PLAINTEXT://0.0.0.0:9192"},  # advertised by default
        {"listeners": "PLAINTEXT://[::]:9192"},
        {"advertised.listeners": "PLAINTEXT://0.0.0.0:9192"},
    ],
)
def test_the_meta_address_is_refused_as_advertised_with_a_clear_error(
    tmp_path: Path, extra: dict[str, str]
) -> None:
    with pytest.raises(InvalidConfigError, match=r"advertised\.listeners=PLAINTEXT://<host"):
        BrokerNodeConfig.from_properties(_props(tmp_path, **extra))


def test_an_advertised_listener_needs_a_port(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match=r"advertised\.listeners"):
        BrokerNodeConfig.from_properties(
            _props(tmp_path, **{"advertised.listeners": "PLAINTEXT://broker-1:0"})
        )


class _FakeControllers:
    def __init__(self) -> None:
        self.listeners: Sequence[Endpoint] = ()

    def register_broker(self, node_id: int, **kwargs: Any) -> int:
        self.listeners = kwargs["listeners"]
        return 3

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, ("127.0.0.1", 9192)),
        (
            {"listeners": "PLAINTEXT://0.0.0.0:9192", "advertised.listeners": "PLAINTEXT://b1:9"},
            ("b1", 9),
        ),
    ],
)
def test_the_broker_registers_its_advertised_address(
    tmp_path: Path, extra: dict[str, str], expected: tuple[str, int]
) -> None:
    async def run() -> None:
        server = BrokerServer(BrokerNodeConfig.from_properties(_props(tmp_path, **extra)))
        fake = _FakeControllers()
        server.lifecycle.client = fake  # type: ignore[assignment]
        try:
            await server.lifecycle.register()
        finally:
            await server.close_unstarted()
        (listener,) = fake.listeners
        assert (listener.host, listener.port) == expected

    asyncio.run(run())
