"""A request that is not its message is answered INVALID_ARGUMENT, not UNKNOWN, by every
server the channels module builds; well-formed requests, streams and grpc's own (sync)
health service are untouched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kraft.transport.channels import aio_server, bind

REQUEST = health_pb2.HealthCheckRequest
RESPONSE = health_pb2.HealthCheckResponse


async def _echo(request: health_pb2.HealthCheckRequest, context: object) -> RESPONSE:
    return RESPONSE(status=RESPONSE.SERVING if request.service == "ok" else RESPONSE.UNKNOWN)


async def _stream(requests: AsyncIterator[REQUEST], context: object) -> AsyncIterator[RESPONSE]:
    async for request in requests:
        yield await _echo(request, context)


def _run(scenario: object) -> None:
    async def main() -> None:
        server = aio_server()
        handlers = {
            "Echo": grpc.unary_unary_rpc_method_handler(
                _echo, REQUEST.FromString, RESPONSE.SerializeToString
            ),
            "Stream": grpc.stream_stream_rpc_method_handler(
                _stream, REQUEST.FromString, RESPONSE.SerializeToString
            ),
        }
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.T", handlers)])
        health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
        port = bind(server, "127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                await asyncio.wait_for(scenario(channel), 20)  # type: ignore[operator]
        finally:
            await server.stop(None)

    asyncio.run(main())


def _raw(channel: grpc.aio.Channel, method: str) -> grpc.aio.UnaryUnaryMultiCallable:
    return channel.unary_unary(
        f"/t.T/{method}", request_serializer=lambda b: b, response_deserializer=lambda b: b
    )


def test_bytes_that_are_not_the_message_get_invalid_argument() -> None:
    async def scenario(channel: grpc.aio.Channel) -> None:
        try:
            await _raw(channel, "Echo")(b"\xff\xff\xff", timeout=5)
        except grpc.aio.AioRpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "INVALID_REQUEST: malformed request" in (e.details() or "")
        else:
            raise AssertionError("a malformed request was answered")

    _run(scenario)


def test_well_formed_requests_streams_and_the_sync_health_service_still_work() -> None:
    async def scenario(channel: grpc.aio.Channel) -> None:
        reply = await _raw(channel, "Echo")(REQUEST(service="ok").SerializeToString(), timeout=5)
        assert RESPONSE.FromString(reply).status == RESPONSE.SERVING
        stream = channel.stream_stream(
            "/t.T/Stream",
            request_serializer=REQUEST.SerializeToString,
            response_deserializer=RESPONSE.FromString,
        )
        replies = [r.status async for r in stream(iter([REQUEST(service="ok"), REQUEST()]))]
        assert replies == [RESPONSE.SERVING, RESPONSE.UNKNOWN]
        checked = await health_pb2_grpc.HealthStub(channel).Check(REQUEST(), timeout=5)
        assert checked.status == RESPONSE.SERVING

    _run(scenario)


def test_a_malformed_message_ends_a_stream_with_invalid_argument() -> None:
    async def scenario(channel: grpc.aio.Channel) -> None:
        stream = channel.stream_stream(
            "/t.T/Stream", request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        call = stream(iter([REQUEST(service="ok").SerializeToString(), b"\xff\xff"]))
        got: list[bytes] = []
        try:
            async for reply in call:
                got.append(reply)
        except grpc.aio.AioRpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
        else:
            raise AssertionError("the stream carried a malformed message on")
        assert len(got) == 1

    _run(scenario)


def test_the_interceptors_build_a_methods_handler_once_and_keep_no_unknown_method() -> None:
    """Building the wrapped handlers per RPC cost ~5 µs of server CPU per call (issue 15):
    they are built on a method's first call; an unknown method (any name a client sends)
    is not remembered."""
    from kraft.metrics.registry import RequestMetrics
    from kraft.transport.request_guard import RejectUnparseable

    echo = grpc.unary_unary_rpc_method_handler(
        _echo, REQUEST.FromString, RESPONSE.SerializeToString
    )
    looked_up: list[str] = []

    class Details:
        def __init__(self, method: str) -> None:
            self.method = method
            self.invocation_metadata = ()

    async def main() -> None:
        outer, inner = RequestMetrics(), RejectUnparseable()

        async def lookup(details: Details) -> grpc.RpcMethodHandler:
            looked_up.append(details.method)
            return echo if details.method == "/t.T/EchoOnce" else None

        async def chain(details: Details) -> grpc.RpcMethodHandler:
            return await inner.intercept_service(lookup, details)

        echo_once = Details("/t.T/EchoOnce")
        handlers = [await outer.intercept_service(chain, echo_once) for _ in range(3)]
        assert handlers[0] is handlers[1] is handlers[2]
        request = handlers[0].request_deserializer(REQUEST(service="ok").SerializeToString())
        assert (await handlers[0].unary_unary(request, None)).status == RESPONSE.SERVING
        for _ in range(2):
            assert await outer.intercept_service(chain, Details("/t.T/Nope")) is None

    asyncio.run(main())
    assert looked_up == ["/t.T/EchoOnce", "/t.T/Nope", "/t.T/Nope"]
