"""Sparse indexes of one segment: the offset index and the time index (Kafka's file formats).

- ``.index``: 8-byte entries ``relative offset (int32) -> file position (int32)``, big-endian.
  An entry names the start of a batch whose base offset is ``segment base + relative offset``;
  one is added per ``index.interval.bytes`` appended, so a lookup lands at most about that many
  bytes (plus one batch) before the batch holding an offset.
- ``.timeindex``: 12-byte entries ``timestamp (int64) -> relative offset (int32)``. An entry
  ``(T, r)`` says that no record up to the end of the batch holding offset ``base + r`` has a
  timestamp above ``T``; entries strictly increase in ``T``.

Theory of operation
-------------------
Entries live in memory (``array``s) and are appended to the file lazily: `flush` writes the
pending ones (and fsyncs if asked). An index is a pure acceleration structure: after a crash it
may be shorter than its segment, or hold garbage; `sanity_check` rejects the latter and the
segment then rebuilds the index by scanning its batches. Not thread-safe.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
import sys
from array import array
from pathlib import Path

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
_TIME_ENTRY = struct.Struct(">qi")


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _to_big_endian(values: array[int]) -> bytes:
    if sys.byteorder == "little":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _from_big_endian(typecode: str, data: bytes) -> array[int]:
    values = array(typecode)
    values.frombytes(data)
    if sys.byteorder == "little":
        values.byteswap()
    return values


class _IndexFile:
    """The file-handling half shared by both indexes: pending entries and lazy writes."""

    entry_size: int

    def __init__(self, path: Path, max_entries: int) -> None:
        self.path = path
        self.max_entries = max_entries
        self._written = 0  # entries already in the file
        self._unsynced = False  # the file changed since its last fsync

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def _encode(self, start: int, stop: int) -> bytes:
        raise NotImplementedError

    def flush(self, *, sync: bool) -> None:
        """Write the pending entries; with ``sync`` also fsync the file."""
        pending = len(self) - self._written
        if pending == 0 and not (sync and self._unsynced):
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if pending:
                os.pwrite(
                    fd, self._encode(self._written, len(self)), self._written * self.entry_size
                )
                self._written = len(self)
                self._unsynced = True
            if sync:
                os.fsync(fd)
                self._unsynced = False
        finally:
            os.close(fd)

    def _truncate_file(self, entries: int) -> None:
        if entries < self._written:
            self._written = entries
            self._unsynced = True
            try:
                os.truncate(self.path, entries * self.entry_size)
            except FileNotFoundError:
                self._written = 0

    def rewrite(self) -> None:
        """Replace the file with exactly the in-memory entries (after a rebuild)."""
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, self._encode(0, len(self)))
        finally:
            os.close(fd)
        self._written = len(self)
        self._unsynced = True

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class OffsetIndex(_IndexFile):
    """Relative offset -> position of a batch start; both columns strictly increase."""

    entry_size = OFFSET_ENTRY_SIZE

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        super().__init__(path, max_entries)
        self.base_offset = base_offset
        self.relative_offsets: array[int] = array("i")
        self.positions: array[int] = array("i")

    @classmethod
    def load(cls, path: Path, base_offset: int, max_entries: int) -> OffsetIndex:
        """Read the file as is (a torn trailing entry is dropped); call `sanity_check` next."""
        index = cls(path, base_offset, max_entries)
        data = _read_file(path)
        data = data[: len(data) - len(data) % OFFSET_ENTRY_SIZE]
        pairs = _from_big_endian("i", data)
        index.relative_offsets = pairs[0::2]
        index.positions = pairs[1::2]
        index._written = len(index.relative_offsets)
        return index

    def __len__(self) -> int:
        return len(self.relative_offsets)

    def _encode(self, start: int, stop: int) -> bytes:
        pairs = array("i", bytes(8 * (stop - start)))
        pairs[0::2] = self.relative_offsets[start:stop]
        pairs[1::2] = self.positions[start:stop]
        return _to_big_endian(pairs)

    def append(self, offset: int, position: int) -> None:
        """Add an entry (asserts that both columns increase); ignored when the index is full."""
        offsets = self.relative_offsets
        if len(offsets) >= self.max_entries:
            return
        relative = offset - self.base_offset
        if offsets:
            assert relative > offsets[-1] and position > self.positions[-1]
        offsets.append(relative)
        self.positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last entry at or before ``offset`` as ``(offset, position)``; else ``(base, 0)``."""
        i = bisect.bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[i], self.positions[i]

    def last_boundary_within(self, position: int) -> tuple[int, int]:
        """The last entry whose batch starts at or before ``position``, as ``(offset,
        position)``; ``(base, 0)`` if none."""
        i = bisect.bisect_right(self.positions, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[i], self.positions[i]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or after ``position`` (the segment was cut there)."""
        i = bisect.bisect_left(self.positions, position)
        del self.relative_offsets[i:]
        del self.positions[i:]
        self._truncate_file(i)

    def reset(self) -> None:
        self.relative_offsets = array("i")
        self.positions = array("i")
        self._truncate_file(0)

    def sanity_check(self, log_size: int) -> bool:
        """False if an entry is impossible: not increasing, or pointing outside the segment."""
        offsets, positions = self.relative_offsets, self.positions
        if len(offsets) > self.max_entries:
            return False
        prev_offset, prev_position = 0, 0
        for relative, position in zip(offsets, positions, strict=True):
            if relative <= prev_offset or position <= prev_position or position >= log_size:
                return False
            prev_offset, prev_position = relative, position
        return True


class TimeIndex(_IndexFile):
    """Max timestamp so far -> relative offset; timestamps strictly, offsets weakly increase."""

    entry_size = TIME_ENTRY_SIZE

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        super().__init__(path, max_entries)
        self.base_offset = base_offset
        self.timestamps: array[int] = array("q")
        self.relative_offsets: array[int] = array("i")

    @classmethod
    def load(cls, path: Path, base_offset: int, max_entries: int) -> TimeIndex:
        index = cls(path, base_offset, max_entries)
        data = _read_file(path)
        count = len(data) // TIME_ENTRY_SIZE
        for timestamp_ms, relative in _TIME_ENTRY.iter_unpack(data[: count * TIME_ENTRY_SIZE]):
            index.timestamps.append(timestamp_ms)
            index.relative_offsets.append(relative)
        index._written = count
        return index

    def __len__(self) -> int:
        return len(self.timestamps)

    def _encode(self, start: int, stop: int) -> bytes:
        return b"".join(
            _TIME_ENTRY.pack(self.timestamps[i], self.relative_offsets[i])
            for i in range(start, stop)
        )

    @property
    def last_timestamp_ms(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, timestamp_ms: int, offset: int) -> bool:
        """Add ``(timestamp, offset)`` if the timestamp is newer than the last entry's."""
        if len(self.timestamps) >= self.max_entries:
            return False
        if self.timestamps and timestamp_ms <= self.timestamps[-1]:
            return False
        relative = offset - self.base_offset
        if self.relative_offsets and relative < self.relative_offsets[-1]:
            return False
        self.timestamps.append(timestamp_ms)
        self.relative_offsets.append(relative)
        return True

    def lookup_before(self, timestamp_ms: int) -> int | None:
        """The offset of the last entry whose timestamp is strictly below ``timestamp_ms``:
        every record up to that offset's batch is older. None if there is no such entry."""
        i = bisect.bisect_left(self.timestamps, timestamp_ms) - 1
        return self.base_offset + self.relative_offsets[i] if i >= 0 else None

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries naming offsets at or after ``offset``."""
        i = bisect.bisect_left(self.relative_offsets, offset - self.base_offset)
        del self.timestamps[i:]
        del self.relative_offsets[i:]
        self._truncate_file(i)

    def reset(self) -> None:
        self.timestamps = array("q")
        self.relative_offsets = array("i")
        self._truncate_file(0)

    def sanity_check(self, next_offset: int) -> bool:
        if len(self.timestamps) > self.max_entries:
            return False
        prev_ts, prev_offset = None, 0
        for ts, relative in zip(self.timestamps, self.relative_offsets, strict=True):
            if (prev_ts is not None and ts <= prev_ts) or relative < prev_offset:
                return False
            if self.base_offset + relative >= next_offset:
                return False
            prev_ts, prev_offset = ts, relative
        return True


__all__ = ["OFFSET_ENTRY_SIZE", "TIME_ENTRY_SIZE", "OffsetIndex", "TimeIndex"]
