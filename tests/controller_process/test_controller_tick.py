"""The controller's tick task has no fixed period: it sleeps until the core's deadline or an
input. These tests raise the sleep cap (`MAX_TICK_SLEEP_MS`) to a minute, so each would fail
if the deadline or the wake it relies on were missing (the work would wait for the cap)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import kraft.controller.server as controller_server
from kraft.cluster.ports import free_ports
from kraft.controller import (
    AlterableConfig,
    AlterConfigsResource,
    BrokerHeartbeatRequest,
    ControllerConfig,
    CreatableTopic,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
    RegisterBrokerRequest,
)
from kraft.controller.node_config import ControllerNodeConfig
from kraft.controller.server import ControllerServer
from kraft.metadata import NO_LEADER, BrokerState, ConfigResourceType
from kraft.metadata.image import PartitionRegistration
from kraft.types import TopicPartition
from storage.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)

CAP_MS = 60_000
"""The sleep cap under test: far above every deadline the tests wait for."""


@pytest.fixture(autouse=True)
def _long_sleep_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(controller_server, "MAX_TICK_SLEEP_MS", CAP_MS)


def _config(tmp_path: Path, session_timeout_ms: int) -> ControllerNodeConfig:
    (port,) = free_ports(1)
    address = f"127.0.0.1:{port}"
    return ControllerNodeConfig(
        node_id=1,
        voters={1: address},
        listen=address,
        data_dir=tmp_path / "c1",
        controller=ControllerConfig(broker_session_timeout_ms=session_timeout_ms),
    )


async def _until(predicate: Callable[[], bool], timeout: float) -> float:
    """Wait for ``predicate``; the seconds it took."""
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, "condition not met in time"
        await asyncio.sleep(0.01)
    return time.monotonic() - started


async def _register_and_unfence(server: ControllerServer, *broker_ids: int) -> None:
    for b in broker_ids:
        await server.submit(
            RegisterBrokerRequest(broker_id=b, incarnation_id=f"inc-{b}"),
            lambda c: c.handle_register_broker_request,
        )
    for b in broker_ids:
        await _heartbeat(server, b)


async def _heartbeat(server: ControllerServer, broker_id: int, *, want_fence: bool = False) -> bool:
    """One heartbeat that has seen all metadata; whether the broker is fenced after it."""
    registration = server.core.pending_image.broker(broker_id)
    assert registration is not None
    response = await server.submit(
        BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=registration.broker_epoch,
            current_metadata_offset=2**62,
            want_fence=want_fence,
        ),
        lambda c: c.handle_broker_heartbeat_request,
    )
    assert response.error_code is ErrorCode.NONE
    return response.is_fenced


def _partition(server: ControllerServer) -> PartitionRegistration:
    p = server.core.committed_image.partition_by_name(TopicPartition("t", 0))
    assert p is not None
    return p


def _state(server: ControllerServer, broker_id: int) -> BrokerState:
    registration = server.core.committed_image.broker(broker_id)
    assert registration is not None
    return registration.state


def test_a_silent_broker_is_fenced_at_its_session_deadline_not_at_the_sleep_cap(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        server = ControllerServer(_config(tmp_path, session_timeout_ms=500), seed=1)
        await server.start()
        try:
            await _until(lambda: server.is_active, timeout=20)
            await _register_and_unfence(server, 1)
            assert _state(server, 1) is BrokerState.UNFENCED
            took = await _until(lambda: _state(server, 1) is BrokerState.FENCED, timeout=20)
            assert took < 10  # the session deadline (0.5 s) plus a busy machine's slack
        finally:
            await server.stop()

    asyncio.run(main())


def test_enabling_unclean_election_wakes_the_tick_that_elects_the_offline_partition(
    tmp_path: Path,
) -> None:
    """IncrementalAlterConfigs elects nobody itself; the tick after it does. No session
    deadline comes within the test (a one-minute session timeout), so only the wake from the
    decided request can get the tick to run."""

    async def main() -> None:
        server = ControllerServer(_config(tmp_path, session_timeout_ms=CAP_MS), seed=1)
        await server.start()
        try:
            await _until(lambda: server.is_active, timeout=20)
            await _register_and_unfence(server, 1, 2)
            created = await server.submit(
                CreateTopicsRequest(topics=(CreatableTopic(name="t", assignments=((1, 2),)),)),
                lambda c: c.handle_create_topics_request,
            )
            assert created.topics[0].error_code is ErrorCode.NONE
            assert await _heartbeat(server, 2, want_fence=True)  # out of the ISR
            assert await _heartbeat(server, 1, want_fence=True)  # the last ISR member
            assert not await _heartbeat(server, 2)  # back, but out of sync
            # KIP-966 (ELR on by default): the fenced last member waits in the ELR.
            await _until(lambda: (_partition(server).isr, _partition(server).elr) == ((), (1,)), 20)
            assert _partition(server).leader == NO_LEADER
            altered = await server.submit(
                IncrementalAlterConfigsRequest(
                    resources=(
                        AlterConfigsResource(
                            resource_type=ConfigResourceType.TOPIC,
                            resource_name="t",
                            configs=(
                                AlterableConfig(
                                    name="unclean.leader.election.enable", value="true"
                                ),
                            ),
                        ),
                    )
                ),
                lambda c: c.handle_incremental_alter_configs_request,
            )
            assert altered.responses[0].error_code is ErrorCode.NONE
            took = await _until(lambda: _partition(server).leader == 2, timeout=20)
            assert took < 10
        finally:
            await server.stop()

    asyncio.run(main())


def test_a_new_active_controller_fences_silent_brokers_without_any_request(
    tmp_path: Path,
) -> None:
    """Becoming active gives every broker a fresh session and wakes the tick task, which
    slept without a deadline while the node was a standby."""
    config = _config(tmp_path, session_timeout_ms=500)

    async def main() -> None:
        first = ControllerServer(config, seed=1)
        await first.start()
        try:
            await _until(lambda: first.is_active, timeout=20)
            await _register_and_unfence(first, 1)
        finally:
            await first.stop(graceful=False)
        again = ControllerServer(config, seed=2)
        await again.start()
        try:
            await _until(lambda: again.is_active, timeout=20)
            took = await _until(lambda: _state(again, 1) is BrokerState.FENCED, timeout=20)
            assert took < 10
        finally:
            await again.stop()

    asyncio.run(main())
