"""The metrics endpoint: state gauges read at scrape time, request counts and latencies per
RPC from every server the channels module builds, event counters."""

from __future__ import annotations

import asyncio
import contextlib
import urllib.request

import grpc
from grpc_health.v1 import health_pb2

from kraft.metrics import GaugeSpec, StateGauges, counter, start_endpoint
from kraft.transport.channels import aio_server, bind

REQUEST = health_pb2.HealthCheckRequest
RESPONSE = health_pb2.HealthCheckResponse


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text: str = reply.read().decode()
    return text


def test_state_gauges_are_read_when_scraped_and_a_failing_snapshot_exports_nothing() -> None:
    state = {"under": 2.0}
    calls = []

    def snapshot() -> dict[str, object]:
        calls.append(1)
        if state.get("fail"):
            raise RuntimeError("state moved")
        return {
            "test_underreplicatedpartitions": state["under"],
            "test_leadercount": {("t1",): 3.0, ("t2",): 1.0},
        }

    StateGauges(
        [
            GaugeSpec("test_underreplicatedpartitions", "under-replicated partitions"),
            GaugeSpec("test_leadercount", "leaders per topic", ("topic",)),
        ],
        snapshot,  # type: ignore[arg-type]
    ).register()
    port = start_endpoint(0)
    text = _scrape(port)
    assert "test_underreplicatedpartitions 2.0" in text
    assert 'test_leadercount{topic="t1"} 3.0' in text
    state["under"] = 0.0
    assert "test_underreplicatedpartitions 0.0" in _scrape(port)
    state["fail"] = 1.0
    assert "test_underreplicatedpartitions" not in _scrape(port)
    assert len(calls) >= 3


def test_every_server_counts_and_times_its_requests_per_rpc() -> None:
    # NB: a method name no other test uses: the registry is the process's, shared by tests.
    async def echo(request: REQUEST, context: object) -> RESPONSE:
        if request.service == "boom":
            raise RuntimeError("a handler that fails")
        return RESPONSE(status=RESPONSE.SERVING)

    async def main() -> None:
        server = aio_server()
        handler = grpc.unary_unary_rpc_method_handler(
            echo, REQUEST.FromString, RESPONSE.SerializeToString
        )
        server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("t.M", {"Counted": handler})]
        )
        port = bind(server, "127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                call = channel.unary_unary(
                    "/t.M/Counted",
                    request_serializer=REQUEST.SerializeToString,
                    response_deserializer=RESPONSE.FromString,
                )
                for _ in range(3):
                    await call(REQUEST(), timeout=5)
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await call(REQUEST(service="boom"), timeout=5)
        finally:
            await server.stop(None)

    asyncio.run(main())
    counter("kafka_server_brokertopicmetrics_messagesin_total", "messages in", ("topic",)).labels(
        "orders"
    ).inc(5)
    text = _scrape(start_endpoint(0))
    assert 'kafka_network_requestmetrics_requests_total{request="Counted",status="OK"} 3.0' in text
    assert (
        'kafka_network_requestmetrics_requests_total{request="Counted",status="ERROR"} 1.0' in text
    )
    assert 'kafka_network_requestmetrics_totaltime_seconds_count{request="Counted"} 4.0' in text
    assert 'kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 5.0' in text


def test_a_fetch_is_counted_as_a_follower_or_a_consumer_fetch_by_its_replica_id() -> None:
    from types import SimpleNamespace

    from kraft.metrics.registry import _fetch_name

    assert _fetch_name(SimpleNamespace(replica_id=2)) == "FetchFollower"
    assert _fetch_name(SimpleNamespace(replica_id=-1)) == "FetchConsumer"
    assert _fetch_name(SimpleNamespace()) == "FetchConsumer"
