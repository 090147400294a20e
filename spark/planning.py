"""Planning a batch read: options or ``(topic, starting, ending)`` specs to `OffsetRange`s.

The driver resolves every partition's start and end with `OffsetLookup` (ListOffsets), then
cuts the ranges with `split_ranges` so no task is much bigger than the others. Executors never
plan: they get ranges with concrete offsets, so a task reads the same records however often
Spark retries it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeAlias

from kraft.types import TopicPartition
from spark.lookup import OffsetLookup
from spark.offsets import OffsetRange, ranges_between, split_ranges
from spark.options import EARLIEST, LATEST, OffsetSpec, ReadOptions, Subscribe

DEFAULT_MAX_RECORDS_PER_RANGE = 1_000_000
"""`offset_ranges` splits ranges larger than this (about 100 MB of 100-byte records)."""

Position: TypeAlias = str | int | Mapping[int, int]
"""``"earliest"``, ``"latest"``, one offset for every partition, or ``{partition: offset}``
(-2 earliest, -1 latest)."""


def plan_ranges(options: ReadOptions, lookup: OffsetLookup) -> list[OffsetRange]:
    """The ranges a batch read with ``options`` covers, split for balance.

    Raises:
        UnknownTopicOrPartitionError: a subscribed topic does not exist.
        ValueError: a starting offset after its ending offset.
    """
    tps = lookup.partitions(options.subscription)
    starts = lookup.resolve(tps, options.starting, strategy=options.timestamp_strategy)
    ends = lookup.resolve(tps, options.ending, strategy="latest")
    ending = options.ending
    explicit = [tp for tp in tps if ending.timestamp_for(tp) is None and ending.offset_for(tp) >= 0]
    if explicit:  # fail now, not after a task waited for offsets that do not exist
        latest = lookup.resolve(explicit, OffsetSpec(default=LATEST))
        for tp in explicit:
            if ends[tp] > latest[tp]:
                raise ValueError(
                    f"endingOffsets: {ends[tp]} for {tp} is past its latest offset {latest[tp]}"
                )
    return split_ranges(
        ranges_between(starts, ends),
        min_partitions=options.min_partitions,
        max_records=options.max_records_per_partition,
    )


def offset_ranges(
    bootstrap: str,
    specs: Iterable[tuple[str, Position, Position]],
    *,
    min_partitions: int | None = None,
    max_records_per_range: int | None = DEFAULT_MAX_RECORDS_PER_RANGE,
    timeout_s: float = 30.0,
) -> list[OffsetRange]:
    """Offset ranges for `spark.topic_rdd` from ``(topic, starting, ending)`` specs.

    Example: ``offset_ranges(bootstrap, [("events", "earliest", "latest"),
    ("audit", {0: 100}, {0: 200})])``; partitions a mapping leaves out start at the earliest
    offset and end at the latest.

    Args:
        min_partitions: split so there are at least about this many ranges.
        max_records_per_range: split ranges larger than this (None: never).

    Raises:
        UnknownTopicOrPartitionError: no such topic.
        ValueError: a malformed position, or a start after its end.
    """
    ranges: list[OffsetRange] = []
    with OffsetLookup(bootstrap, timeout_s=timeout_s) as lookup:
        for topic, starting, ending in specs:
            tps = lookup.partitions(Subscribe((topic,)))
            starts = lookup.resolve(tps, _spec(topic, starting, EARLIEST, "starting"))
            ends = lookup.resolve(tps, _spec(topic, ending, LATEST, "ending"))
            ranges.extend(ranges_between(starts, ends))
    return split_ranges(ranges, min_partitions=min_partitions, max_records=max_records_per_range)


def _spec(topic: str, position: Position, default: int, what: str) -> OffsetSpec:
    if isinstance(position, str):
        word = position.strip().lower()
        if word == "earliest" and what == "starting":
            return OffsetSpec(default=EARLIEST)
        if word == "latest":
            return OffsetSpec(default=LATEST)
        raise ValueError(f"{what} position of {topic} must be earliest, latest, or offsets")
    if isinstance(position, int) and not isinstance(position, bool):
        if position < EARLIEST:
            raise ValueError(f"{what} offset of {topic} must be >= -2, not {position}")
        return OffsetSpec(default=position)
    if isinstance(position, Mapping):
        offsets: dict[TopicPartition, int] = {}
        for partition, offset in position.items():
            if not isinstance(offset, int) or offset < EARLIEST:
                raise ValueError(f"{what} offset {offset!r} of {topic}-{partition} is invalid")
            offsets[TopicPartition(topic, int(partition))] = offset
        return OffsetSpec(default=default, offsets=offsets)
    raise ValueError(f"{what} position of {topic} is not a string, int or mapping: {position!r}")


__all__ = ["DEFAULT_MAX_RECORDS_PER_RANGE", "Position", "offset_ranges", "plan_ranges"]
