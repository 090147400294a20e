"""Every broker API message survives the trip to proto bytes and back unchanged."""

from __future__ import annotations

import dataclasses
import enum
import typing
from types import NoneType, UnionType
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft._generated import broker_pb2 as pb
from replication.codec import decode, decode_bytes, decode_generic, encode, encode_generic
from replication.messages import (
    FetchPartitionData,
    ProducePartitionData,
    ProduceRequest,
    broker,
    groups,
    txn,
)
from storage.errors import ErrorCode
from storage.file_region import FileRegion
from storage.records import SimpleRecord, build_batch

MESSAGE_CLASSES: list[type[Any]] = sorted(
    (
        typing.cast(type[Any], cls)
        for module in (broker, groups, txn)  # every message with a proto mirror
        for cls in vars(module).values()
        if isinstance(cls, type) and dataclasses.is_dataclass(cls)
    ),
    key=lambda c: c.__name__,
)
_TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=8)
_INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_64_BIT = {FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64}


def _strategy(hint: Any, field: FieldDescriptor) -> st.SearchStrategy[Any]:
    """Values of a message field's type, within its proto integer range."""
    if isinstance(hint, UnionType):
        args = typing.get_args(hint)
        # NB: a FileRegion (records sent with sendfile) never crosses gRPC: bytes do
        (inner,) = [a for a in args if a is not NoneType and a is not FileRegion]
        values = _strategy(inner, field)
        return st.none() | values if NoneType in args else values
    if typing.get_origin(hint) is tuple:
        return st.lists(_strategy(typing.get_args(hint)[0], field), max_size=3).map(tuple)
    if dataclasses.is_dataclass(hint):
        return _message(typing.cast(type[Any], hint))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from(list(hint))
    if hint is int:
        return _INT64 if field.cpp_type in _64_BIT else _INT32
    return {str: _TEXT, bool: st.booleans(), bytes: st.binary(max_size=64)}[hint]


def _message(cls: type[Any]) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    descriptor = getattr(pb, cls.__name__).DESCRIPTOR
    fields = {
        f.name: _deferred(hints[f.name], descriptor.fields_by_name[f.name])
        for f in dataclasses.fields(cls)
    }
    return st.builds(cls, **fields)


def _deferred(hint: Any, field: FieldDescriptor) -> st.SearchStrategy[Any]:
    return st.deferred(lambda: _strategy(hint, field))


def test_every_proto_message_has_a_dataclass_with_the_same_fields() -> None:
    by_name = {cls.__name__: cls for cls in MESSAGE_CLASSES}
    # Wrappers of Kafka's nullable arrays (one ``repeated items`` field) map to ``X | None``.
    wrappers = {
        name
        for name, d in pb.DESCRIPTOR.message_types_by_name.items()
        if [f.name for f in d.fields] == ["items"]
    }
    assert set(by_name) == set(pb.DESCRIPTOR.message_types_by_name) - wrappers
    for name, descriptor in pb.DESCRIPTOR.message_types_by_name.items():
        if name in wrappers:
            continue
        fields = {f.name for f in dataclasses.fields(by_name[name])}
        assert fields == set(descriptor.fields_by_name), name


@pytest.mark.parametrize("cls", MESSAGE_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_message_round_trips_through_proto_bytes(cls: type[Any], data: st.DataObject) -> None:
    message = data.draw(_message(cls))
    wire = encode(message).SerializeToString()
    assert decode_bytes(wire, cls) == message
    assert decode(getattr(pb, cls.__name__).FromString(wire), cls) == message


def test_record_batches_cross_the_codec_byte_for_byte() -> None:
    batch = build_batch(
        [SimpleRecord(value=b"v", key=b"k"), SimpleRecord(value=None)], timestamp_ms=1
    )
    request = ProduceRequest(
        topic_data=(
            broker.ProduceTopicData(
                name="t", partition_data=(ProducePartitionData(index=0, records=batch + batch),)
            ),
        )
    )
    again = decode_bytes(encode(request).SerializeToString(), ProduceRequest)
    assert again.topic_data[0].partition_data[0].records == batch + batch


def test_unset_leader_hints_decode_as_none_and_set_ones_survive() -> None:
    plain = FetchPartitionData(partition_index=3)
    assert decode(encode(plain), FetchPartitionData).current_leader is None
    hinted = FetchPartitionData(
        partition_index=3,
        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
        current_leader=broker.LeaderIdAndEpoch(leader_id=0, leader_epoch=0),
    )
    assert decode(encode(hinted), FetchPartitionData) == hinted


def test_an_unknown_error_code_decodes_as_unknown_server_error() -> None:
    proto = pb.FetchPartitionData(partition_index=1)
    proto.error_code = 31337  # type: ignore[assignment]  # a newer broker's code
    again = decode_bytes(proto.SerializeToString(), FetchPartitionData)
    assert again.error_code is ErrorCode.UNKNOWN_SERVER_ERROR


HOT_CLASSES = [
    broker.ProduceRequest,
    broker.ProduceResponse,
    broker.BrokerFetchRequest,
    broker.BrokerFetchResponse,
]


@pytest.mark.parametrize("cls", HOT_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_hand_written_converters_agree_with_the_generic_one(
    cls: type[Any], data: st.DataObject
) -> None:
    message = data.draw(_message(cls))
    assert encode(message) == encode_generic(message)
    proto = encode_generic(message)
    assert decode(proto, cls) == decode_generic(proto, cls) == message


def test_an_unknown_error_code_decodes_as_unknown_server_error_in_a_fetch_response() -> None:
    proto = pb.BrokerFetchResponse(
        responses=[pb.FetchTopicResponse(topic="t", partitions=[pb.FetchPartitionData()])]
    )
    proto.error_code = 31337  # type: ignore[assignment]
    proto.responses[0].partitions[0].error_code = 31337  # type: ignore[assignment]
    again = decode(proto, broker.BrokerFetchResponse)
    assert again.error_code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert again.responses[0].partitions[0].error_code is ErrorCode.UNKNOWN_SERVER_ERROR
