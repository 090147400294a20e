"""`scan_records`: a partition leader's check of a produced batch's records, many records at
once with numpy, for `storage.batch_validation.validate_produced_batch`.

Theory of operation
-------------------
The walk in `storage.batch_validation` reads a batch's records one after the other in Python
(about a microsecond a record on a broker), because where record i+1 begins depends on record
i's length. But the records of one producer batch mostly have one shape: the same key and
value lengths, no headers, and offset and timestamp deltas whose varints change width rarely
(an offset delta at record 64, a timestamp delta at 64 ms). Records of one shape are equally
long, so a **run** of them is a 2-D array, one row per record, one column per byte position
(a strided view of the batch: nothing is copied), and each field is a column:

- the length varint, the key length, the value length and the header count are the same
  bytes in every row as in the run's first record, which Python parses (so every record
  of the run has that length, key length, value length and no header);
- the offset delta columns hold the varint of ``i`` for row ``i``, with the first record's
  width;
- the timestamp delta columns hold a varint of the first record's width (continuation bits
  set on all bytes but its last), decoded column-wise for the smallest and largest delta.

A run ends at its first row that differs; the next run starts there with its own first
record. The records are proven when the runs cover exactly ``count`` records ending at the
batch's end. Whatever this does not prove (a record that does not parse, headers to check, a
batch whose records vary in shape) returns None, and the caller walks the batch record by
record, which accepts it or says what is wrong. So this never refuses anything itself, and
what it accepts the walk accepts, with the same timestamps.

numpy is optional (not a dependency of the broker): `storage.batch_validation` walks every
batch when this module cannot be imported.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from storage.errors import CorruptRecordError
from storage.records import decode_varint

_MAX_RUNS: Final = 8
"""More runs than this (records whose shape changes often) are left to the walk."""

_WIDEST: Final = 9
"""The widest varint decoded: 63 bits, which int64 holds exactly (the walk decodes wider ones
with Python's integers, which numpy would wrap)."""


def scan_records(data: bytes, pos: int, stop: int, count: int) -> tuple[int, int] | None:
    """The smallest and largest timestamp delta of the ``count`` records in
    ``data[pos:stop]``, when runs of one shape (see the module docstring) prove that they parse
    exactly as `storage.batch_validation`'s walk requires: each record's length frames
    attributes, a timestamp delta, an offset delta, a key, a value and a header count of 0,
    with no byte left over; offset deltas 0..count-1; the last record ends at ``stop``.

    Returns None when they do not, or when proving it needs the walk.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    if count <= 0 or stop > len(buf) or pos >= stop:
        return None
    low = high = 0
    first = 0  # the offset delta of the run's first record
    for run_number in range(_MAX_RUNS):
        shape = _shape(data, pos, stop)
        if shape is None:
            return None
        size, ts_at, ts_width, od_at, od_width, fixed = shape
        rows = min(count - first, (stop - pos) // size)
        if rows <= 0:
            return None
        view = buf[pos : pos + rows * size].reshape(rows, size)
        same = (view[:, fixed] == view[0, fixed]).all(axis=1)
        deltas = 2 * np.arange(first, first + rows, dtype=np.int64)  # zigzag of i
        for j in range(od_width):
            expected = (deltas >> (7 * j)) & 0x7F
            if j < od_width - 1:
                expected |= 0x80
            same &= view[:, od_at + j] == expected
        stamps = view[:, ts_at : ts_at + ts_width]
        same &= stamps[:, ts_width - 1] < 0x80
        if ts_width > 1:
            same &= (stamps[:, : ts_width - 1] >= 0x80).all(axis=1)
        run = rows if same.all() else int(np.argmin(same))
        if run == 0:
            return None
        z = (stamps[:run, 0] & 0x7F).astype(np.int64)
        for j in range(1, ts_width):
            z |= (stamps[:run, j] & 0x7F).astype(np.int64) << (7 * j)
        if (z & 1).any():  # a negative delta (odd zigzag): decode them all
            signed = (z >> 1) ^ -(z & 1)
            run_low, run_high = int(signed.min()), int(signed.max())
        else:  # all >= 0: the zigzag order is the deltas' order
            run_low, run_high = int(z.min()) >> 1, int(z.max()) >> 1
        if run_number == 0:
            low, high = run_low, run_high
        else:
            low, high = min(low, run_low), max(high, run_high)
        first += run
        pos += run * size
        if first == count:
            return (low, high) if pos == stop else None
    return None


def _shape(data: bytes, pos: int, stop: int) -> tuple[int, int, int, int, int, list[int]] | None:
    """The shape of the record at ``pos``: its size, where its timestamp and offset deltas
    start and how wide they are (relative to ``pos``), and the byte positions that every
    record of its shape repeats (length, key length, value length, header count); None when
    it does not parse as a record without headers within ``stop``."""
    try:
        length, p = decode_varint(data, pos)
        width = p - pos
        end = p + length
        if width > _WIDEST or length < 6 or end > stop:
            return None
        ts_at = p + 1 - pos  # after the attributes byte
        _, p = decode_varint(data, p + 1)
        ts_width = p - pos - ts_at
        od_at = p - pos
        _, p = decode_varint(data, p)
        od_width = p - pos - od_at
        key_at = p - pos
        key_length, p = decode_varint(data, p)
        key_end = p - pos
        p += max(key_length, 0)
        value_at = p - pos
        value_length, p = decode_varint(data, p)
        value_end = p - pos
        p += max(value_length, 0)
    except CorruptRecordError:  # a truncated varint, or one over 10 bytes
        return None
    if (
        max(ts_width, od_width, key_end - key_at, value_end - value_at) > _WIDEST
        or key_length < -1
        or value_length < -1
        or p + 1 != end
        or data[p] != 0
    ):
        return None
    fixed = [*range(width), *range(key_at, key_end), *range(value_at, value_end), end - 1 - pos]
    return end - pos, ts_at, ts_width, od_at, od_width, fixed


__all__ = ["scan_records"]
