"""A Produce answer every partition of which succeeded is encoded without kio
(`replication.broker.kafka.apis.produce_answer`): byte for byte what kio encodes for the same
answer, in every served version; any other answer still goes through kio."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any

import pytest

from kraft.bench.kafka_listener import AcknowledgingApi
from replication.broker.api import RequestContext
from replication.broker.kafka.apis import HANDLERS, SUPPORTED_VERSIONS
from replication.broker.kafka.apis.produce_answer import encode_produce_success
from replication.broker.kafka.entities import build, to_chunks
from replication.broker.kafka.frames import Encoded, KafkaConnection, Request, response_class
from storage.errors import ErrorCode
from tests.kafka_wire.wire import decode_response, frame_bytes, request_frame

PRODUCE = 0
VERSIONS = range(SUPPORTED_VERSIONS[PRODUCE][0], SUPPORTED_VERSIONS[PRODUCE][1] + 1)
ORDERS = uuid.UUID("6c1f1a9e-0000-4000-8000-00000000000a")
TOPIC_IDS = {str(ORDERS): "orders"}
LONG_NAME = "t" * 200  # a compact string length of two varint bytes
TOPICS: list[tuple[str, uuid.UUID, list[tuple[int, int, int, int]]]] = [
    ("orders", ORDERS, [(0, 40, -1, 0), (5, 1 << 40, 1_700_000_000_123, 7)]),
    (LONG_NAME, uuid.UUID(int=7), [(130, 0, -1, -1)]),
]


def kio_bytes(version: int) -> bytes:
    """What the listener sent for such an answer before: the handler's mapping through kio."""
    values: dict[str, Any] = {
        "throttle_time": datetime.timedelta(0),
        "node_endpoints": [],
        "responses": [
            {
                "name": name,
                "topic_id": str(topic_id),
                "partition_responses": [
                    {
                        "index": index,
                        "error_code": ErrorCode.NONE,
                        "base_offset": base,
                        "log_append_time": append_time,
                        "log_start_offset": start,
                        "error_message": None,
                    }
                    for index, base, append_time, start in partitions
                ],
            }
            for name, topic_id, partitions in TOPICS
        ],
    }
    return to_chunks(build(response_class(PRODUCE, version), values)).joined()


@pytest.mark.parametrize("version", VERSIONS)
def test_the_encoded_success_is_kios_encoding_in_every_served_version(version: int) -> None:
    assert encode_produce_success(version, TOPICS) == kio_bytes(version)


def answer(version: int, api: AcknowledgingApi) -> tuple[Any, Any]:
    """(the handler's answer, the response entity a client decodes from the frame)."""
    topic = {"topic_id": ORDERS} if version >= 13 else {"name": "orders"}
    body = {
        "acks": -1,
        "timeout": 5000,
        "topic_data": [{**topic, "partition_data": [{"index": 2, "records": b"batch"}]}],
    }
    conn = KafkaConnection(SUPPORTED_VERSIONS)
    conn.receive_data(request_frame(PRODUCE, version, body, correlation_id=77))
    request = conn.next_event()
    assert isinstance(request, Request)
    result = asyncio.run(HANDLERS[PRODUCE].handle(api, request, RequestContext()))  # type: ignore[arg-type]
    assert result is not None
    if isinstance(result, Encoded):
        frames = conn.send_encoded(request, result.body)
    else:
        cls = response_class(PRODUCE, version)
        frames = conn.send(request, build(cls, {"throttle_time": 0, **result}))
    correlation_id, response = decode_response(PRODUCE, version, frame_bytes(frames)[4:])
    assert correlation_id == 77
    return result, response


@pytest.mark.parametrize("version", VERSIONS)
def test_a_success_goes_out_encoded_with_its_header(version: int) -> None:
    result, response = answer(version, AcknowledgingApi(topics=TOPIC_IDS))
    assert isinstance(result, Encoded)
    ((p,),) = [t.partition_responses for t in response.responses]
    assert (p.index, p.error_code.value, p.base_offset) == (2, ErrorCode.NONE, 1)
    if version >= 13:
        assert response.responses[0].topic_id == ORDERS
    else:
        assert response.responses[0].name == "orders"


@pytest.mark.parametrize("version", [3, 9, 13])
def test_an_error_still_goes_through_kio(version: int) -> None:
    result, response = answer(version, AcknowledgingApi(ErrorCode.NOT_ENOUGH_REPLICAS, TOPIC_IDS))
    assert not isinstance(result, Encoded)
    ((p,),) = [t.partition_responses for t in response.responses]
    assert (p.error_code.value, p.base_offset) == (ErrorCode.NOT_ENOUGH_REPLICAS, -1)
