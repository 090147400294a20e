"""v2 record batches decoded straight into Arrow columns, in Spark's Kafka source schema.

The schema is exactly Spark's Kafka source's (``KafkaRecordToRowConverter``)::

    key binary, value binary, topic string, partition int, offset bigint,
    timestamp timestamp, timestampType int[, headers array<struct<key string, value binary>>]

Spark does not cast what a Python data source yields, so the Arrow types must match to the
letter: ``partition`` is int32 and ``timestamp`` is ``timestamp[us, tz=UTC]``. ``headers`` is
null for a record without headers, as in Spark's Kafka source.

This is the general path (compressed batches, records with headers): it decodes with
storage's `record_tuples` (uncompressed batches in place, one tuple per record). Offsets and
timestamps go to ``array('q')`` buffers that Arrow wraps without a copy; topic, partition and
timestamp type are built per batch, not per record. The common case takes the numpy path in
`storage.columnar.vectorized` instead.
"""

from __future__ import annotations

from array import array
from typing import Any, Final

import pyarrow as pa

from storage.records import iter_batches, record_tuples

HEADER_STRUCT: Final = pa.struct([("key", pa.string()), ("value", pa.binary())])
HEADERS_TYPE: Final = pa.list_(HEADER_STRUCT)
TIMESTAMP_TYPE: Final = pa.timestamp("us", tz="UTC")

_FIELDS: Final = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
]
ARROW_SCHEMA: Final = pa.schema(_FIELDS)
ARROW_SCHEMA_WITH_HEADERS: Final = pa.schema([*_FIELDS, pa.field("headers", HEADERS_TYPE)])

SCHEMA_DDL: Final = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int"
)
SCHEMA_WITH_HEADERS_DDL: Final = SCHEMA_DDL + ", headers array<struct<key: string, value: binary>>"


def arrow_schema(include_headers: bool) -> pa.Schema:
    return ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA


def schema_ddl(include_headers: bool) -> str:
    return SCHEMA_WITH_HEADERS_DDL if include_headers else SCHEMA_DDL


def repeated(topic: str, partition: int, n: int) -> tuple[pa.Array, pa.Array]:
    """The ``topic`` and ``partition`` columns of ``n`` rows, built from buffers.

    NB: not ``pa.repeat(pa.scalar(...))`` or ``pa.array(...)``: those ask pandas whether their
    argument is a pandas object, importing pandas (seconds, once per process) in the first
    ``poll_batch`` or Spark read."""
    name = topic.encode()
    size = len(name)
    ends = array("i", range(0, (n + 1) * size, size)) if size else array("i", bytes(4 * (n + 1)))
    topics = pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(ends), pa.py_buffer(name * n)]
    )
    partitions = pa.Array.from_buffers(
        pa.int32(), n, [None, pa.py_buffer(array("i", [partition]) * n)]
    )
    return topics, partitions


class ColumnBuilder:
    """Accumulates the records of one partition's Fetch responses; `build` turns them into
    one `pyarrow.RecordBatch` and starts over.

    Args:
        topic, partition: what every record here belongs to.
        include_headers: add the ``headers`` column.
    """

    def __init__(self, topic: str, partition: int, *, include_headers: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self._reset()

    def _reset(self) -> None:
        self._offsets = array("q")
        self._timestamps_us = array("q")
        self._timestamp_types = array("i")
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._headers: list[list[dict[str, Any]] | None] = []
        self._any_key = False

    def __len__(self) -> int:
        return len(self._offsets)

    def add(self, data: bytes, position: int, until: int) -> int:
        """Decode the records with offsets in ``[position, until)`` from ``data`` (whole v2
        batches as a Fetch returns them; a torn last batch is ignored).

        Returns:
            The offset after the last whole batch in ``data`` (past control batches too).

        Raises:
            CorruptRecordError: a malformed batch.
        """
        next_offset = position
        for pos, header in iter_batches(data):
            if header.next_offset <= position:
                continue
            next_offset = header.next_offset
            if header.is_control or header.base_offset >= until:
                continue
            before = len(self._offsets)
            self._add_batch(data, pos, position, until)
            added = len(self._offsets) - before
            if added:
                self._timestamp_types.extend(array("i", [int(header.timestamp_type)]) * added)
        return next_offset

    def _add_batch(self, data: bytes, pos: int, position: int, until: int) -> None:
        """The records of the batch at ``pos`` with offsets in ``[position, until)``, decoded
        by storage's `record_tuples` (uncompressed batches read in place)."""
        offsets = self._offsets.append
        timestamps = self._timestamps_us.append
        keys = self._keys.append
        values = self._values.append
        headers = self._headers.append if self.include_headers else None
        any_key = self._any_key
        for offset, timestamp_ms, key, value, record_headers in record_tuples(data, pos):
            if offset < position or offset >= until:
                continue
            offsets(offset)
            timestamps(timestamp_ms * 1000)
            if key is not None:
                any_key = True
            keys(key)
            values(value)
            if headers is not None:
                headers([{"key": k, "value": v} for k, v in record_headers] or None)
        self._any_key = any_key

    def build(self) -> pa.RecordBatch:
        """The records added since the last `build`, as one RecordBatch of the exact schema."""
        n = len(self._offsets)
        arrays = [
            pa.array(self._keys, pa.binary()) if self._any_key else pa.nulls(n, pa.binary()),
            pa.array(self._values, pa.binary()),
            *repeated(self.topic, self.partition, n),
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self._offsets)]),
            pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, pa.py_buffer(self._timestamps_us)]),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(self._timestamp_types)]),
        ]
        if self.include_headers:
            arrays.append(pa.array(self._headers, HEADERS_TYPE))
        batch = pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(self.include_headers))
        self._reset()
        return batch


def empty_batch(include_headers: bool) -> pa.RecordBatch:
    """A RecordBatch of no rows in the source's schema."""
    return pa.RecordBatch.from_pylist([], schema=arrow_schema(include_headers))


__all__ = [
    "ARROW_SCHEMA",
    "ARROW_SCHEMA_WITH_HEADERS",
    "HEADERS_TYPE",
    "SCHEMA_DDL",
    "SCHEMA_WITH_HEADERS_DDL",
    "TIMESTAMP_TYPE",
    "ColumnBuilder",
    "arrow_schema",
    "empty_batch",
    "schema_ddl",
]
