"""Every controller API message survives the trip to proto bytes and back unchanged."""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Mapping
from types import NoneType, UnionType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft._generated import controller_pb2 as pb
from kraft.controller import messages
from kraft.controller.messages import (
    CreatableTopic,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    ElectLeadersRequest,
)
from kraft.raft import messages as raft_messages
from kraft.raft.messages import CurrentLeader
from kraft.transport import controller_codec as codec
from kraft.transport.controller_codec import decode, decode_response, encode
from kraft.types import TopicPartition
from storage.errors import ErrorCode, InvalidRequestError

MESSAGE_CLASSES: list[type[Any]] = [
    *(
        typing.cast(type[Any], cls)
        for name, cls in sorted(vars(messages).items())
        if name.endswith(("Request", "Response")) and dataclasses.is_dataclass(cls)
    ),
    # the metadata quorum's admin APIs, which the controllers serve beside their own
    raft_messages.DescribeQuorumRequest,
    raft_messages.DescribeQuorumResponse,
    raft_messages.AddRaftVoterRequest,
    raft_messages.AddRaftVoterResponse,
    raft_messages.RemoveRaftVoterRequest,
    raft_messages.RemoveRaftVoterResponse,
]
"""Every message of the controller service (`kraft.controller.messages`, and Raft's admin)."""
_TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=8)
_INT = st.integers(min_value=-(2**31), max_value=2**31 - 1)


def _strategy(hint: Any) -> st.SearchStrategy[Any]:
    """Values of a message field's type, within the proto's int32 range (a NewType id such
    as `NodeId` is its int)."""
    while hasattr(hint, "__supertype__"):
        hint = hint.__supertype__
    if isinstance(hint, UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not NoneType]
        return st.none() | _strategy(inner)
    origin = typing.get_origin(hint)
    if origin is tuple:
        return st.lists(_strategy(typing.get_args(hint)[0]), max_size=3).map(tuple)
    if origin is Mapping:
        return st.dictionaries(_TEXT, _TEXT, max_size=3)
    if dataclasses.is_dataclass(hint):
        return _message(hint)  # type: ignore[arg-type]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from(list(hint))
    return {int: _INT, str: _TEXT, bool: st.booleans()}[hint]


def _message(cls: type[Any]) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    fields = {f.name: _deferred(hints[f.name]) for f in dataclasses.fields(cls)}
    return st.builds(cls, **fields)


def _deferred(hint: Any) -> st.SearchStrategy[Any]:
    return st.deferred(lambda: _strategy(hint))


@pytest.mark.parametrize("cls", MESSAGE_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_message_round_trips_through_proto_bytes(cls: type[Any], data: st.DataObject) -> None:
    message = data.draw(_message(cls))
    wire = encode(message).SerializeToString()
    again = decode(getattr(pb, cls.__name__).FromString(wire), cls)
    assert again == message


def test_every_rpc_of_the_service_has_a_message_class_on_both_sides() -> None:
    service = pb.DESCRIPTOR.services_by_name["Controller"]
    names = {c.__name__ for c in MESSAGE_CLASSES}
    for method in service.methods:
        assert method.input_type.name in names
        assert method.output_type.name in names
        assert "current_leader" in method.output_type.fields_by_name


def test_nullable_fields_keep_none_apart_from_empty() -> None:
    """``partitions=None`` means every partition; ``()`` means none: both must survive."""
    for partitions in (None, (), (TopicPartition("t", 0),)):
        request = ElectLeadersRequest(partitions=partitions)
        assert decode(encode(request), ElectLeadersRequest) == request
    for assignments in (None, (), ((1, 2), (2, 3))):
        topic = CreatePartitionsTopic(name="t", count=3, assignments=assignments)
        assert decode(encode(topic), CreatePartitionsTopic) == topic
    result = DeletableTopicResult(name=None, topic_id="x")
    assert decode(encode(result), DeletableTopicResult).name is None


def test_response_carries_the_current_leader_for_redirects() -> None:
    response = CreateTopicsResponse(
        topics=(
            codec_result := messages.CreatableTopicResult(
                name="t", error_code=ErrorCode.NOT_CONTROLLER
            ),
        )
    )
    leader = CurrentLeader(leader_id=2, leader_address="127.0.0.1:9002", epoch=7)
    wire = codec.encode_response(response, leader).SerializeToString()
    decoded, hint = decode_response(pb.CreateTopicsResponse.FromString(wire), CreateTopicsResponse)
    assert decoded.topics == (codec_result,)
    assert hint == leader


def test_unknown_error_code_decodes_as_unknown_server_error() -> None:
    wire = pb.CreatableTopicResult(name="t", error_code=31337).SerializeToString()  # type: ignore[arg-type]
    result = decode(pb.CreatableTopicResult.FromString(wire), messages.CreatableTopicResult)
    assert result.error_code is ErrorCode.UNKNOWN_SERVER_ERROR


def test_unknown_enum_value_is_an_invalid_request() -> None:
    request = pb.ElectLeadersRequest(election_type=9)
    with pytest.raises(InvalidRequestError):
        decode(request, ElectLeadersRequest)


def test_manual_assignment_and_configs_round_trip() -> None:
    request = CreateTopicsRequest(
        topics=(CreatableTopic(name="a", assignments=((1, 2, 3), (2, 3, 1)), configs={"x": "1"}),),
        validate_only=True,
    )
    assert decode(encode(request), CreateTopicsRequest) == request
