"""The segment files of one log directory: which exist, which is active, and their fsyncs.

Theory of operation
-------------------
`SegmentList` owns a log's `LogSegment`s in offset order (base offsets strictly increasing,
never empty) and the one fact about the directory itself: whether a segment file was created
since the directory was last fsynced (``dir_dirty``). The last segment is the *active* one,
the only one that takes appends.

- `roll` closes the active segment's time index and creates the next one at its end offset;
  the new file's name is durable only once the directory is fsynced, which the next `sync`
  or `sync_data` does.
- Segments leave from the front (`delete_first`, `delete_front_below`: retention and a
  moved log start) or from the back (`delete_back_above`: truncation); the active segment
  is never deleted that way. `reset_at` deletes them all and starts one empty segment,
  durably.
- `sync` is the flush: fsync every segment that may hold data above the checkpointed
  recovery point (data, then indexes), always the active one, and the directory if dirty.
  `sync_data` is the synced-append path: fdatasync only the dirty suffix's data.

The list knows nothing of log start offsets, checkpoints or the epoch cache: `SegmentedLog`
decides what to delete and when to sync, and maps every ``OSError`` raised here.
"""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import final

from structlog.typing import FilteringBoundLogger

from storage.checkpoint import fsync_dir
from storage.config import INT_MAX, LogConfig
from storage.file_io import FileIO
from storage.retention import SegmentInfo
from storage.segment import LogSegment


@final
class SegmentList:
    """The segments of the log in ``directory`` (``segments``: as recovered, at least one)."""

    __slots__ = ("_bases", "_dir_dirty", "_directory", "_io", "_log", "_segments", "active")

    def __init__(
        self, directory: Path, segments: list[LogSegment], io: FileIO, logger: FilteringBoundLogger
    ) -> None:
        assert segments, "a log always has an active segment"
        self._directory = directory
        self._io = io
        self._log = logger
        self._segments = segments
        # Invariant: _bases[i] == _segments[i].base_offset, strictly increasing.
        self._bases = [s.base_offset for s in segments]
        self._dir_dirty = False
        self.active: LogSegment = segments[-1]
        """The last segment, the one taking appends (an attribute: appends read it first)."""

    # --- views -----------------------------------------------------------------------------------

    @property
    def files(self) -> Sequence[LogSegment]:
        """The segments in offset order (read-only: change them through this class)."""
        return self._segments

    @property
    def bases(self) -> Sequence[int]:
        """The segments' base offsets, in order."""
        return self._bases

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def infos(self) -> list[SegmentInfo]:
        return [
            SegmentInfo(
                base_offset=s.base_offset,
                next_offset=s.next_offset,
                size_bytes=s.size,
                max_timestamp_ms=s.max_timestamp_ms,
            )
            for s in self._segments
        ]

    def base_offset_holding(self, offset: int) -> int:
        """The base offset of the segment that holds (or would hold) ``offset``; the first
        segment's if ``offset`` is below every base."""
        return self._bases[max(bisect.bisect_right(self._bases, offset) - 1, 0)]

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    # --- changes ---------------------------------------------------------------------------------

    def for_append(self, size: int, next_offset: int, now_ms: int, config: LogConfig) -> LogSegment:
        """The segment an append of ``size`` bytes ending before ``next_offset`` goes to: the
        active one, rolled first if the append would pass ``segment.bytes``, ``segment.ms``
        has run out, an index is full, or an offset would not fit the index's 32-bit relative
        offsets. An empty active segment always takes the append."""
        seg = self.active
        if seg.size and (
            seg.size + size > config.segment_bytes
            or now_ms > seg.roll_deadline_ms
            or seg.indexes_full
            or next_offset - seg.base_offset > INT_MAX
        ):
            seg = self.roll(config)
        return seg

    def cut_active_to_recorded_size(self) -> None:
        """Cut the active segment's file back to the size it recorded (dropping the bytes of
        a partial write the segment never recorded)."""
        seg = self._segments[-1]
        seg.io.ftruncate(seg.fd, seg.size)

    def roll(self, config: LogConfig) -> LogSegment:
        """Start a new active segment at the log end offset; returns it."""
        old = self._segments[-1]
        old.on_roll()
        seg = LogSegment.create(self._directory, old.next_offset, config, self._io)
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self.active = seg
        self._dir_dirty = True
        self._log.info(
            "segment_rolled",
            base_offset=seg.base_offset,
            previous_size=old.size,
            previous_base_offset=old.base_offset,
        )
        return seg

    def delete_first(self, count: int) -> None:
        """Delete the first ``count`` segments (fewer than all)."""
        assert count < len(self._segments), "the active segment is never deleted"
        for _ in range(count):
            self._segments.pop(0).delete()
            self._bases.pop(0)

    def delete_front_below(self, offset: int) -> int:
        """Delete the segments wholly below ``offset``, never the active one; returns how
        many."""
        deleted = 0
        while len(self._segments) > 1 and self._segments[0].next_offset <= offset:
            self.delete_first(1)
            deleted += 1
        return deleted

    def delete_back_above(self, offset: int) -> int:
        """Delete the segments whose base offset is above ``offset``, never the first one;
        returns how many."""
        deleted = 0
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._delete_last()
            deleted += 1
        return deleted

    def _delete_last(self) -> None:
        seg = self._segments.pop()
        self._bases.pop()
        if self._segments:
            self.active = self._segments[-1]
        seg.delete()

    def reset_at(self, offset: int, config: LogConfig) -> None:
        """Delete every segment and start one empty segment at ``offset``. Durable on return."""
        while self._segments:
            self._delete_last()
        seg = LogSegment.create(self._directory, offset, config, self._io)
        self._segments.append(seg)
        self._bases.append(offset)
        self.active = seg
        fsync_dir(self._directory)
        self._dir_dirty = False

    def replace_with_swap(self, first: int, last: int, swap: Path, config: LogConfig) -> LogSegment:
        """The log cleaner's swap (`storage.log_cleaner`, steps 3-5): the segments at indexes
        ``first`` to ``last`` (inclusive; never the active one) become the one segment in the
        durable ``swap`` file, named by the first one's base offset. Deletes the later
        segments' files and the first one's indexes, renames ``swap`` over the first one's
        data file, reopens it and rebuilds its indexes. ``swap`` must cover exactly the
        offsets of those segments."""
        assert 0 <= first <= last < len(self._segments) - 1, "the active segment is never swapped"
        group = self._segments[first : last + 1]
        head, next_offset = group[0], group[-1].next_offset
        for seg in group[1:]:
            seg.delete()
        os.close(head.fd)
        for path in (head.offset_index.path, head.time_index.path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        fsync_dir(self._directory)
        os.replace(swap, head.log_path)
        fsync_dir(self._directory)
        seg = LogSegment.open_existing(self._directory, head.base_offset, config, self._io)
        seg.recover()
        # Invariant: a cleaned segment covers the same offsets (empty batches keep them).
        assert seg.next_offset == next_offset, (seg.next_offset, next_offset)
        self._segments[first : last + 1] = [seg]
        self._bases[first : last + 1] = [seg.base_offset]
        return seg

    def update_config(self, config: LogConfig) -> None:
        for seg in self._segments:
            seg.update_config(config)

    # --- durability ------------------------------------------------------------------------------

    def sync(self, recovery_point_floor: int) -> None:
        """fsync the data and indexes of every segment that may hold offsets at or above
        ``recovery_point_floor`` (the checkpointed recovery point) or is dirty, always the
        active one, then the directory if a segment was created since its last fsync."""
        active = self._segments[-1]
        for seg in self._segments:
            if seg.dirty or seg.next_offset > recovery_point_floor or seg is active:
                seg.sync()
        self._sync_dir_if_dirty()

    def sync_data(self) -> None:
        """fdatasync only the data of the dirty segments (a suffix of the list) and the
        directory; indexes wait for the next `sync`."""
        for seg in reversed(self._segments):
            if not seg.dirty:
                break
            seg.sync_data()
        self._sync_dir_if_dirty()

    def sync_dir(self) -> None:
        """fsync the directory (after deleting segment files)."""
        fsync_dir(self._directory)

    def _sync_dir_if_dirty(self) -> None:
        if self._dir_dirty:
            fsync_dir(self._directory)
            self._dir_dirty = False

    def close(self) -> list[OSError]:
        """Close every segment (writing pending index entries), even past failures; returns
        the errors."""
        errors = []
        for seg in self._segments:
            try:
                seg.close()  # closes its descriptor even if its index write fails
            except OSError as e:
                errors.append(e)
        return errors

    def abandon(self) -> None:
        """Close every descriptor as a crash would (no index writes, errors ignored)."""
        for seg in self._segments:
            with contextlib.suppress(OSError):
                seg.abandon()


__all__ = ["SegmentList"]
