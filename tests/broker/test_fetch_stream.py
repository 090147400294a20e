"""`FetchStreams`: a follower's fetches to a leader on one long-lived ``FetchStream`` call, over a
real grpc.aio server on loopback: requests answered in order on one call, a timed-out call
dropped and replaced, and a leader without ``FetchStream`` fetched from with unary calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from kraft._generated import broker_pb2, broker_pb2_grpc
from replication.broker.replicas.fetch_stream import FetchStreams
from storage.errors import RequestTimedOutError

SERVICE = "kraft.v1.Broker"


class _Leader:
    """A leader's Broker service with Fetch and (unless ``unary_only``) FetchStream: answers
    each request with ``max_wait_ms`` as its error code; a request with ``min_bytes`` 1 is
    held (never answered)."""

    def __init__(self, *, unary_only: bool = False) -> None:
        self.streams = 0
        self.unary_calls = 0
        self.unary_only = unary_only

    def _answer(self, request: Any) -> Any:
        return broker_pb2.BrokerFetchResponse(error_code=request.max_wait_ms)

    async def fetch(self, request: Any, context: Any) -> Any:
        self.unary_calls += 1
        return self._answer(request)

    async def fetch_stream(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        self.streams += 1
        async for request in requests:
            if request.min_bytes == 1:
                await asyncio.sleep(3600)
            yield self._answer(request)

    def handler(self) -> grpc.GenericRpcHandler:
        methods = {
            "Fetch": grpc.unary_unary_rpc_method_handler(
                self.fetch,
                request_deserializer=broker_pb2.BrokerFetchRequest.FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
        }
        if not self.unary_only:
            methods["FetchStream"] = grpc.stream_stream_rpc_method_handler(
                self.fetch_stream,
                request_deserializer=broker_pb2.BrokerFetchRequest.FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
        return grpc.method_handlers_generic_handler(SERVICE, methods)


async def _with_leader(leader: _Leader, body: Any) -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((leader.handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    address = f"127.0.0.1:{port}"
    channel = grpc.aio.insecure_channel(address)
    streams = FetchStreams(lambda _address: broker_pb2_grpc.BrokerStub(channel))
    try:
        await body(streams, address)
    finally:
        streams.close()
        await channel.close()
        await server.stop(None)


def _request(tag: int, *, hold: bool = False) -> Any:
    return broker_pb2.BrokerFetchRequest(replica_id=2, max_wait_ms=tag, min_bytes=1 if hold else 0)


def test_fetches_to_one_leader_share_one_call_answered_in_order() -> None:
    leader = _Leader()

    async def body(streams: FetchStreams, address: str) -> None:
        for tag in (3, 5, 7):
            reply: Any = await streams.fetch(1, address, _request(tag), timeout_s=10)
            assert reply.error_code == tag
        assert leader.streams == 1 and leader.unary_calls == 0

    asyncio.run(_with_leader(leader, body))


def test_a_timed_out_fetch_drops_its_call_and_the_next_fetch_opens_a_new_one() -> None:
    leader = _Leader()

    async def body(streams: FetchStreams, address: str) -> None:
        with pytest.raises(RequestTimedOutError):
            await streams.fetch(1, address, _request(3, hold=True), timeout_s=0.2)
        # the held request's answer never comes: the next one must not wait behind it
        reply: Any = await streams.fetch(1, address, _request(9), timeout_s=10)
        assert reply.error_code == 9
        assert leader.streams == 2

    asyncio.run(_with_leader(leader, body))


def test_a_leader_without_fetch_stream_is_fetched_from_with_unary_calls() -> None:
    leader = _Leader(unary_only=True)

    async def body(streams: FetchStreams, address: str) -> None:
        for tag in (4, 6):
            reply: Any = await streams.fetch(1, address, _request(tag), timeout_s=10)
            assert reply.error_code == tag
        assert leader.unary_calls == 2 and leader.streams == 0

    asyncio.run(_with_leader(leader, body))
