"""Any bytes a client sends give requests, NEED_DATA or a close: never an exception out of the
frame layer (`KafkaConnection`), and a closed connection stays closed."""

from __future__ import annotations

import random
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from replication.broker.kafka.apis import SUPPORTED_VERSIONS
from replication.broker.kafka.entities import check_lengths, read_entity
from replication.broker.kafka.frames import (
    NEED_DATA,
    Closed,
    KafkaConnection,
    Request,
    request_class,
)
from replication.nemesis.kafka_payloads import KafkaPayloadFuzzer
from tests.kafka_wire.wire import request_frame

VALID = [
    request_frame(3, 12, {"topics": None}),
    request_frame(3, 1, {"topics": [{"name": "t"}]}),
    request_frame(0, 9, {"acks": -1, "timeout": 100, "topic_data": []}),
    request_frame(18, 3, {"client_software_name": "x", "client_software_version": "1"}),
    request_frame(68, 1, {"group_id": "g", "member_id": "m", "member_epoch": 0}),
]


def drain(conn: KafkaConnection) -> list[object]:
    events: list[object] = []
    for _ in range(1000):
        event = conn.next_event()
        events.append(event)
        if event is NEED_DATA or isinstance(event, Closed):
            return events
        assert isinstance(event, Request)
    raise AssertionError("next_event never asked for data")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(min_value=1, max_value=64))
def test_random_bytes_never_raise(data: bytes, chunk: int) -> None:
    conn = KafkaConnection(SUPPORTED_VERSIONS, max_request_bytes=4096)
    for i in range(0, len(data), chunk):
        conn.receive_data(data[i : i + chunk])
        events = drain(conn)
        if isinstance(events[-1], Closed):
            conn.receive_data(VALID[0])
            assert conn.next_event() == events[-1]
            return


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(VALID),
    st.lists(st.tuples(st.integers(min_value=4, max_value=400), st.integers(0, 255)), max_size=4),
)
def test_corrupted_valid_requests_never_raise(frame: bytes, flips: list[tuple[int, int]]) -> None:
    corrupted = bytearray(frame)
    for position, value in flips:
        if position < len(corrupted):
            corrupted[position] = value
    conn = KafkaConnection(SUPPORTED_VERSIONS, max_request_bytes=4096)
    conn.receive_data(bytes(corrupted) + frame)
    drain(conn)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(2**15), max_value=2**15 - 1), st.integers(-5, 30))
def test_any_api_key_and_version_header_is_decided(api_key: int, version: int) -> None:
    payload = struct.pack(">hhih", api_key, version, 1, -1)
    conn = KafkaConnection(SUPPORTED_VERSIONS)
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    event = conn.next_event()
    served = SUPPORTED_VERSIONS.get(api_key)
    if served is None:
        assert isinstance(event, Closed)
    elif api_key == 18 and not served[0] <= version <= served[1]:
        assert isinstance(event, Request) and event.unsupported
    else:
        assert isinstance(event, Request | Closed)


def test_the_length_check_walks_every_served_request_exactly_as_kio_reads_it() -> None:
    """`check_lengths` (run before kio's native reader) ends where kio ends on random valid
    requests of every served API and version: it refuses no well-formed request."""
    for key, (low, high) in sorted(SUPPORTED_VERSIONS.items()):
        for version in range(low, high + 1):
            cls = request_class(key, version)
            for n in range(3):
                rng = random.Random(f"{key}:{version}:{n}")
                _, frame = KafkaPayloadFuzzer(rng, ["t"]).request(key, version, n)
                payload = memoryview(frame)[4:]
                header_end = check_lengths(cls.__header_schema__, payload, 0)
                assert read_entity(cls.__header_schema__, payload, 0)[1] == header_end
                assert (
                    check_lengths(cls, payload, header_end)
                    == read_entity(cls, payload, header_end)[1]
                ), (key, version, n)
