"""The fault proxy: bytes pass, drop one way or both, are delayed, and connections reset."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import grpc
import pytest

from kraft.cluster.fault_network import FaultNetwork
from kraft.cluster.fault_proxy import FaultProxy, LinkFaults


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


def _with_proxy(scenario: Callable[[FaultProxy], Awaitable[None]]) -> None:
    """Run ``scenario`` against a proxy in front of an echo server."""

    async def main() -> None:
        server = await asyncio.start_server(_echo, "127.0.0.1", 0)
        proxy = FaultProxy(("127.0.0.1", server.sockets[0].getsockname()[1]))
        await proxy.start()
        try:
            await asyncio.wait_for(scenario(proxy), 20)
        finally:
            await proxy.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


async def _open(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def _roundtrip(proxy: FaultProxy, payload: bytes, timeout: float = 2.0) -> bytes:
    reader, writer = await _open(proxy)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.readexactly(len(payload)), timeout)
    finally:
        writer.close()


def test_a_healthy_link_carries_bytes_both_ways_unchanged() -> None:
    async def scenario(proxy: FaultProxy) -> None:
        payload = bytes(range(256)) * 1000
        assert await _roundtrip(proxy, payload) == payload
        assert proxy.counters.upstream_bytes == len(payload)
        assert proxy.counters.downstream_bytes == len(payload)

    _with_proxy(scenario)


def test_a_dropped_upstream_is_a_blackhole_not_a_reset() -> None:
    async def scenario(proxy: FaultProxy) -> None:
        reader, writer = await _open(proxy)
        proxy.set_faults(upstream=LinkFaults(drop=True))
        writer.write(b"lost")
        await writer.drain()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(reader.readexactly(4), 0.3)
        assert proxy.counters.upstream_dropped_bytes == 4
        assert not reader.at_eof()  # the connection stays open, as on a partitioned network
        proxy.heal()
        writer.write(b"back")
        await writer.drain()
        assert await asyncio.wait_for(reader.readexactly(4), 2.0) == b"back"
        writer.close()

    _with_proxy(scenario)


def test_a_one_way_cut_drops_only_the_replies() -> None:
    async def scenario(proxy: FaultProxy) -> None:
        reader, writer = await _open(proxy)
        proxy.set_faults(downstream=LinkFaults(drop=True))
        writer.write(b"ping")
        await writer.drain()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(reader.readexactly(4), 0.3)
        assert proxy.counters.upstream_bytes == 4  # the request got through
        assert proxy.counters.downstream_dropped_bytes == 4
        writer.close()

    _with_proxy(scenario)


def test_a_delayed_link_holds_every_chunk_and_keeps_order() -> None:
    async def scenario(proxy: FaultProxy) -> None:
        proxy.set_faults(upstream=LinkFaults(delay_ms=150))
        reader, writer = await _open(proxy)
        started = time.monotonic()
        for i in range(5):
            writer.write(bytes([i]) * 10)
            await writer.drain()
        got = await asyncio.wait_for(reader.readexactly(50), 3.0)
        assert got == b"".join(bytes([i]) * 10 for i in range(5))
        assert time.monotonic() - started >= 0.15
        writer.close()

    _with_proxy(scenario)


def test_reset_aborts_open_connections() -> None:
    async def scenario(proxy: FaultProxy) -> None:
        reader, writer = await _open(proxy)
        assert await _roundtrip(proxy, b"x") == b"x"
        assert proxy.reset_connections() >= 1
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            writer.write(b"after")
            await writer.drain()
            await asyncio.wait_for(reader.readexactly(5), 2.0)
        assert await _roundtrip(proxy, b"new") == b"new"  # new connections are fine

    _with_proxy(scenario)


def test_refused_connections_close_at_once() -> None:
    async def scenario(proxy: FaultProxy) -> None:
        proxy.refuse = True
        reader, writer = await _open(proxy)
        assert await asyncio.wait_for(reader.read(1), 2.0) == b""
        assert proxy.counters.refused == 1
        writer.close()

    _with_proxy(scenario)


def test_negative_delay_and_zero_rate_are_refused() -> None:
    with pytest.raises(ValueError, match="delay_ms"):
        LinkFaults(delay_ms=-1)
    with pytest.raises(ValueError, match="rate_bytes_per_s"):
        LinkFaults(rate_bytes_per_s=0)


def test_a_partition_cuts_only_the_links_between_its_sides() -> None:
    with FaultNetwork() as network:
        for s in (1, 2, 3):
            for d in (1, 2, 3):
                if s != d:
                    network.add_link(s, d, target=("127.0.0.1", 1))
        cut = network.partition({1}, {2, 3})
        assert sorted(cut) == [(1, 2), (1, 3), (2, 1), (3, 1)]
        assert network.faults(2, 3) == (LinkFaults(), LinkFaults())
        assert network.faults(1, 2)[0].drop and network.faults(1, 2)[1].drop
        network.heal()
        assert all(network.faults(*link) == (LinkFaults(), LinkFaults()) for link in network.links)
        with pytest.raises(ValueError, match="both sides"):
            network.partition({1, 2}, {2, 3})


def test_grpc_through_a_link_times_out_when_cut_and_recovers_when_healed() -> None:
    """HTTP/2 rides the proxy unchanged: a health check passes, times out while the link is
    a blackhole (no reset: the deadline notices), and passes again once healed."""
    from concurrent.futures import ThreadPoolExecutor

    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    from kraft.transport.channels import client_channel

    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with FaultNetwork() as network:
        address = network.add_link("client", "server", target=("127.0.0.1", port))
        channel = client_channel(address)
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest()
        assert stub.Check(request, timeout=5).status == health_pb2.HealthCheckResponse.SERVING
        network.isolate("server")
        with pytest.raises(grpc.RpcError) as raised:
            stub.Check(request, timeout=0.5)
        assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        network.heal()
        network.reset("server")  # a blackholed HTTP/2 connection is best started afresh
        deadline = time.monotonic() + 10
        while True:
            try:
                assert stub.Check(request, timeout=1).status == 1
                break
            except grpc.RpcError:
                assert time.monotonic() < deadline, "no answer after the heal"
        channel.close()
    server.stop(grace=None)


def test_kafka_clients_of_a_fault_network_cluster_reach_the_brokers_through_proxies() -> None:
    """Each broker advertises its Kafka listener's proxy, so librdkafka (which dials what
    Metadata says) crosses the fault network, and isolating the broker cuts it too."""
    from kraft.cluster.local import KAFKA_CLIENT, LocalCluster
    from kraft.properties import load_properties

    cluster = LocalCluster(1, 2, fault_network=True)  # not started: its configs are written
    try:
        assert cluster.network is not None
        for broker in cluster.broker_ids:
            proxy = cluster.network.address(KAFKA_CLIENT, broker)
            assert proxy != cluster.kafka_addresses[broker]
            props = load_properties(cluster.data_dir / "config" / f"broker-{broker}.properties")
            advertised = props["advertised.listeners"].split(",")
            assert f"KAFKA://{proxy}" in advertised, advertised
        assert cluster.kafka_bootstrap == ",".join(
            cluster.network.address(KAFKA_CLIENT, b) for b in cluster.broker_ids
        )
        first = cluster.broker_ids[0]
        assert (KAFKA_CLIENT, first) in cluster.network.isolate(first)
    finally:
        cluster.close()
