"""The listener shell (`KafkaListener`) on a real loopback socket: back-pressure at
``queued.max.requests``, responses in order, and one connection's bad input harming no other.

The broker API behind it is a small stand-in whose Metadata waits on a gate for the client id
``slow``: that is what makes requests pile up, which a real broker does not do on demand. The
process tests (`test_clients_cluster`) run the listener over real brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import structlog
from kio.schema.errors import ErrorCode as KioErrorCode

from replication.broker.api import RequestContext
from replication.broker.kafka import SUPPORTED_VERSIONS, KafkaListener, KafkaListenerConfig
from replication.broker.kafka.listener import HANDLED_PER_CONNECTION
from replication.clients import AdminClient
from replication.messages import MetadataBroker, MetadataRequest, MetadataResponse
from storage.errors import NetworkError
from tests.kafka_wire.wire import decode_response, request_frame

METADATA = 3

pytestmark = pytest.mark.timeout(60)


class GatedApi:
    """Metadata only; a ``slow`` client's call waits until ``gate`` is set."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.slow_calls = 0
        self.contexts: list[RequestContext] = []

    async def metadata(self, request: MetadataRequest, ctx: RequestContext) -> MetadataResponse:
        self.contexts.append(ctx)
        if ctx.client_id == "slow":
            self.slow_calls += 1
            await self.gate.wait()
        return MetadataResponse(
            brokers=(MetadataBroker(node_id=1, host="h", port=1),), controller_id=1
        )

    def finalized_features(self) -> tuple[int, dict[str, int]]:
        return 12, {"transaction.version": 2}

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call of {name}")


@contextlib.asynccontextmanager
async def serving(api: GatedApi, **config: Any) -> AsyncIterator[tuple[KafkaListener, int]]:
    """A started listener on an OS-chosen loopback port over ``api``, and that port."""
    listener = KafkaListener(
        KafkaListenerConfig(name="KAFKA", host="127.0.0.1", port=0, **config),
        api,  # type: ignore[arg-type]
    )
    await listener.start()
    assert listener.bound_port is not None
    try:
        yield listener, listener.bound_port
    finally:
        await listener.stop()


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def metadata_round_trip(port: int, client_id: str, correlation_id: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            request_frame(
                METADATA, 12, {"topics": None}, correlation_id=correlation_id, client_id=client_id
            )
        )
        frame = await asyncio.wait_for(read_frame(reader), 10)
        return decode_response(METADATA, 12, frame)[0]
    finally:
        writer.close()


async def wait_for(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_a_connection_holds_at_most_queued_max_requests_and_answers_in_order() -> None:
    async def run() -> None:
        api = GatedApi()
        async with serving(api, queued_max_requests=2) as (_, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"".join(
                    request_frame(
                        METADATA, 12, {"topics": None}, correlation_id=c, client_id="slow"
                    )
                    for c in range(100, 106)
                )
            )
            await writer.drain()
            await wait_for(lambda: api.slow_calls == 2)
            # Another connection is served meanwhile: the loop read what it could.
            assert await metadata_round_trip(port, "fast", 7) == 7
            assert api.slow_calls == 2, "the listener read past queued.max.requests"
            api.gate.set()
            frames = [await asyncio.wait_for(read_frame(reader), 10) for _ in range(6)]
            assert [decode_response(METADATA, 12, f)[0] for f in frames] == list(range(100, 106))
            assert api.slow_calls == 6
            ctx = api.contexts[0]
            assert (ctx.listener, ctx.api, ctx.api_version) == ("KAFKA", "Metadata", 12)
            assert ctx.principal == "User:ANONYMOUS" and ctx.client_host == "127.0.0.1"
            assert ctx.file_regions  # plaintext: a Fetch's records go with sendfile
            writer.close()

    asyncio.run(run())


def test_a_connection_that_pipelines_and_never_reads_is_handled_a_few_requests_at_a_time() -> None:
    # Found by `kraft fuzz` (Kafka target): 500 pipelined Fetches of 4 MiB, never read, were
    # all handled at once: 2 GiB of responses held, and 5 s of latency for everyone else.
    async def run() -> None:
        api = GatedApi()
        async with serving(api) as (_, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"".join(
                    request_frame(
                        METADATA, 12, {"topics": None}, correlation_id=c, client_id="slow"
                    )
                    for c in range(100)
                )
            )
            await writer.drain()
            await wait_for(lambda: api.slow_calls == HANDLED_PER_CONNECTION)
            assert await metadata_round_trip(port, "fast", 7) == 7
            assert api.slow_calls == HANDLED_PER_CONNECTION, "more handled at once than the bound"
            api.gate.set()
            frames = [await asyncio.wait_for(read_frame(reader), 10) for _ in range(100)]
            assert [decode_response(METADATA, 12, f)[0] for f in frames] == list(range(100))
            writer.close()

    asyncio.run(run())


def test_bad_input_closes_only_its_own_connection() -> None:
    async def run() -> None:
        api = GatedApi()
        async with serving(api, max_request_bytes=1 << 16) as (_, port):
            for garbage in (
                struct.pack(">i", 1 << 20),  # over socket.request.max.bytes
                struct.pack(">ihhih", 10, 12345, 0, 1, -1),  # unknown API key
                struct.pack(">i", 12) + b"\x00\x03\x00\x01" + b"\xff" * 8,  # malformed
            ):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(garbage)
                assert await asyncio.wait_for(reader.read(), 10) == b"", "not closed"
                writer.close()
                assert await metadata_round_trip(port, "fast", 9) == 9

    asyncio.run(run())


def test_sasl_handshake_and_api_versions_are_answered_on_a_live_listener() -> None:
    """A broker without SASL: SaslHandshake gets UNSUPPORTED_SASL_MECHANISM and no mechanism;
    ApiVersions advertises exactly the dispatch table. The broker logs why it refused SASL
    (issue 30: kafka-python only says "Unable to bootstrap" after 30 s)."""

    async def run() -> None:
        async with serving(GatedApi()) as (_, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request_frame(17, 1, {"mechanism": "PLAIN"}, correlation_id=1))
            writer.write(request_frame(18, 4, {}, correlation_id=2))
            _, sasl = decode_response(17, 1, await asyncio.wait_for(read_frame(reader), 10))
            assert sasl.error_code == KioErrorCode.unsupported_sasl_mechanism
            assert sasl.mechanisms == ()
            (line,) = [e for e in logs if e["event"] == "kafka_sasl_refused"]
            assert line["mechanism"] == "PLAIN" and "security.protocol=SSL" in line["reason"]
            _, versions = decode_response(18, 4, await asyncio.wait_for(read_frame(reader), 10))
            assert versions.error_code == KioErrorCode.none
            assert {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys
            } == dict(SUPPORTED_VERSIONS)
            assert versions.finalized_features_epoch == 12
            assert [(f.name, f.max_version_level) for f in versions.finalized_features] == [
                ("transaction.version", 2)
            ]
            writer.close()

    with structlog.testing.capture_logs() as logs:
        asyncio.run(run())


def test_describe_cluster_gives_the_brokers_and_a_broker_as_controller() -> None:
    """KRaft: a client's controller is a broker (it forwards, KIP-590); asking a broker for
    the controllers' endpoints (KIP-919, type 2) is refused."""

    async def run() -> None:
        async with serving(GatedApi()) as (_, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for correlation, endpoint_type in ((1, 1), (2, 2)):
                body = {"include_cluster_authorized_operations": False}
                writer.write(
                    request_frame(
                        60,
                        1,
                        {**body, "endpoint_type": endpoint_type},
                        correlation_id=correlation,
                    )
                )
            _, brokers = decode_response(60, 1, await asyncio.wait_for(read_frame(reader), 10))
            assert brokers.error_code == KioErrorCode.none
            assert [(b.broker_id, b.host, b.port) for b in brokers.brokers] == [(1, "h", 1)]
            assert brokers.controller_id == 1 and brokers.cluster_id == ""
            _, refused = decode_response(60, 1, await asyncio.wait_for(read_frame(reader), 10))
            assert refused.error_code == KioErrorCode.unsupported_endpoint_type
            writer.close()

    asyncio.run(run())


def test_a_client_that_resets_while_at_the_bound_leaves_nothing_behind() -> None:
    # Found by `kraft fuzz` (Kafka target): the reader waited for a slot forever (the
    # connection's task, buffers and requests never freed), and every pending response's task
    # died with a logged traceback.
    async def run() -> None:
        api = GatedApi()
        unhandled: list[object] = []
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: unhandled.append(ctx))
        async with serving(api, queued_max_requests=2) as (listener, port):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"".join(
                    request_frame(
                        METADATA, 12, {"topics": None}, correlation_id=c, client_id="slow"
                    )
                    for c in range(10)
                )
            )
            await writer.drain()
            await wait_for(lambda: api.slow_calls == 2)
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.close()  # a reset, with responses due
            await asyncio.sleep(0)  # let the reset land before the handlers answer
            api.gate.set()
            await wait_for(lambda: not listener._connections)
            assert await metadata_round_trip(port, "fast", 7) == 7
            assert not unhandled, unhandled

    asyncio.run(run())


def test_kraft_s_own_client_on_a_kafka_listener_is_told_so_at_once() -> None:
    """Issue 30: kraft's gRPC client pointed at a Kafka listener (KAFKA_BOOTSTRAP_SERVERS where
    KRAFT_BOOTSTRAP belongs) waited out its whole timeout on "Socket closed"; the listener now
    answers it a line that its error names, and it gives up after the refusal grace."""

    async def run() -> None:
        def list_topics(address: str) -> NetworkError:
            admin = AdminClient(address)
            try:
                with pytest.raises(NetworkError) as raised:
                    admin.list_topics(timeout=30)
                return raised.value
            finally:
                admin.close()

        async with serving(GatedApi()) as (_, port):
            address = f"127.0.0.1:{port}"
            started = time.monotonic()
            error = await asyncio.get_running_loop().run_in_executor(None, list_topics, address)
            assert time.monotonic() - started < 15, "waited for the deadline"  # grace: 1 s
            assert address in error.message and "Kafka listener" in error.message, error
            assert "KRAFT_BOOTSTRAP" in error.message, error

    asyncio.run(run())
