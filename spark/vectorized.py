"""The fast path: a whole Fetch response of uncompressed v2 batches to Arrow, with numpy.

Theory of operation
-------------------
The records of a batch are varint-framed one after the other, so finding where each record
starts is inherently sequential; everything else is not. `decode_columns` therefore does two
passes:

1. **walk** (Python, one varint per record): where each record begins, and per batch its
   base offset, base timestamp, timestamp type and record count;
2. **columns** (numpy, over every record of the response at once): the fields are a chain of
   varints at computed positions, ``length, attributes, timestamp_delta, offset_delta,
   key_length, key, value_length, value, header_count``, decoded a byte column at a time
   (`_varints`); keys and values become Arrow ``binary`` arrays whose offsets are a cumulative
   sum of lengths and whose data is gathered with one mask over the response bytes (a repeat
   of ``[gap, value]`` runs).

This is about three times the speed of the record-by-record decoder (2.5 M records/s against
0.8 M for 100-byte values on this machine's cores).

A response it does not cover returns None and the caller decodes it record by record
(`spark.columns.ColumnBuilder`): compressed batches, records with headers when the headers
column is wanted, or anything malformed (the slow path then raises the precise
`CorruptRecordError`).
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from spark.columns import HEADERS_TYPE, TIMESTAMP_TYPE, arrow_schema
from storage.errors import CorruptRecordError
from storage.records import (
    BATCH_HEADER_SIZE,
    Compression,
    TimestampType,
    decode_varint,
    iter_batches,
)

Int64s = npt.NDArray[np.int64]


def decode_columns(
    data: bytes, position: int, until: int, topic: str, partition: int, *, include_headers: bool
) -> pa.RecordBatch | None:
    """The records with offsets in ``[position, until)`` of ``data`` (whole v2 batches; a torn
    tail is ignored) as one RecordBatch in the source's schema, or None when the response
    needs the record-by-record decoder."""
    begins = array("q")
    counts: list[int] = []
    bases: list[int] = []
    base_timestamps: list[int] = []
    log_append: list[int] = []  # the batch's max timestamp if LOG_APPEND_TIME, else -1
    types: list[int] = []
    try:
        for pos, header in iter_batches(data):
            if header.next_offset <= position or header.is_control or header.base_offset >= until:
                continue
            if header.compression is not Compression.NONE:
                return None
            records_end = pos + header.size_bytes
            if _walk(data, pos + BATCH_HEADER_SIZE, header.record_count, begins) != records_end:
                return None
            counts.append(header.record_count)
            bases.append(header.base_offset)
            base_timestamps.append(header.base_timestamp_ms)
            is_log_append = header.timestamp_type is TimestampType.LOG_APPEND_TIME
            log_append.append(header.max_timestamp_ms if is_log_append else -1)
            types.append(int(header.timestamp_type))
    except (IndexError, CorruptRecordError):
        return None
    if not begins:
        return _build(topic, partition, include_headers, 0, [])
    buf = np.frombuffer(data, dtype=np.uint8)
    fields = _fields(buf, np.frombuffer(begins, dtype=np.int64), include_headers=include_headers)
    if fields is None:
        return None
    timestamp_deltas, offset_deltas, key_starts, key_lengths, value_starts, value_lengths = fields
    per_batch = np.asarray(counts, dtype=np.int64)
    offsets = np.repeat(np.asarray(bases, dtype=np.int64), per_batch) + offset_deltas
    timestamps = np.repeat(np.asarray(base_timestamps, dtype=np.int64), per_batch)
    timestamps += timestamp_deltas
    appended = np.repeat(np.asarray(log_append, dtype=np.int64), per_batch)
    timestamps = np.where(appended >= 0, appended, timestamps) * 1000
    timestamp_types = np.repeat(np.asarray(types, dtype=np.int32), per_batch)
    keep = (offsets >= position) & (offsets < until)
    if not keep.all():
        offsets, timestamps, timestamp_types = (
            offsets[keep],
            timestamps[keep],
            timestamp_types[keep],
        )
        key_starts, key_lengths = key_starts[keep], key_lengths[keep]
        value_starts, value_lengths = value_starts[keep], value_lengths[keep]
    n = len(offsets)
    columns = [
        _binary(buf, key_starts, key_lengths),
        _binary(buf, value_starts, value_lengths),
        pa.array(offsets, pa.int64()),
        pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, pa.py_buffer(timestamps)]),
        pa.array(timestamp_types, pa.int32()),
    ]
    return _build(topic, partition, include_headers, n, columns)


def _build(
    topic: str, partition: int, include_headers: bool, n: int, columns: list[Any]
) -> pa.RecordBatch:
    if not columns:
        return pa.RecordBatch.from_pylist([], schema=arrow_schema(include_headers))
    key, value, offset, timestamp, timestamp_type = columns
    arrays = [
        key,
        value,
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        offset,
        timestamp,
        timestamp_type,
    ]
    if include_headers:
        arrays.append(pa.nulls(n, HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers))


def _walk(data: bytes, pos: int, count: int, begins: array[int]) -> int:
    """Append where each of ``count`` records begins (its length varint) from ``pos``; the
    position after the last. Lengths are zigzag varints: a byte below 0x80 is a length of
    ``b >> 1``; a negative (odd) length walks wrong, which `_fields` then detects."""
    add = begins.append
    for _ in range(count):
        add(pos)
        b = data[pos]
        if b < 0x80:
            pos += 1 + (b >> 1)
        else:
            b1 = data[pos + 1]
            if b1 < 0x80:
                pos += 2 + (((b & 0x7F) | (b1 << 7)) >> 1)
            else:
                length, after = decode_varint(data, pos)
                pos = after + abs(length)
    return pos


def _fields(
    buf: npt.NDArray[np.uint8], begins: Int64s, *, include_headers: bool
) -> tuple[Int64s, Int64s, Int64s, Int64s, Int64s, Int64s] | None:
    """The records' fields, or None when something does not add up (or there are headers to
    decode: the slow path does that)."""
    last = len(buf) - 1
    lengths, p = _varints(buf, begins, last)
    if (lengths < 0).any():
        return None
    ends = p + lengths
    p = p + 1  # the attributes byte
    timestamp_deltas, p = _varints(buf, p, last)
    offset_deltas, p = _varints(buf, p, last)
    key_lengths, p = _varints(buf, p, last)
    key_starts = p
    p = p + np.maximum(key_lengths, 0)
    value_lengths, p = _varints(buf, p, last)
    value_starts = p
    p = p + np.maximum(value_lengths, 0)
    header_counts, after = _varints(buf, p, last)
    none = header_counts == 0  # then that one byte ends the record
    if (header_counts < 0).any() or (after > ends).any() or (after[none] != ends[none]).any():
        return None
    if include_headers and not none.all():
        return None
    return timestamp_deltas, offset_deltas, key_starts, key_lengths, value_starts, value_lengths


def _varints(buf: npt.NDArray[np.uint8], pos: Int64s, last: int) -> tuple[Int64s, Int64s]:
    """The zigzag varints at ``pos`` and the positions after them, a byte column at a time."""
    b = buf[np.minimum(pos, last)]
    more = b >= 0x80
    if not more.any():
        small = b.astype(np.int64)
        return (small >> 1) ^ -(small & 1), pos + 1
    z = (b & 0x7F).astype(np.uint64)
    length = np.ones(len(pos), dtype=np.int64)
    shift = 7
    while more.any():
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")
        b = buf[np.minimum(pos + length, last)]
        z |= np.where(more, (b & 0x7F).astype(np.uint64) << np.uint64(shift), np.uint64(0))
        length += more
        more &= b >= 0x80
        shift += 7
    values = (z >> np.uint64(1)).astype(np.int64) ^ -(z & np.uint64(1)).astype(np.int64)
    return values, pos + length


def _binary(buf: npt.NDArray[np.uint8], starts: Int64s, lengths: Int64s) -> pa.Array:
    """A ``binary`` array of ``buf[start:start+length]`` each (a negative length is null)."""
    n = len(starts)
    nulls = lengths < 0
    sizes = np.where(nulls, 0, lengths)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    if int(offsets[-1]) == 0:
        data = np.zeros(0, dtype=np.uint8)
    else:
        # The bytes from the first value on alternate: gap, value, gap, value, ...; one
        # repeat of [False, True] by those sizes is the mask of the value bytes.
        first = int(starts[0])
        gaps = np.diff(starts, prepend=first) - np.concatenate(([0], sizes[:-1]))
        runs = np.empty(2 * n, dtype=np.int64)
        runs[0::2] = gaps
        runs[1::2] = sizes
        pattern = np.zeros(2 * n, dtype=np.bool_)
        pattern[1::2] = True
        inside = np.repeat(pattern, runs)
        data = buf[first : first + len(inside)][inside]
    null_count = int(nulls.sum())
    validity = None
    if null_count:
        validity = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=null_count,
    )


__all__ = ["decode_columns"]
