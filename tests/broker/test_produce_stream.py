"""A broker's ``ProduceStream`` (`replication.broker.grpc.adapter`) over real gRPC on loopback:
each request goes through the same broker API as a unary ``Produce`` (authorized per topic,
counted in the request metrics), several are handled at once and answered in the order they
came, and a request a unary call would have refused ends the stream with that status after the
answers before it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from kraft._generated import broker_pb2, broker_pb2_grpc
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
from tests.broker.test_broker_api import _acl, _broker, _produce, _requests

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


async def _check(broker: BrokerServer) -> None:
    # A plaintext caller is User:ANONYMOUS: it may write topic t, not topic secret.
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
