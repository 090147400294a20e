"""Offset ranges and how to cut them: the pure half of planning a read.

A read is a set of `OffsetRange`s, one per Spark partition (Kafka's ``KafkaOffsetRange``):
``[from_offset, until_offset)`` of one topic partition. Planning is two steps:

1. resolve each partition's start and end to concrete offsets (the shell does that with
   ListOffsets: `spark.lookup`);
2. `split_ranges` cuts big ranges so tasks stay balanced, the way Spark's
   ``KafkaOffsetRangeCalculator`` does for ``minPartitions``: with ``min_partitions`` more than
   the number of ranges, each range gets ``round(size / ideal)`` parts (at least one), where
   ``ideal = total / min_partitions``; and no part holds more than ``max_records`` offsets
   (``maxRecordsPerPartition``).

`rate_limit` is the streaming half: how far each partition may advance in one micro-batch under
``maxOffsetsPerTrigger``, prorated by each partition's backlog as Kafka's ``rateLimit`` does.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kraft.types import TopicPartition


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[from_offset, until_offset)`` of one topic partition: one Spark partition.

    Raises:
        ValueError: a negative offset, or ``until_offset < from_offset``.
    """

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    def __post_init__(self) -> None:
        if self.partition < 0 or self.from_offset < 0 or self.until_offset < self.from_offset:
            raise ValueError(
                f"invalid offset range {self.topic}-{self.partition} "
                f"[{self.from_offset}, {self.until_offset})"
            )

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        """Offsets in the range (records, unless some offsets hold control batches)."""
        return self.until_offset - self.from_offset

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}[{self.from_offset},{self.until_offset})"


def divide_range(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``r`` cut into ``parts`` contiguous ranges of nearly equal size (never empty ones,
    unless ``r`` itself is empty)."""
    parts = max(1, min(parts, r.size))
    if parts == 1:
        return [r]
    bounds = [r.from_offset + r.size * i // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, bounds[i], bounds[i + 1]) for i in range(parts)]


def split_ranges(
    ranges: Sequence[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records: int | None = None,
) -> list[OffsetRange]:
    """Cut ``ranges`` for balanced tasks; empty ranges are dropped.

    Args:
        min_partitions: aim for at least this many ranges (Spark's ``minPartitions``).
        max_records: no range holds more offsets than this (``maxRecordsPerPartition``).

    Raises:
        ValueError: a limit below 1.
    """
    if min_partitions is not None and min_partitions < 1:
        raise ValueError(f"minPartitions must be >= 1, not {min_partitions}")
    if max_records is not None and max_records < 1:
        raise ValueError(f"maxRecordsPerPartition must be >= 1, not {max_records}")
    nonempty = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in nonempty)
    out: list[OffsetRange] = []
    for r in nonempty:
        parts = 1
        if min_partitions is not None and min_partitions > len(nonempty) and total > 0:
            ideal = total / min_partitions
            parts = max(1, round(r.size / ideal))
        if max_records is not None:
            parts = max(parts, math.ceil(r.size / max_records))
        out.extend(divide_range(r, parts))
    return out


def ranges_between(
    starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """One range per partition in ``ends``, from its start (0 when missing) to its end, in
    topic and partition order.

    Raises:
        ValueError: a start after its end (Kafka: "startingOffsets ... > endingOffsets").
    """
    out = []
    for tp in sorted(ends, key=lambda t: (t.topic, t.partition)):
        start, end = starts.get(tp, 0), ends[tp]
        if start > end:
            raise ValueError(
                f"the starting offset {start} of {tp} is after its ending offset {end}"
            )
        out.append(OffsetRange(tp.topic, tp.partition, start, end))
    return out


def rate_limit(
    starts: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """The end offsets of a micro-batch that reads at most ``limit`` offsets in total, each
    partition's share prorated by its backlog (Kafka's ``KafkaMicroBatchStream.rateLimit``).

    Raises:
        ValueError: ``limit`` below 1.
    """
    if limit < 1:
        raise ValueError(f"maxOffsetsPerTrigger must be >= 1, not {limit}")
    sizes = {tp: max(0, end - starts.get(tp, end)) for tp, end in latest.items()}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        begin = starts.get(tp, end)
        prorate = limit * (sizes[tp] / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begin + step)
    return out


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset form: ``{"topic": {"0": 23, "1": 5}}``."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets, key=lambda t: (t.topic, t.partition)):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """The inverse of `offsets_to_json`.

    Raises:
        ValueError: not that shape.
    """
    out = {}
    try:
        for topic, parts in data.items():
            for partition, offset in parts.items():
                out[TopicPartition(str(topic), int(partition))] = int(offset)
    except (AttributeError, TypeError, ValueError) as e:
        raise ValueError(f"not a {{topic: {{partition: offset}}}} mapping: {data!r}") from e
    return out


def group_by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return {t: sorted(ps) for t, ps in out.items()}


__all__ = [
    "OffsetRange",
    "divide_range",
    "group_by_topic",
    "offsets_from_json",
    "offsets_to_json",
    "ranges_between",
    "rate_limit",
    "split_ranges",
]
