"""The clients' real gRPC path on loopback: a ``Broker`` servicer backed by `FakeCluster`.

One real-transport test per the style guide (§7): protos cross the wire through
`replication.codec`, async calls complete, and gRPC failures become typed, retriable errors.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from kraft._generated import broker_pb2_grpc
from kraft.cluster.ports import free_ports
from kraft.transport.channels import client_id_of
from kraft.types import TopicPartition
from replication import messages
from replication.clients import Consumer, Producer
from replication.clients.network import BrokerNetwork
from replication.codec import decode, encode
from storage.errors import KraftError, NetworkError
from tests.clients.fake_cluster import FakeCluster

pytestmark = pytest.mark.timeout(60)

_REQUESTS = {
    "Produce": messages.ProduceRequest,
    "Fetch": messages.BrokerFetchRequest,
    "ListOffsets": messages.ListOffsetsRequest,
    "Metadata": messages.MetadataRequest,
    "InitProducerId": messages.InitProducerIdRequest,
}


class _Servicer(broker_pb2_grpc.BrokerServicer):  # type: ignore[misc]
    def __init__(self, cluster: FakeCluster, address: str) -> None:
        self._cluster = cluster
        self._address = address

    def _serve(self, method: str, request: Any, context: grpc.ServicerContext) -> Any:
        self._cluster.client_ids.add(client_id_of(context.invocation_metadata()))
        try:
            answer = self._cluster.handle(self._address, method, decode(request, _REQUESTS[method]))
        except NetworkError:
            context.abort(grpc.StatusCode.UNAVAILABLE, "fake: response lost")
        return encode(answer)

    def Produce(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._serve("Produce", request, context)

    def Fetch(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._serve("Fetch", request, context)

    def ListOffsets(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._serve("ListOffsets", request, context)

    def Metadata(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._serve("Metadata", request, context)

    def InitProducerId(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._serve("InitProducerId", request, context)


@pytest.fixture
def served() -> Iterator[FakeCluster]:
    """A one-broker fake cluster whose broker listens on a real loopback port."""
    (port,) = free_ports(1)
    cluster = FakeCluster(brokers=1, topics={"t": 2})
    address = f"127.0.0.1:{port}"
    cluster.addresses = {1: address}
    cluster.by_address = {address: 1}
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    broker_pb2_grpc.add_BrokerServicer_to_server(_Servicer(cluster, address), server)
    server.add_insecure_port(address)
    server.start()
    yield cluster
    server.stop(grace=None)


def test_produce_and_consume_over_real_grpc_with_a_lost_response(served: FakeCluster) -> None:
    served.lose_produce_responses = 1
    with Producer(served.bootstrap, linger_ms=1, retry_backoff_ms=10) as producer:
        futures_ = [producer.send("t", value=b"%d" % i, partition=1) for i in range(100)]
        producer.flush()
        assert [f.result(10).offset for f in futures_] == list(range(100))
    tp = TopicPartition("t", 1)
    with Consumer(served.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=50) as c:
        c.assign([tp])
        records: list[Any] = []
        while len(records) < 100:
            records.extend(c.poll(timeout=2))
    assert [r.value for r in records] == [b"%d" % i for i in range(100)]


def test_client_id_rides_on_every_call_as_in_a_kafka_request_header(
    served: FakeCluster,
) -> None:
    with Producer(served.bootstrap, client_id="billing", linger_ms=1) as producer:
        producer.send("t", value=b"x", partition=0).result(10)
    with Consumer(served.bootstrap, client_id="audit", auto_offset_reset="earliest") as c:
        c.assign([TopicPartition("t", 0)])
        deadline = time.monotonic() + 10
        while not c.poll(timeout=1) and time.monotonic() < deadline:
            pass
    assert served.client_ids == {"billing", "audit"}


def test_an_unreachable_broker_is_a_retriable_network_error() -> None:
    (port,) = free_ports(1)
    network = BrokerNetwork(f"127.0.0.1:{port}", request_timeout_s=0.5)
    try:
        with pytest.raises(KraftError) as caught:
            network.fetch_metadata([], timeout_s=0.5)
        assert caught.value.retriable
    finally:
        network.close()
