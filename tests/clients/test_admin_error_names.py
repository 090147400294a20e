"""`AdminClient` talks to brokers (which forward to the controller): its errors name the
address it failed to reach as a broker, not as a controller."""

from __future__ import annotations

import socket

import pytest

from kraft.controller.client import ControllerClient
from replication.clients import AdminClient
from storage.errors import KraftError


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_broker_is_named_a_broker_in_admin_errors() -> None:
    address = f"127.0.0.1:{_unused_port()}"
    with (
        AdminClient(address, timeout=0.5, request_timeout=0.2) as admin,
        pytest.raises(KraftError) as raised,
    ):
        admin.list_topics()
    assert f"broker {address}" in raised.value.message
    assert "controller 127.0.0.1" not in raised.value.message


def test_a_controller_client_still_names_controllers() -> None:
    address = f"127.0.0.1:{_unused_port()}"
    with (
        ControllerClient(address, timeout=0.5, request_timeout=0.2) as client,
        pytest.raises(KraftError) as raised,
    ):
        client.describe_quorum()
    assert f"controller {address}" in raised.value.message
