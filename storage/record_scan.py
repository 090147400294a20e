"""`scan_records`: a partition leader's check of a produced batch's records, a column of
many records at a time, for `storage.batch_validation.validate_produced_batch`.

Theory of operation
-------------------
The walk in `storage.batch_validation` reads a batch's records one after the other in Python
(about a microsecond a record on a broker), because where record i+1 begins depends on record
i's length. But the records of one producer batch mostly have one shape: the same key and
value lengths, no headers, and offset and timestamp deltas whose varints change width rarely
(an offset delta at record 64, a timestamp delta at 64 ms). Records of one shape are equally
long, so a **run** of them is a table, one row per record, one column per byte position, and
a column is one strided slice of the batch (``data[start:end:size]``, made and compared in C),
so each field is checked for the whole run at once:

- the length varint, the key length, the value length and the header count are the same
  bytes in every row as in the run's first record, which Python parses (so every record
  of the run has that length, key length, value length and no header);
- the offset delta columns hold the varint of ``i`` for row ``i``, with the first record's
  width;
- the timestamp delta columns hold a varint of the first record's width (continuation bits
  set on all bytes but its last), decoded column-wise for the smallest and largest delta (of
  one or two bytes, not negative: the walk decodes the rest).

A run ends at its first row that differs, or where the offset delta's varint would need
another byte; the next run starts there with its own first
record. The records are proven when the runs cover exactly ``count`` records ending at the
batch's end. Whatever this does not prove (a record that does not parse, headers to check, a
batch whose records vary in shape) returns None, and the caller walks the batch record by
record, which accepts it or says what is wrong. So this never refuses anything itself, and
what it accepts the walk accepts, with the same timestamps.

No numpy: every column is a strided slice (``bytes`` made by C), compared, translated
(``bytes.translate``) or reduced (``min``, ``max``) in C, so a broker pays no import for it.
"""

from __future__ import annotations

import functools
import sys
from typing import Final

from storage.errors import CorruptRecordError
from storage.records import decode_varint

_MAX_RUNS: Final = 8
"""More runs than this (records whose shape changes often) are left to the walk."""

_WIDEST: Final = 9
"""The widest varint of a record's shape (lengths): wider ones are left to the walk."""


def scan_records(data: bytes, pos: int, stop: int, count: int) -> tuple[int, int] | None:
    """The smallest and largest timestamp delta of the ``count`` records in
    ``data[pos:stop]``, when runs of one shape (see the module docstring) prove that they parse
    exactly as `storage.batch_validation`'s walk requires: each record's length frames
    attributes, a timestamp delta, an offset delta, a key, a value and a header count of 0,
    with no byte left over; offset deltas 0..count-1; the last record ends at ``stop``.

    Returns None when they do not, or when proving it needs the walk.
    """
    if count <= 0 or stop > len(data) or pos >= stop:
        return None
    data = bytes(data)  # NB: a no-op for bytes; strided slices of a memoryview are not bytes
    low, high = 1 << 63, -(1 << 63)
    first = 0  # the offset delta of the run's first record
    for _ in range(_MAX_RUNS):
        shape = _shape(data, pos, stop)
        if shape is None:
            return None
        size, ts_at, ts_width, od_at, od_width, fixed = shape
        # a width-w offset delta holds i < 2 ** (7w - 1) (zigzag): the run ends there at most
        rows = min(count - first, (stop - pos) // size, (1 << (7 * od_width - 1)) - first)
        if rows <= 0:
            return None
        end = pos + rows * size
        checks = [(data[pos + c : end : size], data[pos + c : pos + c + 1] * rows) for c in fixed]
        for j in range(od_width):
            expected = _offset_delta_column(od_width, j, first, rows)
            checks.append((data[pos + od_at + j : end : size], expected))
        stamps = [data[pos + ts_at + j : end : size] for j in range(ts_width)]
        for j, column in enumerate(stamps):  # continuation bits on all bytes but the last
            checks.append(
                (column.translate(_HIGH_BIT), (b"\x01" if j < ts_width - 1 else b"\x00") * rows)
            )
        run = rows
        for column, expected in checks:
            if column != expected:
                run = min(run, _first_difference(column, expected))
        if run == 0:
            return None
        bounds = _timestamp_bounds([column[:run] for column in stamps])
        if bounds is None:
            return None
        run_low, run_high = bounds
        low, high = min(low, run_low), max(high, run_high)
        first += run
        pos += run * size
        if first == count:
            return (low, high) if pos == stop else None
    return None


_HIGH_BIT: Final = bytes(int(b >= 0x80) for b in range(256))
"""A `bytes.translate` table: 1 for a byte with its continuation bit set, else 0."""
_ODD: Final = bytes(b & 1 for b in range(256))
_LOW_SEVEN: Final = bytes(b & 0x7F for b in range(256))
_LITTLE: Final = int(sys.byteorder == "little")
"""Where a 16-bit number's high byte goes in `_timestamp_bounds`' pairs: second on a
little-endian machine."""


@functools.cache
def _offset_delta_table(width: int, j: int) -> bytes:
    """Byte ``j`` of the width-``width`` varint of the zigzag of every offset delta a width
    of one or two bytes holds (64, 8,192)."""
    more = 0x80 if j < width - 1 else 0
    return bytes(((2 * i >> (7 * j)) & 0x7F) | more for i in range(1 << (7 * width - 1)))


def _offset_delta_column(width: int, j: int, first: int, rows: int) -> bytes:
    """Byte ``j`` of the width-``width`` varints of offset deltas ``first`` .. ``first+rows-1``
    (zigzag: ``2 * i``)."""
    if width <= 2:
        return _offset_delta_table(width, j)[first : first + rows]
    more = 0x80 if j < width - 1 else 0  # NB: records 8,192 on of one batch: rare, in Python
    return bytes(((2 * i >> (7 * j)) & 0x7F) | more for i in range(first, first + rows))


def _first_difference(column: bytes, expected: bytes) -> int:
    """The first index where two different, equally long byte strings differ (a binary
    search over prefixes, each compared in C)."""
    low, high = 0, len(column) - 1  # NB: the answer is in [low, high]
    while low < high:
        middle = (low + high) // 2
        if column[: middle + 1] == expected[: middle + 1]:
            low = middle + 1
        else:
            high = middle
    return low


def _timestamp_bounds(stamps: list[bytes]) -> tuple[int, int] | None:
    """The smallest and largest of the zigzag varints whose byte ``j`` is ``stamps[j]``
    (checked to be varints of that width); None for what the walk decodes instead: a negative
    delta (odd zigzag) or one of three bytes or more (a batch over 8 s)."""
    if b"\x01" in stamps[0].translate(_ODD) or len(stamps) > 2:
        return None
    if len(stamps) == 1:  # deltas 0..63 ms
        return min(stamps[0]) >> 1, max(stamps[0]) >> 1
    # deltas 64..8191 ms: z = low 7 bits + 128 * high byte, ordered as the 16-bit numbers
    # low 7 bits + 256 * high byte, which one strided copy per byte builds in C
    low_bits, high_byte = stamps[0].translate(_LOW_SEVEN), stamps[1]
    pairs = bytearray(2 * len(low_bits))
    pairs[_LITTLE::2], pairs[1 - _LITTLE :: 2] = high_byte, low_bits
    numbers = memoryview(pairs).cast("H")
    return _z(min(numbers)) >> 1, _z(max(numbers)) >> 1


def _z(number: int) -> int:
    return (number & 0x7F) | (number >> 8) << 7


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
