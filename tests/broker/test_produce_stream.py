"""A broker's ``ProduceStream`` (`replication.broker.grpc.adapter`) over real gRPC on loopback:
each request goes through the same broker API as a unary ``Produce`` (authorized per topic,
counted in the request metrics), several are handled at once and answered in the order they
came, and a request a unary call would have refused ends the stream with that status after the
answers before it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from kraft._generated import broker_pb2, broker_pb2_grpc
from kraft.metadata import PartitionRecord, TopicRecord
from kraft.metadata.records import AccessControlEntryRecord
from kraft.security.acls import ANONYMOUS, AclOperation, ResourceType
from kraft.transport.channels import aio_server
from kraft.types import TopicPartition
from replication.broker.api import RequestContext
from replication.broker.grpc.adapter import API_SERVICES, GrpcPeers, add_broker_api_to_server
from replication.broker.limits import MAX_PARTITIONS_PER_REQUEST
from replication.broker.server import BrokerServer
from replication.codec import encode
from storage.errors import ErrorCode
from tests.broker.test_broker_api import LEADER, _acl, _broker, _produce, _requests

pytestmark = pytest.mark.timeout(60)
ANYONE = RequestContext(principal=ANONYMOUS)


def _codes(response: broker_pb2.ProduceResponse) -> dict[str, int]:
    return {t.name: t.partition_responses[0].error_code for t in response.responses}


def test_streamed_produce_requests_are_authorized_counted_and_answered_in_order(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with _broker(tmp_path) as broker:
            await _check(broker)

    asyncio.run(main())


async def _serve_writable_t(broker: BrokerServer) -> tuple[grpc.aio.Server, int]:
    """The broker API on a loopback gRPC server; a plaintext caller (User:ANONYMOUS) may
    write topic t, not topic secret. The server and its port."""
    grant = _acl(ResourceType.TOPIC, "t", AclOperation.WRITE, ANYONE)
    image = broker.image
    broker.image = image.apply_batch(
        [AccessControlEntryRecord.of("acl-anyone", grant)],
        base_offset=image.last_offset + 1,
        epoch=1,
    )
    server = aio_server(api_services=API_SERVICES)
    add_broker_api_to_server(
        server, broker.api, GrpcPeers(broker.config.authorization, "PLAINTEXT")
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


async def _check(broker: BrokerServer) -> None:
    server, port = await _serve_writable_t(broker)
    ok_before = _requests("Produce", "OK")
    too_many = broker_pb2.ProduceRequest(
        acks=1,
        topic_data=[
            broker_pb2.ProduceTopicData(
                name="t",
                partition_data=[
                    broker_pb2.ProducePartitionData(index=i)
                    for i in range(MAX_PARTITIONS_PER_REQUEST + 1)
                ],
            )
        ],
    )
    requests = [encode(_produce("t")) for _ in range(4)] + [encode(_produce("t", "secret"))]
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = broker_pb2_grpc.BrokerStub(channel).ProduceStream()
            for request in [*requests, too_many]:  # all outstanding at once
                await call.write(request)
            answers = [await call.read() for _ in requests]
            assert [a.responses[0].partition_responses[0].base_offset for a in answers] == [
                0,
                1,
                2,
                3,
                4,
            ]
            assert _codes(answers[-1]) == {
                "t": ErrorCode.NONE,
                "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            }
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await call.read()
            assert ended.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    finally:
        await server.stop(None)
    assert broker.replicas[TopicPartition("t", 0)].log.log_end_offset == 5
    assert broker.replicas[TopicPartition("secret", 0)].log.log_end_offset == 0
    assert _requests("Produce", "OK") == ok_before + 5


def test_a_streamed_produce_is_handled_while_the_one_before_it_waits(tmp_path: Path) -> None:
    """An acks=all Produce that waits for a follower does not hold back the producer's next
    request on the stream (`PIPELINED`): the next one is appended meanwhile. One at a time,
    a leader had one Produce of a producer in flight, and each cost a fetch round trip per
    follower."""

    async def main() -> None:
        async with _broker(tmp_path) as broker:
            await _check_pipelined(broker)

    asyncio.run(main())


async def _check_pipelined(broker: BrokerServer) -> None:
    image = broker.image  # "held": broker 102 is in its ISR and never fetches
    held = PartitionRecord(
        topic_id="held-id", partition=0, replicas=(LEADER, 102), isr=(LEADER, 102), leader=LEADER
    )
    grant = _acl(ResourceType.TOPIC, "held", AclOperation.WRITE, ANYONE)
    broker.image = image.apply_batch(
        [
            TopicRecord(name="held", topic_id="held-id"),
            held,
            AccessControlEntryRecord.of("acl-held", grant),
            AccessControlEntryRecord.of(
                "acl-t", _acl(ResourceType.TOPIC, "t", AclOperation.WRITE, ANYONE)
            ),
        ],
        base_offset=image.last_offset + 1,
        epoch=1,
    )
    broker.replica_manager.reconcile()
    deadline = time.monotonic() + 20
    while broker.replicas.get(TopicPartition("held", 0)) is None:
        assert time.monotonic() < deadline, "the held partition never opened"
        await asyncio.sleep(0.01)
    server = aio_server(api_services=API_SERVICES)
    add_broker_api_to_server(
        server, broker.api, GrpcPeers(broker.config.authorization, "PLAINTEXT")
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    waiting = replace(_produce("held"), acks=-1, timeout_ms=60_000)
    t = broker.replicas[TopicPartition("t", 0)].log
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = broker_pb2_grpc.BrokerStub(channel).ProduceStream()
            await call.write(encode(waiting))
            await call.write(encode(_produce("t")))
            while t.log_end_offset < 1:  # serially, not before the first one's 60 s timeout
                assert time.monotonic() < deadline, "the second request waited for the first"
                await asyncio.sleep(0.01)
            assert broker.replicas[TopicPartition("held", 0)].log.log_end_offset == 1
            call.cancel()
    finally:
        await server.stop(None)


def test_a_malformed_request_after_one_in_flight_ends_the_stream_after_its_answer(
    tmp_path: Path,
) -> None:
    """The request guard's INVALID_ARGUMENT for bytes that do not parse comes after the answers
    to the requests before them, at once: when the guard aborted in the task that reads a
    pipelined stream, the status went out first and the stream then stayed open until its
    deadline (kraft fuzz --seed 3: a Produce, then garbage)."""

    async def main() -> None:
        async with _broker(tmp_path) as broker:
            server, port = await _serve_writable_t(broker)
            valid = encode(_produce("t")).SerializeToString()
            try:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                    stream = channel.stream_stream(
                        "/kraft.v1.Broker/ProduceStream",
                        request_serializer=lambda b: b,
                        response_deserializer=broker_pb2.ProduceResponse.FromString,
                    )
                    call = stream(iter([valid, b"\xff\xff\xff garbage"]), timeout=10)
                    first = await call.read()
                    assert _codes(first) == {"t": ErrorCode.NONE}
                    started = time.monotonic()
                    with pytest.raises(grpc.aio.AioRpcError) as ended:
                        await call.read()
                    assert ended.value.code() is grpc.StatusCode.INVALID_ARGUMENT
                    assert time.monotonic() - started < 5, "the stream stayed open"
            finally:
                await server.stop(None)

    asyncio.run(main())
