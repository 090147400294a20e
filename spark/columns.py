"""v2 record batches decoded straight into Arrow columns, in Spark's Kafka source schema.

The schema is exactly Spark's Kafka source's (``KafkaRecordToRowConverter``)::

    key binary, value binary, topic string, partition int, offset bigint,
    timestamp timestamp, timestampType int[, headers array<struct<key string, value binary>>]

Spark does not cast what a Python data source yields, so the Arrow types must match to the
letter: ``partition`` is int32 and ``timestamp`` is ``timestamp[us, tz=UTC]``. ``headers`` is
null for a record without headers, as in Spark's Kafka source.

Cost model: the hot loop runs once per record and does only what Python must do per record:
walk the varints (one- and two-byte ones inline, the rest through `decode_varint`) and slice
out the key and the value. Offsets and timestamps go to ``array('q')`` buffers that Arrow wraps
without a copy; topic, partition and timestamp type are built per batch, not per record.
Compressed batches take the general path (`storage.records.iter_records`).
"""

from __future__ import annotations

from array import array
from typing import Any, Final

import pyarrow as pa

from storage.errors import CorruptRecordError
from storage.records import (
    BATCH_HEADER_SIZE,
    Compression,
    TimestampType,
    decode_varint,
    iter_batches,
    iter_records,
)

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
            if header.compression is Compression.NONE:
                log_append_ms = (
                    header.max_timestamp_ms
                    if header.timestamp_type is TimestampType.LOG_APPEND_TIME
                    else None
                )
                self._add_plain(
                    data,
                    pos + BATCH_HEADER_SIZE,
                    pos + header.size_bytes,
                    header.record_count,
                    header.base_offset,
                    header.base_timestamp_ms,
                    log_append_ms,
                    position,
                    until,
                )
            else:
                self._add_general(data[pos : pos + header.size_bytes], position, until)
            added = len(self._offsets) - before
            if added:
                self._timestamp_types.extend(array("i", [int(header.timestamp_type)]) * added)
        return next_offset

    def _add_general(self, batch: bytes, position: int, until: int) -> None:
        for r in iter_records(batch):
            if position <= r.offset < until:
                self._offsets.append(r.offset)
                self._timestamps_us.append(r.timestamp_ms * 1000)
                self._keys.append(r.key)
                self._any_key = self._any_key or r.key is not None
                self._values.append(r.value)
                if self.include_headers:
                    self._headers.append(
                        [{"key": k, "value": v} for k, v in r.headers] if r.headers else None
                    )

    def _add_plain(
        self,
        data: bytes,
        pos: int,
        records_end: int,
        count: int,
        base_offset: int,
        base_timestamp_ms: int,
        log_append_ms: int | None,
        position: int,
        until: int,
    ) -> None:
        """The hot loop: one uncompressed batch's records section ``data[pos:records_end]``.
        Varints are zigzag: byte ``b < 0x80`` is ``(b >> 1) ^ -(b & 1)``."""
        offsets = self._offsets.append
        timestamps = self._timestamps_us.append
        keys = self._keys.append
        values = self._values.append
        headers = self._headers.append if self.include_headers else None
        any_key = self._any_key
        try:
            for _ in range(count):
                b = data[pos]  # record length (often two bytes)
                if b < 0x80:
                    length = (b >> 1) ^ -(b & 1)
                    pos += 1
                elif data[pos + 1] < 0x80:
                    z = (b & 0x7F) | (data[pos + 1] << 7)
                    length = (z >> 1) ^ -(z & 1)
                    pos += 2
                else:
                    length, pos = decode_varint(data, pos)
                end = pos + length
                if length < 3 or end > records_end:
                    raise CorruptRecordError("record extends past its batch")
                p = pos + 1  # skip the attributes byte
                b = data[p]  # timestamp delta
                if b < 0x80:
                    timestamp_delta = (b >> 1) ^ -(b & 1)
                    p += 1
                else:
                    timestamp_delta, p = decode_varint(data, p)
                b = data[p]  # offset delta (two bytes from 64 on)
                if b < 0x80:
                    offset = base_offset + ((b >> 1) ^ -(b & 1))
                    p += 1
                elif data[p + 1] < 0x80:
                    z = (b & 0x7F) | (data[p + 1] << 7)
                    offset = base_offset + ((z >> 1) ^ -(z & 1))
                    p += 2
                else:
                    delta, p = decode_varint(data, p)
                    offset = base_offset + delta
                if offset < position or offset >= until:
                    pos = end
                    continue
                b = data[p]  # key length: 1 is zigzag(-1), a null key
                if b == 1:
                    key = None
                    p += 1
                else:
                    n, p = decode_varint(data, p)
                    if n < 0:
                        key = None
                    else:
                        key = data[p : p + n]
                        p += n
                        any_key = True
                b = data[p]  # value length (often two bytes)
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                    p += 1
                elif data[p + 1] < 0x80:
                    z = (b & 0x7F) | (data[p + 1] << 7)
                    n = (z >> 1) ^ -(z & 1)
                    p += 2
                else:
                    n, p = decode_varint(data, p)
                if n < 0:
                    value = None
                else:
                    value = data[p : p + n]
                    p += n
                if data[p] == 0:  # no headers: the common case
                    p += 1
                    record_headers = None
                else:
                    record_headers, p = _read_headers(data, p)
                if p != end:
                    raise CorruptRecordError("record length does not match its fields")
                offsets(offset)
                if log_append_ms is None:
                    timestamps((base_timestamp_ms + timestamp_delta) * 1000)
                else:
                    timestamps(log_append_ms * 1000)
                keys(key)
                values(value)
                if headers is not None:
                    headers(record_headers)
                pos = end
        except IndexError:
            raise CorruptRecordError("truncated record") from None
        self._any_key = any_key

    def build(self) -> pa.RecordBatch:
        """The records added since the last `build`, as one RecordBatch of the exact schema."""
        n = len(self._offsets)
        arrays = [
            pa.array(self._keys, pa.binary()) if self._any_key else pa.nulls(n, pa.binary()),
            pa.array(self._values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self._offsets)]),
            pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, pa.py_buffer(self._timestamps_us)]),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(self._timestamp_types)]),
        ]
        if self.include_headers:
            arrays.append(pa.array(self._headers, HEADERS_TYPE))
        batch = pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(self.include_headers))
        self._reset()
        return batch


def _read_headers(data: bytes, p: int) -> tuple[list[dict[str, Any]] | None, int]:
    count, p = decode_varint(data, p)
    out: list[dict[str, Any]] = []
    for _ in range(count):
        n, p = decode_varint(data, p)
        hkey = b"" if n < 0 else data[p : p + n]
        p += max(n, 0)
        n, p = decode_varint(data, p)
        hvalue = None if n < 0 else data[p : p + n]
        p += max(n, 0)
        out.append({"key": hkey.decode(), "value": hvalue})
    return (out or None), p


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
