"""`GroupLag`: the consumer-group lag metrics of a broker, for the groups it coordinates
(``kafka_consumergroup_lag`` and ``kafka_consumergroup_current_offset``, see
`kraft.metrics.kafka`).

Lag is a partition's high watermark (the end a ``read_uncommitted`` consumer reads to) minus
the group's committed offset. The high watermark comes from this broker's own replica of the
partition when it holds one: exact where it leads, at most one fetch behind where it follows.
For the partitions it holds no replica of, `run` asks their leaders (ListOffsets, latest) every
`REFRESH_INTERVAL_S` seconds, so those samples are at most that old; a partition whose leader
did not answer has no lag sample until it does.

The metrics endpoint reads `metric_values` on its own thread; `refresh` runs on the event loop
and swaps in a new dict, so a scrape sees one refresh or the next, never half of one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import grpc
import structlog

from kraft.metrics.kafka import group_values
from kraft.metrics.registry import GaugeValue
from kraft.types import TopicPartition
from replication.codec import decode, encode
from replication.messages import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from storage.errors import ErrorCode

if TYPE_CHECKING:
    from kraft.metadata.image import MetadataImage

REFRESH_INTERVAL_S = 5.0
LIST_TIMEOUT_S = 5.0

Committed = Callable[[], list[tuple[str, str, int, int]]]
"""``(group, topic, partition, committed offset)`` of the groups coordinated here; may raise
RuntimeError when read off the event loop while it changes them."""
ListLatest = Callable[[int, Sequence[TopicPartition]], Awaitable[dict[TopicPartition, int]]]
"""``(leader id, partitions)`` -> the high watermarks that leader reported (missing: no
answer for that partition)."""

_log = structlog.get_logger("replication.broker.coordinators.group_lag")


class GroupLag:
    """Args:
    committed: the committed offsets of the groups coordinated here.
    local_high_watermark: this broker's replica's high watermark, None without a replica.
    leader_of: the partition's leader from the metadata image, None if it has none.
    list_latest: asks a leader for high watermarks (the broker's ListOffsets client).
    """

    def __init__(
        self,
        *,
        committed: Committed,
        local_high_watermark: Callable[[TopicPartition], int | None],
        leader_of: Callable[[TopicPartition], int | None],
        list_latest: ListLatest,
    ) -> None:
        self._committed = committed
        self._local = local_high_watermark
        self._leader_of = leader_of
        self._list_latest = list_latest
        self._remote: dict[TopicPartition, int] = {}

    async def run(self) -> None:
        """`refresh` every `REFRESH_INTERVAL_S`, forever; never raises (a failed refresh is
        logged and the old samples stay until the next)."""
        while True:
            try:
                await self.refresh()
            except Exception as e:  # a metric must never take the broker down
                _log.warning("group_lag_refresh_failed", error=repr(e)[:200])
            await asyncio.sleep(REFRESH_INTERVAL_S)

    async def refresh(self) -> None:
        """Ask the leaders of the committed partitions this broker holds no replica of."""
        wanted = {TopicPartition(t, p) for _, t, p, _ in self._committed()}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(wanted, key=lambda x: (x.topic, x.partition)):
            if self._local(tp) is not None:
                continue
            leader = self._leader_of(tp)
            if leader is not None:
                by_leader.setdefault(leader, []).append(tp)
        fresh: dict[TopicPartition, int] = {}
        for leader, partitions in by_leader.items():
            fresh.update(await self._list_latest(leader, partitions))
        self._remote = fresh

    def metric_values(self) -> dict[str, GaugeValue]:
        remote = self._remote

        def high_watermark(topic: str, partition: int) -> int | None:
            tp = TopicPartition(topic, partition)
            local = self._local(tp)
            return local if local is not None else remote.get(tp)

        try:
            return group_values(self._committed(), high_watermark)
        except RuntimeError:  # the groups changed under the copy: no group gauges this scrape
            return {}


async def list_latest_offsets(
    image: MetadataImage,
    stub: Callable[[str], Any],
    leader_id: int,
    partitions: Sequence[TopicPartition],
) -> dict[TopicPartition, int]:
    """The high watermarks ``leader_id`` reports for ``partitions`` (ListOffsets, latest, as a
    consumer asks); partitions it did not answer for (or all, if it is unreachable) are left
    out. ``stub(address)``: a ``kraft.v1.Broker`` stub."""
    registration = image.broker(leader_id)
    if registration is None or not registration.listeners:
        return {}
    by_topic: dict[str, list[ListOffsetsPartition]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(ListOffsetsPartition(partition_index=tp.partition))
    request = ListOffsetsRequest(
        topics=tuple(ListOffsetsTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    )
    try:
        reply = await stub(registration.listeners[0].address).ListOffsets(
            encode(request), timeout=LIST_TIMEOUT_S
        )
    except grpc.RpcError:
        return {}
    response = decode(reply, ListOffsetsResponse)
    return {
        TopicPartition(t.name, r.partition_index): r.offset
        for t in response.topics
        for r in t.partitions
        if r.error_code is ErrorCode.NONE
    }


__all__ = ["REFRESH_INTERVAL_S", "GroupLag", "list_latest_offsets"]
