"""``spark.readStream.format("kraft")``: micro-batches of offset ranges.

Offsets are Spark's Kafka form, ``{"topic": {"0": 23, "1": 5}}``: the next offset to read per
partition. Spark keeps them in the query's checkpoint (the offset log), so a restarted query
goes on from its last planned batch; ``commit`` lags one batch and changes nothing on the
brokers: the checkpoint, not the cluster, is the record of progress (as in Kafka's source).

- ``initialOffset``: ``startingOffsets`` (default ``latest``) or the starting timestamps.
- ``latestOffset(start, limit)``: every partition's high watermark, capped by the read limit:
  ``maxOffsetsPerTrigger`` (`getDefaultReadLimit` turns it into ``ReadMaxRows``), prorated by
  backlog (`rate_limit`); Spark passes ``ReadAllAvailable`` when a trigger wants everything.
  Partitions that appear later (a pattern matching a new topic, added partitions) start at
  their earliest offset, as in Kafka.
- ``trigger(availableNow=True)``: `prepareForTriggerAvailableNow` fixes the target offsets
  (the high watermarks at that moment) and no batch goes past them, so the query ends.

Needs pyspark >= 4.2 (``latestOffset(start, limit)``, ``getDefaultReadLimit``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from kraft.types import TopicPartition
from spark.batch_reader import RangePartition, read_range
from spark.lookup import OffsetLookup
from spark.offsets import (
    offsets_from_json,
    offsets_to_json,
    ranges_between,
    rate_limit,
    split_ranges,
)
from spark.options import EARLIEST, LATEST, OffsetSpec, ReadOptions


class KraftStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming reader; planning runs in Spark's driver-side Python process, ``read`` on
    executors."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._target: dict[TopicPartition, int] | None = None

    def _lookup(self) -> OffsetLookup:
        return OffsetLookup(
            self.options.bootstrap,
            tls=self.options.tls(),
            read_committed=self.options.read_committed,
        )

    def initialOffset(self) -> dict[str, dict[str, int]]:
        with self._lookup() as lookup:
            tps = lookup.partitions(self.options.subscription)
            starts = lookup.resolve(
                tps, self.options.starting, strategy=self.options.timestamp_strategy
            )
        return offsets_to_json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        with self._lookup() as lookup:
            tps = lookup.partitions(self.options.subscription)
            self._target = lookup.resolve(tps, OffsetSpec(default=LATEST))

    def latestOffset(
        self, start: dict[str, dict[str, int]], limit: ReadLimit
    ) -> dict[str, dict[str, int]]:
        starts = offsets_from_json(start)
        with self._lookup() as lookup:
            tps = lookup.partitions(self.options.subscription)
            latest = lookup.resolve(tps, OffsetSpec(default=LATEST))
            new = [tp for tp in latest if tp not in starts]
            begins = {**lookup.resolve(new, OffsetSpec(default=EARLIEST)), **starts}
        if self._target is not None:  # availableNow: nothing past the target
            target = self._target
            latest = {tp: min(end, target[tp]) for tp, end in latest.items() if tp in target}
        # NB: a high watermark below our position (an unclean election truncated the log)
        # must not move the query backwards: the next read reports the loss.
        ends = {tp: max(end, begins.get(tp, end)) for tp, end in latest.items()}
        for tp, offset in starts.items():
            ends.setdefault(tp, offset)  # a partition that vanished stays where it was
        if isinstance(limit, ReadMaxRows):
            ends = rate_limit(begins, ends, limit.max_rows)
        return offsets_to_json(ends)

    def partitions(
        self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]
    ) -> Sequence[InputPartition]:
        starts = offsets_from_json(start)
        ends = offsets_from_json(end)
        new = [tp for tp in ends if tp not in starts]
        if new:
            with self._lookup() as lookup:
                found = lookup.resolve(new, OffsetSpec(default=EARLIEST))
            starts.update({tp: min(offset, ends[tp]) for tp, offset in found.items()})
        ranges = split_ranges(
            ranges_between(starts, ends),
            min_partitions=self.options.min_partitions,
            max_records=self.options.max_records_per_partition,
        )
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.options, partition)

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Nothing to do: the checkpoint records progress (see the module docstring)."""


__all__ = ["KraftStreamReader"]
