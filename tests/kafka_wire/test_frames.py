"""The sans-IO frame layer (`replication.broker.kafka.frames`): bytes in, requests out,
responses out in request order; bad input closes the connection, as Kafka does."""

from __future__ import annotations

import struct

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0
from kio.schema.errors import ErrorCode as KioErrorCode

from kraft.transport.unreachable import KAFKA_LISTENER_REPLY
from replication.broker.kafka.apis import SUPPORTED_VERSIONS
from replication.broker.kafka.entities import Chunk, build, to_chunks
from replication.broker.kafka.frames import (
    NEED_DATA,
    Closed,
    KafkaConnection,
    Request,
    response_class,
)
from storage.errors import ErrorCode
from tests.kafka_wire.wire import decode_response, frame_bytes, request_frame, split_frames

API_VERSIONS, METADATA, PRODUCE = 18, 3, 0


def connection(max_request_bytes: int = 1 << 20) -> KafkaConnection:
    return KafkaConnection(SUPPORTED_VERSIONS, max_request_bytes=max_request_bytes)


def metadata_request(correlation_id: int, version: int = 12) -> bytes:
    return request_frame(METADATA, version, {"topics": None}, correlation_id=correlation_id)


def answer_metadata(conn: KafkaConnection, request: Request) -> list[Chunk]:
    cls = response_class(METADATA, request.api_version)
    return conn.send(request, build(cls, {"brokers": [], "topics": [], "controller_id": 7}))


def test_a_request_split_anywhere_is_decoded_once_whole() -> None:
    frame = metadata_request(correlation_id=42)
    for cut in range(1, len(frame)):
        conn = connection()
        conn.receive_data(frame[:cut])
        assert conn.next_event() is NEED_DATA
        conn.receive_data(frame[cut:])
        event = conn.next_event()
        assert isinstance(event, Request)
        assert (event.api_key, event.api_version, event.correlation_id) == (METADATA, 12, 42)
        assert event.client_id == "test" and event.body.topics is None
        assert conn.next_event() is NEED_DATA


def test_flexible_and_non_flexible_headers_both_parse() -> None:
    conn = connection()
    conn.receive_data(metadata_request(1, version=1) + metadata_request(2, version=9))
    first, second = conn.next_event(), conn.next_event()
    assert isinstance(first, Request) and isinstance(second, Request)
    assert (first.api_version, second.api_version) == (1, 9)
    assert (first.correlation_id, second.correlation_id) == (1, 2)


def test_responses_go_out_in_request_order_whatever_order_they_finish() -> None:
    conn = connection()
    conn.receive_data(b"".join(metadata_request(c) for c in (10, 11, 12)))
    first, second, third = (conn.next_event() for _ in range(3))
    assert isinstance(first, Request) and isinstance(second, Request)
    assert isinstance(third, Request)
    assert answer_metadata(conn, third) == []
    assert answer_metadata(conn, second) == []
    assert conn.in_flight == 3
    frames = split_frames(frame_bytes(answer_metadata(conn, first)))
    assert [decode_response(METADATA, 12, f)[0] for f in frames] == [10, 11, 12]
    assert conn.in_flight == 0 and conn.sent == 3


def test_a_produce_with_acks_0_gets_no_response_and_holds_no_later_one() -> None:
    conn = connection()
    produce = request_frame(
        PRODUCE,
        9,
        {"acks": 0, "timeout": 1000, "topic_data": []},
        correlation_id=5,
    )
    conn.receive_data(produce + metadata_request(6))
    skipped, answered = conn.next_event(), conn.next_event()
    assert isinstance(skipped, Request) and isinstance(answered, Request)
    assert answer_metadata(conn, answered) == []
    frames = split_frames(frame_bytes(conn.skip(skipped)))
    assert [decode_response(METADATA, 12, f)[0] for f in frames] == [6]


def test_a_frame_over_socket_request_max_bytes_closes_before_it_is_read() -> None:
    conn = connection(max_request_bytes=1000)
    conn.receive_data(struct.pack(">i", 1001))  # only the size: nothing else is awaited
    event = conn.next_event()
    assert isinstance(event, Closed) and "socket.request.max.bytes" in event.reason
    conn.receive_data(metadata_request(1))
    assert conn.next_event() == event, "a closed connection stays closed"


def test_another_protocols_first_bytes_close_with_a_line_that_names_it() -> None:
    """A gRPC client (kraft's own, pointed at the wrong port), a TLS client on a PLAINTEXT
    listener, curl: each opening reads as an absurd frame size; the reason says who it is."""
    openings = {
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n": "gRPC port",
        bytes.fromhex("160301020001"): "security.protocol=SSL",
        b"GET /metrics HTTP/1.1\r\n": "HTTP/1",
    }
    for opening, named in openings.items():
        conn = connection()
        conn.receive_data(opening)
        event = conn.next_event()
        assert isinstance(event, Closed) and named in event.reason, (opening, event)
        if opening.startswith((b"PRI ", b"GET ")):  # told where it is, before the close
            assert KAFKA_LISTENER_REPLY in event.reply, event


def test_a_negative_or_tiny_frame_size_closes() -> None:
    for size in (-1, 0, 7):
        conn = connection()
        conn.receive_data(struct.pack(">i", size) + b"\0" * 8)
        assert isinstance(conn.next_event(), Closed)


def test_an_unknown_api_key_closes() -> None:
    conn = connection()
    payload = struct.pack(">hhih", 9999, 0, 1, -1)
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    event = conn.next_event()
    assert isinstance(event, Closed) and "9999" in event.reason


def test_an_api_kafka_has_but_kraft_does_not_serve_closes() -> None:
    conn = connection()
    assert 50 not in SUPPORTED_VERSIONS  # DescribeUserScramCredentials: kraft has no SASL
    payload = struct.pack(">hhih", 50, 0, 1, -1)
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    assert isinstance(conn.next_event(), Closed)


def test_an_unsupported_version_of_another_api_closes() -> None:
    conn = connection()
    low, _ = SUPPORTED_VERSIONS[PRODUCE]
    payload = struct.pack(">hhih", PRODUCE, low - 1, 1, -1)  # below KIP-896's floor
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    event = conn.next_event()
    assert isinstance(event, Closed) and "version" in event.reason


def test_a_body_that_does_not_parse_closes() -> None:
    conn = connection()
    frame = metadata_request(1, version=1)
    truncated_body = frame[:-2]
    conn.receive_data(struct.pack(">i", len(truncated_body) - 4) + truncated_body[4:])
    event = conn.next_event()
    assert isinstance(event, Closed) and "malformed" in event.reason


def test_garbage_in_a_string_length_closes() -> None:
    conn = connection()
    payload = struct.pack(">hhih", METADATA, 1, 1, 30000) + b"short"
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    assert isinstance(conn.next_event(), Closed)


def test_an_array_longer_than_the_frame_closes_before_kio_reads_it() -> None:
    """Found by `kraft fuzz --target kafka --seed 10` (a flipped bit): kio's native reader
    allocated room for the items an array's length claims, 111 GB for a 523-byte frame, and
    the failed allocation aborted the broker."""
    for version, huge in ((12, b"\xff\xff\xff\xff\x0f"), (4, struct.pack(">i", 2**31 - 1))):
        frame = request_frame(
            METADATA, version, {"topics": [{"name": "t"}]}, correlation_id=1, client_id="c"
        )
        # The body's first field is the topics array; the header ends after client id "c"
        # (and, flexible, an empty tag section).
        at = 4 + 8 + 3 + (1 if version == 12 else 0)
        count = 1 if version == 12 else 4
        assert frame[at : at + count] == (b"\x02" if version == 12 else struct.pack(">i", 1))
        body = frame[4:at] + huge + frame[at + count :]
        conn = connection()
        conn.receive_data(struct.pack(">i", len(body)) + body)
        event = conn.next_event()
        assert isinstance(event, Closed) and "bytes left" in event.reason, event


def test_a_null_where_the_schema_allows_none_closes() -> None:
    # Found by `kraft fuzz --target kafka` (a flipped bit): kio reads a non-nullable array of
    # length -1 as None, and ListOffsets' and OffsetCommit's handlers raised iterating it.
    valid = request_frame(2, 6, {"replica_id": -1, "topics": []})
    assert valid.endswith(b"\x01\x00")  # topics: compact length 0 (+1), then no tags
    null_topics = valid[:-2] + b"\x00\x00"  # compact length 0: null
    conn = connection()
    conn.receive_data(null_topics)
    event = conn.next_event()
    assert isinstance(event, Closed) and "topics is null" in event.reason
    conn = connection()
    conn.receive_data(valid)
    assert isinstance(conn.next_event(), Request)


def test_an_unknown_api_versions_version_is_answered_in_v0_with_the_ranges() -> None:
    """KIP-511: a newer client's ApiVersions gets UNSUPPORTED_VERSION in the v0 format, with
    the broker's ranges, so it can retry with a version it finds there."""
    conn = connection()
    payload = struct.pack(">hhih", API_VERSIONS, 99, 77, 4) + b"test" + b"\x00\x01\x02junk"
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    event = conn.next_event()
    assert isinstance(event, Request) and event.unsupported
    (frame,) = split_frames(frame_bytes(conn.unsupported_api_versions(event)))
    correlation, body = decode_response(API_VERSIONS, 0, frame)
    assert correlation == 77 and isinstance(body, ApiVersionsV0)
    assert body.error_code == KioErrorCode.unsupported_version
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
    assert ranges == dict(SUPPORTED_VERSIONS)


def test_end_of_stream_closes_after_the_whole_frames_before_it() -> None:
    conn = connection()
    whole = metadata_request(1)
    conn.receive_data(whole + whole[:5])
    conn.receive_data(b"")
    assert isinstance(conn.next_event(), Request)
    event = conn.next_event()
    assert isinstance(event, Closed) and event.reason == "end of stream"


def test_record_bytes_reach_the_response_chunks_by_identity() -> None:
    """A fetch response's record batches are not copied by the encoder."""
    records = bytes(range(256)) * 4096
    cls = response_class(1, 12)
    response = build(
        cls,
        {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": records}]}]},
    )
    assert any(chunk is records for chunk in to_chunks(response).chunks)


def test_kraft_only_error_codes_reach_kafka_clients_as_unknown_server_error() -> None:
    response = build(response_class(22, 4), {"error_code": ErrorCode.LOG_CLOSED})
    assert response.error_code == KioErrorCode.unknown_server_error
    response = build(response_class(22, 4), {"error_code": ErrorCode.NOT_COORDINATOR})
    assert response.error_code == KioErrorCode.not_coordinator
