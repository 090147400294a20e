"""Hostile admin requests against a real `ControllerServer` on loopback, in process
(issue 10, finding 4): refused at once, and the active controller keeps leading."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import grpc
import pytest

from kraft._generated import controller_pb2, controller_pb2_grpc
from kraft.cluster.ports import free_ports
from kraft.controller.client import ControllerClient
from kraft.controller.messages import CreatePartitionsRequest, CreatePartitionsTopic
from kraft.controller.node_config import ControllerNodeConfig
from kraft.controller.server import OFF_LOOP_DECODE_BYTES, ControllerServer
from kraft.metadata.records import Endpoint
from kraft.transport.channels import client_channel_options
from storage.errors import ErrorCode

T = TypeVar("T")
pytestmark = pytest.mark.timeout(90)

CAUGHT_UP = 2**62


def _configs(tmp_path: Path, count: int, **kwargs: int) -> list[ControllerNodeConfig]:
    voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(count))}
    return [
        ControllerNodeConfig(
            node_id=i, voters=voters, listen=voters[i], data_dir=tmp_path / f"c{i}", **kwargs
        )
        for i in voters
    ]


async def _until(predicate: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def _call(fn: Callable[[], T]) -> asyncio.Future[T]:
    return asyncio.ensure_future(asyncio.to_thread(fn))


def test_create_partitions_of_2_pow_31_answers_at_once_and_the_controller_keeps_leading(
    tmp_path: Path,
) -> None:
    configs = _configs(tmp_path, 3)

    async def main() -> None:
        servers = [ControllerServer(c, seed=c.node_id) for c in configs]
        for s in servers:
            await s.start()
        try:
            await _until(lambda: any(s.is_active for s in servers))
            active = next(s for s in servers if s.is_active)
            epoch = active.raft.epoch
            client = ControllerClient(active.config.listen, timeout=10)
            broker_epoch = await _call(lambda: client.register_broker(7))
            await _call(
                lambda: client.heartbeat(7, broker_epoch, current_metadata_offset=CAUGHT_UP)
            )
            await _call(lambda: client.create_topic("t", num_partitions=1))

            hostile = CreatePartitionsRequest(
                topics=(CreatePartitionsTopic(name="t", count=2**31 - 1),), validate_only=True
            )
            started = time.monotonic()
            response = await _call(lambda: client.send(hostile))
            assert time.monotonic() - started < 5
            assert response.results[0].error_code is ErrorCode.POLICY_VIOLATION

            # Still the active controller of the same epoch (no failover), still answering
            # heartbeats: the broker stays unfenced.
            beat = await _call(
                lambda: client.heartbeat(7, broker_epoch, current_metadata_offset=CAUGHT_UP)
            )
            assert not beat.is_fenced
            assert active.is_active and active.raft.epoch == epoch
            assert all(s.raft.epoch == epoch for s in servers)
            client.close()
        finally:
            for s in servers:
                await s.stop()

    asyncio.run(main())


def test_an_oversized_request_is_resource_exhausted_and_the_server_carries_on(
    tmp_path: Path,
) -> None:
    """socket.request.max.bytes (here 1 MiB) is enforced by gRPC before decoding; a large
    request under it is decoded off the loop and a long config value is INVALID_CONFIG."""
    [config] = _configs(tmp_path, 1, socket_request_max_bytes=1 << 20)

    async def main() -> None:
        server = ControllerServer(config, seed=1)
        await server.start()
        channel = grpc.aio.insecure_channel(config.listen, options=client_channel_options())
        stub = controller_pb2_grpc.ControllerStub(channel)
        try:
            await _until(lambda: server.is_active)
            client = ControllerClient(config.listen, timeout=10)
            listener = Endpoint(name="PLAINTEXT", host="127.0.0.1", port=9092)
            await _call(lambda: client.register_broker(7, listeners=(listener,)))

            def create(value_bytes: int) -> controller_pb2.CreateTopicsRequest:
                topic = controller_pb2.CreatableTopic(
                    name="t", num_partitions=1, replication_factor=1
                )
                topic.configs["retention.ms"] = "1" * value_bytes
                return controller_pb2.CreateTopicsRequest(topics=[topic])

            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.CreateTopics(create(2 << 20), timeout=10)
            assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED

            # Under the limit but large: decoded in a worker thread, refused by the core.
            answer = await stub.CreateTopics(create(OFF_LOOP_DECODE_BYTES * 2), timeout=10)
            assert answer.topics[0].error_code == ErrorCode.INVALID_CONFIG
            assert len(answer.topics[0].error_message) < 200

            # The server carries on; DescribeCluster does not publish incarnation ids.
            cluster = await _call(client.describe_cluster)
            assert [b.broker_id for b in cluster.brokers] == [7]
            assert cluster.brokers[0].incarnation_id == ""
            client.close()
        finally:
            await channel.close()
            await server.stop()

    asyncio.run(main())
