"""The metadata record codec: exact round-trips, compact deltas, typed errors on bad input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given

from kraft.metadata import (
    RECORD_TYPE_IDS,
    MetadataRecord,
    PartitionChangeRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from storage.errors import InvalidRecordError, UnsupportedVersionError
from tests.metadata.strategies import records


@given(record=records)
def test_every_record_round_trips_exactly_through_bytes(record: MetadataRecord) -> None:
    data = encode_record(record)
    assert isinstance(data, bytes)
    assert decode_record(data) == record


def test_record_type_tags_are_kafkas_metadata_api_keys() -> None:
    assert RECORD_TYPE_IDS[TopicRecord] == 2
    assert RECORD_TYPE_IDS[PartitionChangeRecord] == 5
    assert len(set(RECORD_TYPE_IDS.values())) == len(RECORD_TYPE_IDS)


def test_partition_change_omits_unchanged_fields() -> None:
    data = encode_record(PartitionChangeRecord(topic_id="x", partition=0, isr=(1, 2)))
    assert json.loads(data) == {"k": 5, "v": 0, "topic_id": "x", "partition": 0, "isr": [1, 2]}


def test_decode_rejects_an_unknown_record_type() -> None:
    with pytest.raises(InvalidRecordError, match="unknown metadata record type 99"):
        decode_record(b'{"k":99,"v":0}')


def test_decode_rejects_a_newer_record_version() -> None:
    with pytest.raises(UnsupportedVersionError):
        decode_record(b'{"k":2,"v":7,"name":"t","topic_id":"i"}')


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"\xff\xfe",
        b"[1,2]",
        b'{"v":0}',
        b'{"k":true,"v":0}',
        b'{"k":2}',
        b'{"k":2,"v":0,"name":"t"}',
        b'{"k":2,"v":0,"name":"t","topic_id":5}',
        b'{"k":2,"v":0,"name":"t","topic_id":"i","extra":1}',
        b'{"k":3,"v":0,"topic_id":"i","partition":0,"replicas":"1,2","isr":[],"leader":1}',
        b'{"k":3,"v":0,"topic_id":"i","partition":true,"replicas":[],"isr":[],"leader":1}',
        b'{"k":4,"v":0,"resource_type":3,"resource_name":"t","name":"k","value":null}',
    ],
)
def test_decode_rejects_malformed_records_with_a_typed_error(data: bytes) -> None:
    with pytest.raises(InvalidRecordError):
        decode_record(data)
