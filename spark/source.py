"""The ``kraft`` data source (``pyspark.sql.datasource``): batch and streaming reads, writes.

::

    import spark as kraft_spark

    kraft_spark.register(session)
    df = (session.read.format("kraft")
          .option("kraft.bootstrap", bootstrap)
          .option("subscribe", "events")
          .load())

Batch reads plan on the driver and read on executors, one Spark partition per `OffsetRange`,
yielding Arrow batches in the Kafka source's exact schema (`storage.columnar.schema`); both
sides are in `spark.batch_reader`. The options are Spark's Kafka source's (`spark.options`).
The streaming reader is `spark.stream.KraftStreamReader`; the writers are in `spark.writer`.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from spark.batch_reader import KraftBatchReader
from spark.options import ReadOptions, WriteOptions, lower_keys
from spark.stream import KraftStreamReader
from spark.writer import KraftArrowWriter, KraftStreamArrowWriter
from storage.columnar.schema import schema_ddl


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
        return KraftStreamReader(ReadOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KraftArrowWriter(WriteOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KraftStreamArrowWriter(WriteOptions.parse(self.options), schema)


__all__ = ["KraftDataSource"]
