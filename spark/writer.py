"""Writing DataFrames to topics: Spark's Kafka sink columns, through kraft's `Producer`.

Columns (others are ignored, as Kafka's sink does):

- ``value`` (binary or string, required);
- ``key`` (binary or string), ``partition`` (int; else the key's hash partition, or sticky);
- ``headers`` (``array<struct<key string, value binary>>``);
- ``topic`` (string), unless the ``topic`` option is set, which wins.

Each task writes its Arrow batches with one `Producer` (``acks=all``, idempotent), flushes,
and fails if any record failed, so a failed write fails the task and then the job. Like
Kafka's sink the write is at-least-once: a retried task writes its records again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from replication.clients import Producer, RecordFuture
from spark.options import WriteOptions

_FLUSH_EVERY = 100_000
"""Flush and check futures every this many records, so a bad write fails early."""


@dataclass(frozen=True)
class WrittenRecords(WriterCommitMessage):
    """What a task wrote: the driver sums these."""

    records: int


def check_write_schema(schema: StructType, options: WriteOptions) -> None:
    """Check the DataFrame's columns before any task runs.

    Raises:
        ValueError: no ``value`` column, a column of the wrong type, or no topic at all.
    """
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    bytes_like = (BinaryType, StringType)
    if "value" not in fields:
        raise ValueError("writing to kraft needs a value column (binary or string)")
    for name in ("value", "key"):
        if name in fields and not isinstance(fields[name], bytes_like):
            raise ValueError(f"the {name} column must be binary or string, not {fields[name]}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ValueError(f"the partition column must be int, not {fields['partition']}")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise ValueError(f"the topic column must be string, not {fields['topic']}")
    if "topic" not in fields and options.topic is None:
        raise ValueError("writing to kraft needs the topic option or a topic column")
    headers = fields.get("headers")
    if headers is not None:
        element = headers.elementType if isinstance(headers, ArrayType) else None
        names = (
            [(f.name, type(f.dataType)) for f in element.fields]
            if isinstance(element, StructType)
            else []
        )
        if names != [("key", StringType), ("value", BinaryType)]:
            raise ValueError(
                "the headers column must be array<struct<key: string, value: binary>>, "
                f"not {headers}"
            )


def write_batches(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row of ``batches``; the number of records written.

    Raises:
        KraftError: a record failed (after the producer's own retries).
    """
    producer = Producer(options.bootstrap, **_producer_options(options.producer))
    written = 0
    pending: list[RecordFuture] = []
    try:
        for batch in batches:
            pending.extend(_send_batch(producer, batch, options.topic))
            if len(pending) >= _FLUSH_EVERY:
                written += _flush(producer, pending)
                pending = []
        written += _flush(producer, pending)
    finally:
        producer.close(timeout=30)
    return written


def _producer_options(extra: Mapping[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {"linger.ms": "5", "batch.size": str(256 << 10)}
    options.update(extra)
    options["acks"] = "all"
    return options


def _flush(producer: Producer, pending: list[RecordFuture]) -> int:
    producer.flush()
    for future in pending:
        error = future.exception(timeout=0)
        if error is not None:
            raise error
    return len(pending)


def _send_batch(
    producer: Producer, batch: pa.RecordBatch, topic_option: str | None
) -> list[RecordFuture]:
    names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
    n = batch.num_rows
    values = _bytes_column(batch, names["value"])
    keys = _bytes_column(batch, names["key"]) if "key" in names else [None] * n
    partitions = (
        batch.column(names["partition"]).to_pylist() if "partition" in names else [None] * n
    )
    if topic_option is not None:
        topics: list[str | None] = [topic_option] * n
    else:
        topics = batch.column(names["topic"]).to_pylist()
    headers: list[Any] = (
        batch.column(names["headers"]).to_pylist() if "headers" in names else [None] * n
    )
    send = producer.send
    futures = []
    for topic, value, key, partition, record_headers in zip(
        topics, values, keys, partitions, headers, strict=True
    ):
        if not topic:
            raise ValueError("a row has no topic (null topic column and no topic option)")
        futures.append(
            send(
                topic,
                value=value,
                key=key,
                partition=partition,
                headers=[(h["key"], h["value"]) for h in record_headers]
                if record_headers
                else None,
            )
        )
    return futures


def _bytes_column(batch: pa.RecordBatch, index: int) -> list[bytes | None]:
    column = batch.column(index)
    values: list[Any] = column.to_pylist()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return [None if v is None else v.encode() for v in values]
    return values


class KraftArrowWriter(DataSourceArrowWriter):
    """``df.write.format("kraft")``: each task produces its Arrow batches."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_write_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return WrittenRecords(write_batches(self.options, iterator))


class KraftStreamArrowWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("kraft")``: each micro-batch's tasks produce their batches
    (at-least-once, like Kafka's sink)."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_write_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return WrittenRecords(write_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: the records are acknowledged by the time a task ends."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: records already written stay (at-least-once)."""


__all__ = [
    "KraftArrowWriter",
    "KraftStreamArrowWriter",
    "WrittenRecords",
    "check_write_schema",
    "write_batches",
]
