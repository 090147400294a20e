"""`ControllerServer` on loopback inside one process: three voters on one event loop, driven
by the blocking `ControllerClient` from a worker thread (the real gRPC path, no processes)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from kraft.cluster.ports import free_ports
from kraft.controller.client import ControllerClient
from kraft.controller.node_config import ControllerNodeConfig
from kraft.controller.server import ControllerServer
from storage.errors import InvalidReplicationFactorError, TopicAlreadyExistsError

T = TypeVar("T")
pytestmark = pytest.mark.timeout(60)


def _configs(tmp_path: Path) -> list[ControllerNodeConfig]:
    voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(3))}
    return [
        ControllerNodeConfig(
            node_id=i,
            voters=voters,
            listen=voters[i],
            data_dir=tmp_path / f"c{i}",
            snapshot_interval_bytes=1024,
        )
        for i in voters
    ]


async def _until(predicate: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def test_follower_redirects_writes_replay_reaches_every_voter_and_restart_restores(
    tmp_path: Path,
) -> None:
    configs = _configs(tmp_path)

    async def main() -> None:
        servers = [ControllerServer(c, seed=c.node_id) for c in configs]
        for s in servers:
            await s.start()
        try:
            await _until(lambda: any(s.is_active for s in servers))
            active = next(s for s in servers if s.is_active)
            follower = next(s for s in servers if not s.is_active)

            def call(fn: Callable[[], T]) -> asyncio.Future[T]:
                return asyncio.ensure_future(asyncio.to_thread(fn))

            # Bootstrap at a follower only: NOT_CONTROLLER + current_leader -> redirect.
            client = ControllerClient(follower.config.listen, timeout=10)
            with pytest.raises(InvalidReplicationFactorError):  # no brokers registered yet
                await call(lambda: client.create_topic("t"))
            epoch = await call(lambda: client.register_broker(7))
            await call(lambda: client.heartbeat(7, epoch, current_metadata_offset=2**62))
            for i in range(20):
                await call(functools.partial(client.create_topic, f"t{i}", num_partitions=2))
            with pytest.raises(TopicAlreadyExistsError):
                await call(lambda: client.create_topic("t0"))
            described = await call(lambda: client.describe_topic("t3"))
            assert [p.leader for p in described.partitions] == [7, 7]
            quorum = await call(client.describe_quorum)
            assert quorum.leader_id == active.node_id
            assert [v.replica_id for v in quorum.voters] == [1, 2, 3]

            names = {f"t{i}" for i in range(20)}
            await _until(
                lambda: all(set(s.core.committed_image.topic_ids_by_name) == names for s in servers)
            )
            client.close()
        finally:
            for s in servers:
                await s.stop()

        # Restart every voter on the same directories: snapshot + log tail give it all back.
        again = [ControllerServer(c) for c in configs]
        for s in again:
            await s.start()
        try:
            await _until(lambda: any(s.is_active for s in again))
            await _until(
                lambda: all(set(s.core.committed_image.topic_ids_by_name) >= names for s in again)
            )
        finally:
            for s in again:
                await s.stop()

    asyncio.run(main())


def test_an_answer_resting_on_uncommitted_records_waits_for_them(tmp_path: Path) -> None:
    """The active controller decides against its pending image. A retried CreateTopics that
    reads a creation still in flight must not hear TOPIC_ALREADY_EXISTS if that creation is
    then lost with the leadership: both requests hear NOT_CONTROLLER (as in Kafka; found by
    ``kraft sim cluster``, seed 0x3d3)."""
    from kraft.controller.messages import CreatableTopic, CreateTopicsRequest
    from storage.errors import ErrorCode

    configs = _configs(tmp_path)

    async def main() -> None:
        servers = [ControllerServer(c, seed=c.node_id) for c in configs]
        for s in servers:
            await s.start()
        try:
            await _until(lambda: any(s.is_active for s in servers))
            active = next(s for s in servers if s.is_active)
            client = ControllerClient(active.config.listen, timeout=10)
            epoch = await asyncio.to_thread(client.register_broker, 7)
            await asyncio.to_thread(
                functools.partial(client.heartbeat, 7, epoch, current_metadata_offset=2**62)
            )
            client.close()
            for s in servers:  # the followers die: nothing the leader writes can commit now
                if s is not active:
                    await s.stop(graceful=False)

            request = CreateTopicsRequest(topics=(CreatableTopic(name="lost"),))
            first = asyncio.ensure_future(
                active.submit(request, lambda c: c.handle_create_topics_request)
            )
            second = asyncio.ensure_future(  # decided at once, against the pending creation
                active.submit(request, lambda c: c.handle_create_topics_request)
            )
            answers = await asyncio.wait_for(asyncio.gather(first, second), timeout=20)
            codes = [a.topics[0].error_code for a in answers]
            assert codes == [ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_CONTROLLER], codes
        finally:
            for s in servers:
                await s.stop(graceful=False)

    asyncio.run(main())


def test_batches_encoded_off_the_loop_are_proposed_in_the_order_they_were_decided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large batch is encoded in a worker thread (`OFF_LOOP_ENCODE_RECORDS`); a batch decided
    after it, whose encoding finishes first, must still land after it (the core counts on its
    order: a misplaced batch fails the replay and kills the controller)."""
    import threading

    import kraft.controller.server as server_module
    from kraft.controller.messages import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )
    from kraft.metadata.records import ConfigResourceType

    monkeypatch.setattr(server_module, "OFF_LOOP_ENCODE_RECORDS", 1)  # every batch threaded
    first_started = threading.Event()
    encode = server_module._encode_all

    def slow_first(records: tuple[object, ...]) -> list[bytes]:
        if not first_started.is_set():
            first_started.set()
            time.sleep(0.3)  # the first batch's encoding finishes last
        return encode(records)  # type: ignore[arg-type]

    monkeypatch.setattr(server_module, "_encode_all", slow_first)
    port = free_ports(1)[0]
    config = ControllerNodeConfig(
        node_id=1, voters={1: f"127.0.0.1:{port}"}, listen=f"127.0.0.1:{port}", data_dir=tmp_path
    )

    def retention(value: int) -> IncrementalAlterConfigsRequest:
        return IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=ConfigResourceType.BROKER,
                    resource_name="",
                    configs=(AlterableConfig(name="log.retention.ms", value=str(value)),),
                ),
            )
        )

    async def main() -> None:
        server = ControllerServer(config, seed=1)
        await server.start()
        try:
            await _until(lambda: server.is_active)
            submit = functools.partial(
                server.submit, handler=lambda c: c.handle_incremental_alter_configs_request
            )
            answers = await asyncio.gather(
                submit(retention(1000)), submit(retention(2000)), submit(retention(3000))
            )
            assert all(r.error_code.name == "NONE" for a in answers for r in a.responses)
            await _until(lambda: server.core.inflight_count == 0)
            assert server.supervisor.death is None, "a misplaced batch fails the replay"
            image = server.core.committed_image
            assert (
                image.dynamic_configs(ConfigResourceType.BROKER, "")["log.retention.ms"] == "3000"
            )
            assert server.is_active, "a misplaced batch would have failed the replay"
        finally:
            await server.stop()

    asyncio.run(main())
