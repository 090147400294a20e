"""A unary Raft request the node never answers ends within the request timeout, whatever
``max_wait_ms`` it asks for: found by ``kraft fuzz`` (a Fetch with max_wait_ms = 2^31 - 1 held
its call until the caller's deadline)."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from kraft._generated import raft_pb2, raft_pb2_grpc
from kraft.raft.messages import RaftMessage
from kraft.raft_shell import METADATA_GROUP, GrpcRaftTransport
from kraft.transport.channels import aio_server, bind

pytestmark = pytest.mark.timeout(60)


class _Silent:
    """An inbox that takes every message and answers none."""

    def __init__(self) -> None:
        self.delivered: list[RaftMessage] = []

    def deliver(self, msg: RaftMessage) -> None:
        self.delivered.append(msg)


def test_a_fetch_asking_to_wait_forever_is_answered_within_the_request_timeout() -> None:
    async def main() -> None:
        transport = GrpcRaftTransport(1, {1: "127.0.0.1:0"}, request_timeout_ms=200)
        inbox = _Silent()
        transport.register(METADATA_GROUP, inbox)
        server = aio_server()
        transport.add_to_server(server)
        port = bind(server, "127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                request = raft_pb2.FetchRequest(max_wait_ms=2**31 - 1, fetch_offset=0)
                request.header.source = 2
                request.header.destination = 1
                request.header.epoch = 1
                started = time.monotonic()
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    await raft_pb2_grpc.RaftStub(channel).Fetch(request, timeout=20)
                waited = time.monotonic() - started
        finally:
            await server.stop(None)
            await transport.close()
        assert inbox.delivered, "the request never reached the node"
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
        assert waited < 5, f"held for {waited:.1f}s"

    asyncio.run(main())
