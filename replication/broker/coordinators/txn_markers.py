"""Writing the markers of ended transactions (KIP-98 WriteTxnMarkers).

`write_markers` is the partition leader's side: one end-transaction marker
(`storage.control.build_marker_batch`) appended with acks=all to each named partition it leads,
answered per partition (NOT_LEADER_OR_FOLLOWER elsewhere: the coordinator looks the leader up
again and retries). Right before each append the leader checks the marker against the
producer's state (`ProducerStateManager.check_marker`): a late or zombie copy is refused with
INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED, and the coordinator counts the
partition done (`MARKER_SETTLED`). `send_markers` is the coordinator's: the partitions grouped
by leader, the local ones written here, the others sent over gRPC to their leader's
``WriteTxnMarkers``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import grpc

from kraft.types import OFFSETS_TOPIC, TopicPartition
from replication.codec import decode, encode
from replication.messages import (
    WritableTxnMarker,
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopic,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from replication.txn.coordinator import MARKER_SETTLED
from storage.control import build_marker_batch
from storage.errors import ErrorCode, KraftError
from storage.log import wall_clock_ms
from storage.records import read_header

if TYPE_CHECKING:
    from kraft.metadata import MetadataImage
    from replication.broker.host import ServedReplica

MARKER_TIMEOUT_MS: Final = 5_000
"""How long one marker's acks=all append may wait (Kafka: ``request.timeout.ms``)."""


def is_control_batch(records: bytes) -> bool:
    try:
        return read_header(records).is_control
    except KraftError:
        return False  # the leader's validation answers it


OffsetsMarkerHook = Callable[[int, int, bool], Awaitable[None]]
"""``(offsets partition, producer id, commit)``: a marker landed in ``__consumer_offsets``;
the group coordinator commits or drops that producer's pending offsets (Kafka's
``onTransactionCompleted``)."""


async def write_markers(
    replicas: Mapping[TopicPartition, ServedReplica],
    request: WriteTxnMarkersRequest,
    on_offsets_marker: OffsetsMarkerHook | None = None,
) -> WriteTxnMarkersResponse:
    """Append each marker to each of its partitions this broker leads (see the docstring)."""

    async def one(marker: WritableTxnMarker, tp: TopicPartition) -> ErrorCode:
        replica = replicas.get(tp)
        if replica is None or not replica.driver.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if not (
            -(2**15) <= marker.producer_epoch < 2**15
            and -(2**31) <= marker.coordinator_epoch < 2**31
        ):  # Kafka's INT16 / INT32 fields; kraft's gRPC carries them wider
            return ErrorCode.INVALID_REQUEST
        batch = build_marker_batch(
            commit=marker.transaction_result,
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            coordinator_epoch=marker.coordinator_epoch,
            timestamp_ms=wall_clock_ms(),
        )

        def admit() -> ErrorCode:  # synchronously with the append, as KIP-890's gate
            return replica.producer_state.check_marker(
                marker.producer_id,
                marker.producer_epoch,
                marker.coordinator_epoch,
                transaction_version=marker.transaction_version,
                high_watermark=replica.driver.high_watermark,
            )

        try:
            done = await replica.produce(-1, MARKER_TIMEOUT_MS, batch, admit)
        except KraftError as e:
            return e.code
        if done.error_code is ErrorCode.NONE and tp.topic == OFFSETS_TOPIC and on_offsets_marker:
            await on_offsets_marker(tp.partition, marker.producer_id, marker.transaction_result)
        return done.error_code

    results = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            codes = await asyncio.gather(
                *(one(marker, TopicPartition(topic.name, p)) for p in topic.partition_indexes)
            )
            topics.append(
                WritableTxnMarkerTopicResult(
                    name=topic.name,
                    partitions=tuple(
                        WritableTxnMarkerPartitionResult(partition_index=p, error_code=c)
                        for p, c in zip(topic.partition_indexes, codes, strict=True)
                    ),
                )
            )
        results.append(
            WritableTxnMarkerResult(producer_id=marker.producer_id, topics=tuple(topics))
        )
    return WriteTxnMarkersResponse(markers=tuple(results))


async def send_markers(
    *,
    image: MetadataImage,
    node_id: int,
    replicas: Mapping[TopicPartition, ServedReplica],
    stub: Callable[[str], Any],
    marker: WritableTxnMarker,
    partitions: frozenset[TopicPartition],
    on_offsets_marker: OffsetsMarkerHook | None = None,
) -> set[TopicPartition]:
    """Write ``marker`` to each of ``partitions``' leaders; the partitions still to do (their
    leader unknown, unreachable or not leading any more: retry them). A partition whose topic
    is gone counts as done, as in Kafka."""
    by_leader: dict[int, list[TopicPartition]] = {}
    remaining: set[TopicPartition] = set()
    for tp in partitions:
        description = image.describe_topic(tp.topic)
        if description is None or tp.partition >= len(description.partitions):
            continue  # deleted: nothing to mark
        leader = description.partitions[tp.partition].leader
        if leader < 0:
            remaining.add(tp)
        else:
            by_leader.setdefault(leader, []).append(tp)

    async def to(leader: int, tps: list[TopicPartition]) -> WriteTxnMarkersResponse | None:
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = WriteTxnMarkersRequest(
            markers=(
                WritableTxnMarker(
                    producer_id=marker.producer_id,
                    producer_epoch=marker.producer_epoch,
                    transaction_result=marker.transaction_result,
                    coordinator_epoch=marker.coordinator_epoch,
                    transaction_version=marker.transaction_version,
                    topics=tuple(
                        WritableTxnMarkerTopic(name=t, partition_indexes=tuple(ps))
                        for t, ps in by_topic.items()
                    ),
                ),
            )
        )
        if leader == node_id:
            return await write_markers(replicas, request, on_offsets_marker)
        registration = image.broker(leader)
        if registration is None or not registration.listeners:
            return None
        try:
            reply = await stub(registration.listeners[0].address).WriteTxnMarkers(
                encode(request), timeout=MARKER_TIMEOUT_MS / 1000 + 1
            )
        except grpc.RpcError:
            return None
        response: WriteTxnMarkersResponse = decode(reply, WriteTxnMarkersResponse)
        return response

    leaders = list(by_leader.items())
    answers = await asyncio.gather(*(to(leader, tps) for leader, tps in leaders))
    for (_, tps), answer in zip(leaders, answers, strict=True):
        if answer is None:
            remaining.update(tps)
            continue
        done = {
            TopicPartition(t.name, p.partition_index)
            for m in answer.markers
            for t in m.topics
            for p in t.partitions
            if p.error_code in MARKER_SETTLED
        }
        remaining.update(tp for tp in tps if tp not in done)
    return remaining


__all__ = [
    "MARKER_TIMEOUT_MS",
    "OffsetsMarkerHook",
    "is_control_batch",
    "send_markers",
    "write_markers",
]
