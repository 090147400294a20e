"""The ``kraft`` data source (``pyspark.sql.datasource``): batch and streaming reads, writes.

::

    import spark as kraft_spark

    kraft_spark.register(session)
    df = (session.read.format("kraft")
          .option("kraft.bootstrap", bootstrap)
          .option("subscribe", "events")
          .load())

Batch reads plan on the driver (`plan_ranges`: ListOffsets, then `split_ranges`) and read on
executors (`RangeFetcher`), one Spark partition per `OffsetRange`, yielding Arrow batches in
the Kafka source's exact schema (`spark.columns`). The options are Spark's Kafka source's
(`spark.options`). The streaming reader is `spark.stream.KraftStreamReader`; the writers are in
`spark.writer`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from spark.columns import schema_ddl
from spark.fetcher import RangeFetcher
from spark.lookup import OffsetLookup
from spark.offsets import OffsetRange
from spark.options import ReadOptions, WriteOptions, lower_keys
from spark.planning import plan_ranges
from spark.writer import KraftArrowWriter, KraftStreamArrowWriter


class RangePartition(InputPartition):
    """One Spark partition: one `OffsetRange` (``value``)."""

    def __init__(self, value: OffsetRange) -> None:
        super().__init__(value)


def read_range(options: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The executor side of both readers: the range's records as Arrow batches."""
    r = partition.value
    assert isinstance(r, OffsetRange), r
    with RangeFetcher(
        options.bootstrap,
        fail_on_data_loss=options.fail_on_data_loss,
        fetch_max_bytes=options.fetch_max_bytes,
    ) as fetcher:
        yield from fetcher.arrow_batches(r, include_headers=options.include_headers)


class KraftBatchReader(DataSourceReader):
    """Plans once, on the driver, when Spark asks for partitions."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        with OffsetLookup(self.options.bootstrap) as lookup:
            ranges = plan_ranges(self.options, lookup)
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.options, partition)


class KraftDataSource(DataSource):
    """``format("kraft")``: Spark's Kafka source and sink over kraft's brokers.

    Raises:
        ValueError: (when the query is planned) a missing or malformed option.
    """

    @classmethod
    def name(cls) -> str:
        return "kraft"

    def schema(self) -> str:
        return schema_ddl(self._include_headers())

    def _include_headers(self) -> bool:
        return lower_keys(self.options).get("includeheaders", "false").strip().lower() == "true"

    def reader(self, schema: StructType) -> DataSourceReader:
        return KraftBatchReader(ReadOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from spark.stream import KraftStreamReader

        return KraftStreamReader(ReadOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KraftArrowWriter(WriteOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KraftStreamArrowWriter(WriteOptions.parse(self.options), schema)


__all__ = ["KraftBatchReader", "KraftDataSource", "RangePartition", "read_range"]
