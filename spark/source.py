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
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

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
        return KraftBatchReader(ReadOptions.parse(self.options), self._columns(schema))

    def _columns(self, schema: StructType) -> list[str] | None:
        """The columns of a user-specified schema (None: the source's own, all of them).

        Raises:
            ValueError: a column the source does not have, or of another type.
        """
        full = _source_types(self._include_headers())
        names = [f.name for f in schema.fields]
        if names == list(full):
            return None
        for f in schema.fields:
            if full.get(f.name) != f.dataType:
                raise ValueError(
                    f"the kraft source has no column {f.name[:100]!r} of type "
                    f"{f.dataType.simpleString()[:100]}: its columns are {self.schema()}"
                )
        return names

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KraftStreamReader(ReadOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KraftArrowWriter(WriteOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KraftStreamArrowWriter(WriteOptions.parse(self.options), schema)


def _source_types(include_headers: bool) -> dict[str, DataType]:
    """`schema_ddl` as Spark types, built without a SparkContext (a Python worker has none to
    parse DDL with)."""
    types: dict[str, DataType] = {
        "key": BinaryType(),
        "value": BinaryType(),
        "topic": StringType(),
        "partition": IntegerType(),
        "offset": LongType(),
        "timestamp": TimestampType(),
        "timestampType": IntegerType(),
    }
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        types["headers"] = ArrayType(header)
    return types


__all__ = ["KraftDataSource"]
