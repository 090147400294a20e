"""Proto <-> dataclass conversion for the broker APIs: the one place broker protos are touched.

The dataclasses of `replication.messages` carry the names and field names of
``proto/kraft/v1/broker.proto``, so this module reuses the by-name converter of
`kraft.transport.controller_codec` (``fill_message`` / ``read_message``, driven by type hints)
with the broker's generated module. The mapping table in that module's docstring holds here
too; in particular ``X | None`` of a dataclass is a singular message field whose presence
means "set" (the ``current_leader`` and ``diverging_epoch`` hints), and ``bytes`` fields
(``records``) are copied as they are: the codec never parses record batches.

The hot messages (Produce and Fetch, both ways: every produced batch and every follower fetch
crosses them) have hand-written converters instead, with the same results: the by-name
converter resolves type hints per field and costs ~0.3-0.5 ms per Fetch, a fifth of a busy
broker's event loop in a profile of `kraft bench produce`. `tests/clients/test_broker_codec.py`
checks both ways against the generic converter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from google.protobuf.message import Message

from kraft._generated import broker_pb2 as pb

# NB: the generic converter's helpers are module-private there; they are the approach the
# controller codec documents and tests, shared here rather than copied.
from kraft.transport.controller_codec import fill_message, read_message
from replication.messages import (
    AbortedTransaction,
    BrokerFetchRequest,
    BrokerFetchResponse,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionData,
    FetchTopic,
    FetchTopicResponse,
    LeaderIdAndEpoch,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    ProduceTopicResponse,
)
from storage.errors import ErrorCode

T = TypeVar("T")

_ERROR_CODES: dict[int, ErrorCode] = {int(c.value): c for c in ErrorCode}
_UNKNOWN_SERVER_ERROR = ErrorCode.UNKNOWN_SERVER_ERROR
_pb: Any = pb  # NB: untyped for the hand-written converters (keyword construction)


def _error_code(value: int) -> ErrorCode:
    return _ERROR_CODES.get(value, _UNKNOWN_SERVER_ERROR)


# -- the hot messages, by hand -------------------------------------------------------------------


def _encode_produce_request(m: ProduceRequest) -> Any:
    # NB: top-down with add(), as _encode_fetch_response: a constructor copies its submessages.
    out = _pb.ProduceRequest(
        acks=m.acks, timeout_ms=m.timeout_ms, transactional_id=m.transactional_id
    )
    for t in m.topic_data:
        topic = out.topic_data.add(name=t.name)
        for p in t.partition_data:
            topic.partition_data.add(index=p.index, records=p.records)
    return out


def _decode_produce_request(m: Any) -> ProduceRequest:
    return ProduceRequest(
        acks=m.acks,
        timeout_ms=m.timeout_ms,
        topic_data=tuple(
            ProduceTopicData(
                name=t.name,
                partition_data=tuple(
                    ProducePartitionData(index=p.index, records=p.records) for p in t.partition_data
                ),
            )
            for t in m.topic_data
        ),
        transactional_id=m.transactional_id,
    )


def _encode_leader(leader: LeaderIdAndEpoch) -> Any:
    return _pb.LeaderIdAndEpoch(leader_id=leader.leader_id, leader_epoch=leader.leader_epoch)


def _decode_leader(m: Any) -> LeaderIdAndEpoch:
    leader = m.current_leader
    return LeaderIdAndEpoch(leader_id=leader.leader_id, leader_epoch=leader.leader_epoch)


def _encode_produce_partition_response(p: ProducePartitionResponse) -> Any:
    out = _pb.ProducePartitionResponse(
        index=p.index,
        error_code=int(p.error_code.value),
        error_message=p.error_message,
        base_offset=p.base_offset,
        log_append_time_ms=p.log_append_time_ms,
        log_start_offset=p.log_start_offset,
    )
    if p.current_leader is not None:
        out.current_leader.CopyFrom(_encode_leader(p.current_leader))
    return out


def _encode_produce_response(m: ProduceResponse) -> Any:
    return _pb.ProduceResponse(
        responses=[
            _pb.ProduceTopicResponse(
                name=t.name,
                partition_responses=[
                    _encode_produce_partition_response(p) for p in t.partition_responses
                ],
            )
            for t in m.responses
        ]
    )


def _decode_produce_response(m: Any) -> ProduceResponse:
    return ProduceResponse(
        responses=tuple(
            ProduceTopicResponse(
                name=t.name,
                partition_responses=tuple(
                    ProducePartitionResponse(
                        index=p.index,
                        error_code=_error_code(p.error_code),
                        error_message=p.error_message,
                        base_offset=p.base_offset,
                        log_append_time_ms=p.log_append_time_ms,
                        log_start_offset=p.log_start_offset,
                        current_leader=_decode_leader(p) if p.HasField("current_leader") else None,
                    )
                    for p in t.partition_responses
                ),
            )
            for t in m.responses
        )
    )


def _encode_fetch_request(m: BrokerFetchRequest) -> Any:
    partition = _pb.FetchPartition
    return _pb.BrokerFetchRequest(
        replica_id=m.replica_id,
        replica_epoch=m.replica_epoch,
        max_wait_ms=m.max_wait_ms,
        min_bytes=m.min_bytes,
        max_bytes=m.max_bytes,
        isolation_level=m.isolation_level,
        topics=[
            _pb.FetchTopic(
                topic=t.topic,
                partitions=[
                    partition(
                        partition=p.partition,
                        current_leader_epoch=p.current_leader_epoch,
                        fetch_offset=p.fetch_offset,
                        last_fetched_epoch=p.last_fetched_epoch,
                        log_start_offset=p.log_start_offset,
                        partition_max_bytes=p.partition_max_bytes,
                    )
                    for p in t.partitions
                ],
            )
            for t in m.topics
        ],
        rack_id=m.rack_id,
    )


def _decode_fetch_request(m: Any) -> BrokerFetchRequest:
    return BrokerFetchRequest(
        replica_id=m.replica_id,
        replica_epoch=m.replica_epoch,
        max_wait_ms=m.max_wait_ms,
        min_bytes=m.min_bytes,
        max_bytes=m.max_bytes,
        isolation_level=m.isolation_level,
        topics=tuple(
            FetchTopic(
                topic=t.topic,
                partitions=tuple(
                    FetchPartition(
                        partition=p.partition,
                        current_leader_epoch=p.current_leader_epoch,
                        fetch_offset=p.fetch_offset,
                        last_fetched_epoch=p.last_fetched_epoch,
                        log_start_offset=p.log_start_offset,
                        partition_max_bytes=p.partition_max_bytes,
                    )
                    for p in t.partitions
                ),
            )
            for t in m.topics
        ),
        rack_id=m.rack_id,
    )


def _fill_fetch_partition_data(out: Any, p: FetchPartitionData) -> None:
    """Set ``out`` (a ``FetchPartitionData`` already in its response) from ``p``."""
    out.partition_index = p.partition_index
    out.error_code = int(p.error_code.value)
    out.error_message = p.error_message
    out.high_watermark = p.high_watermark
    out.last_stable_offset = p.last_stable_offset
    out.log_start_offset = p.log_start_offset
    out.preferred_read_replica = p.preferred_read_replica
    out.records = p.records
    for a in p.aborted_transactions:
        out.aborted_transactions.add(producer_id=a.producer_id, first_offset=a.first_offset)
    if p.diverging_epoch is not None:
        d = p.diverging_epoch
        out.diverging_epoch.CopyFrom(_pb.EpochEndOffset(epoch=d.epoch, end_offset=d.end_offset))
    if p.current_leader is not None:
        out.current_leader.CopyFrom(_encode_leader(p.current_leader))


def _encode_fetch_response(m: BrokerFetchResponse) -> Any:
    # NB: built top-down with add(): a message handed to its parent's constructor is copied
    # whole, records included, once per level (30x the build time of a 2 MiB response).
    out = _pb.BrokerFetchResponse(error_code=int(m.error_code.value))
    for t in m.responses:
        topic = out.responses.add(topic=t.topic)
        for p in t.partitions:
            _fill_fetch_partition_data(topic.partitions.add(), p)
    return out


def _decode_fetch_partition_data(p: Any) -> FetchPartitionData:
    diverging = None
    if p.HasField("diverging_epoch"):
        d = p.diverging_epoch
        diverging = EpochEndOffset(epoch=d.epoch, end_offset=d.end_offset)
    return FetchPartitionData(
        partition_index=p.partition_index,
        error_code=_error_code(p.error_code),
        error_message=p.error_message,
        high_watermark=p.high_watermark,
        last_stable_offset=p.last_stable_offset,
        log_start_offset=p.log_start_offset,
        diverging_epoch=diverging,
        current_leader=_decode_leader(p) if p.HasField("current_leader") else None,
        preferred_read_replica=p.preferred_read_replica,
        records=p.records,
        aborted_transactions=tuple(
            AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
            for a in p.aborted_transactions
        ),
    )


def _decode_fetch_response(m: Any) -> BrokerFetchResponse:
    return BrokerFetchResponse(
        error_code=_error_code(m.error_code),
        responses=tuple(
            FetchTopicResponse(
                topic=t.topic,
                partitions=tuple(_decode_fetch_partition_data(p) for p in t.partitions),
            )
            for t in m.responses
        ),
    )


_ENCODERS: dict[type, Callable[[Any], Any]] = {
    ProduceRequest: _encode_produce_request,
    ProduceResponse: _encode_produce_response,
    BrokerFetchRequest: _encode_fetch_request,
    BrokerFetchResponse: _encode_fetch_response,
}
_DECODERS: dict[type, Callable[[Any], Any]] = {
    ProduceRequest: _decode_produce_request,
    ProduceResponse: _decode_produce_response,
    BrokerFetchRequest: _decode_fetch_request,
    BrokerFetchResponse: _decode_fetch_response,
}


# -- the API -------------------------------------------------------------------------------------


def encode(message: Any) -> Message:
    """The proto message of the same name in ``broker.proto`` for a dataclass message."""
    fast = _ENCODERS.get(type(message))
    if fast is not None:
        encoded: Message = fast(message)
        return encoded
    out: Message = getattr(pb, type(message).__name__)()
    fill_message(out, message)
    return out


def encode_generic(message: Any) -> Message:
    """`encode` by the by-name converter only (tests compare the hand-written ones with it)."""
    out: Message = getattr(pb, type(message).__name__)()
    fill_message(out, message)
    return out


def decode(message: Message, cls: type[T]) -> T:
    """The dataclass ``cls`` for a proto message.

    An unknown `ErrorCode` decodes as UNKNOWN_SERVER_ERROR (a newer broker's code).
    """
    fast = _DECODERS.get(cls)
    if fast is not None:
        return cast(T, fast(message))
    return read_message(message, cls)


def decode_generic(message: Message, cls: type[T]) -> T:
    """`decode` by the by-name converter only (for tests)."""
    return read_message(message, cls)


def decode_bytes(data: bytes, cls: type[T]) -> T:
    """`decode` from serialized proto bytes (the message type is the one named like ``cls``)."""
    proto: Message = getattr(pb, cls.__name__).FromString(data)
    return decode(proto, cls)


__all__ = ["decode", "decode_bytes", "decode_generic", "encode", "encode_generic"]
