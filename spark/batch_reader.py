"""The batch reader of the ``kraft`` data source, and the executor side of both readers.

`KraftBatchReader` plans once, on the driver (`plan_ranges`: ListOffsets, then
`split_ranges`), into one `RangePartition` per `OffsetRange`; `read_range` reads one range on
an executor (`RangeFetcher`) as Arrow batches. The streaming reader (`spark.stream`) plans
per micro-batch and reads with the same `read_range`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from spark.fetcher import RangeFetcher
from spark.lookup import OffsetLookup
from spark.offsets import OffsetRange
from spark.options import ReadOptions
from spark.planning import plan_ranges


class RangePartition(InputPartition):
    """One Spark partition: one `OffsetRange` (``value``)."""

    def __init__(self, value: OffsetRange) -> None:
        super().__init__(value)


def read_range(
    options: ReadOptions, partition: InputPartition, columns: Sequence[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """The executor side of both readers: the range's records as Arrow batches (of only
    ``columns`` when given: see `KraftBatchReader`)."""
    r = partition.value
    assert isinstance(r, OffsetRange), r
    with RangeFetcher(
        options.bootstrap,
        fail_on_data_loss=options.fail_on_data_loss,
        fetch_max_bytes=options.fetch_max_bytes,
        tls=options.tls(),
        client_rack=options.client_rack,
        read_committed=options.read_committed,
    ) as fetcher:
        yield from fetcher.arrow_batches(
            r, include_headers=options.include_headers, columns=columns
        )


class KraftBatchReader(DataSourceReader):
    """Plans once, on the driver, when Spark asks for partitions.

    ``columns``: the columns of a user-specified schema (``.schema("offset bigint")``), a
    subset of the source's, read instead of all of them. pyspark 4.3 gives a Python data
    source's reader no column pruning (its `DataSourceReader` has ``pushFilters`` only), so
    Spark asks for every column even for a ``count()``; a schema of only ``topic``,
    ``partition``, ``offset`` or ``timestampType`` is read from the batch headers alone.
    """

    def __init__(self, options: ReadOptions, columns: Sequence[str] | None = None) -> None:
        self.options = options
        self.columns = None if columns is None else tuple(columns)

    def partitions(self) -> Sequence[InputPartition]:
        with OffsetLookup(
            self.options.bootstrap,
            tls=self.options.tls(),
            read_committed=self.options.read_committed,
        ) as lookup:
            ranges = plan_ranges(self.options, lookup)
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.options, partition, self.columns)


__all__ = ["KraftBatchReader", "RangePartition", "read_range"]
