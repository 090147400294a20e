"""`SimPartitionLog`: one replica's partition log in memory, with a page cache and a disk.

It is a `replication.core.PartitionLogView` (structurally) and does the writes the cores'
Readies ask for, as `storage.log.SegmentedLog` does: ``append`` (as leader: offsets and the
leader epoch assigned here), ``append_as_follower``, ``truncate_to``,
``truncate_fully_and_start_at``; its epoch cache is storage's own `LeaderEpochCache`.

Durability follows the two ways a machine fails:

- a *process crash* (``kill -9``) loses nothing written: the OS page cache survives;
- a *power loss* (`lose_unflushed`) loses every batch above the last `flush` (Kafka does not
  fsync per write; ``flush.messages``/``flush.ms`` or the OS write back decide). Truncations
  are treated as durable at once (a file truncate), and the epoch cache, which Kafka writes
  through to its checkpoint file, is cut back to the surviving log end, as a reopened log does.

The high-watermark checkpoint (Kafka's ``replication-offset-checkpoint``) is a durable int
written by `checkpoint_high_watermark`.
"""

from __future__ import annotations

import bisect
from pathlib import Path

from storage.leader_epoch import LeaderEpochCache
from storage.records import (
    BatchHeader,
    iter_batches,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
)


class SimPartitionLog:
    """A partition log of whole v2 batches; see the module docstring for what survives."""

    __slots__ = ("_bases", "_batches", "_cache", "_ends", "_log_start", "checkpoint", "flushed_end")

    def __init__(self) -> None:
        self._batches: list[bytes] = []
        self._bases: list[int] = []
        self._ends: list[int] = []
        self._log_start = 0
        self.flushed_end = 0
        """Batches ending at or below this offset survive a power loss."""
        self.checkpoint = 0
        """The checkpointed high watermark."""
        self._cache = LeaderEpochCache(None, lambda: self.log_end_offset)

    @property
    def directory(self) -> Path:
        """No directory: the log lives in memory (what DescribeLogDirs would report)."""
        return Path()

    @property
    def size_bytes(self) -> int:
        return sum(len(batch) for batch in self._batches)

    # --- PartitionLogView ---------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._ends[-1] if self._ends else self._log_start

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self._cache

    @property
    def active_segment_base_offset(self) -> int:
        """One segment: it starts at the log start offset."""
        return self._log_start

    # --- writes -------------------------------------------------------------------------------

    def _push(self, batch: bytes, header: BatchHeader) -> None:
        self._batches.append(batch)
        self._bases.append(header.base_offset)
        self._ends.append(header.next_offset)

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> bool:
        """`LeaderEpochCache.assign` (a new leader's epoch), as ``SegmentedLog``'s."""
        return self._cache.assign(epoch, start_offset)

    def append(self, records: bytes, *, leader_epoch: int) -> int:
        """Append one batch as leader; returns its base offset."""
        base = self.log_end_offset
        buf = bytearray(records)
        set_base_offset(buf, base)
        set_partition_leader_epoch(buf, leader_epoch)
        if self._cache.latest_epoch != leader_epoch:
            self._cache.assign(leader_epoch, base)
        batch = bytes(buf)
        self._push(batch, read_header(batch))
        return base

    def append_as_follower(self, data: bytes) -> int:
        """Append batches fetched from the leader as they are (offsets and epochs kept)."""
        first = self.log_end_offset
        for pos, header in iter_batches(data):
            assert header.base_offset == self.log_end_offset, "follower append leaves a gap"
            epoch = header.partition_leader_epoch
            if epoch >= 0 and epoch != self._cache.latest_epoch:
                self._cache.assign(epoch, header.base_offset)
            self._push(bytes(data[pos : pos + header.size_bytes]), header)
        return first

    def truncate_to(self, offset: int) -> None:
        """Drop every batch ending after ``offset`` (the batch holding it goes whole)."""
        i = bisect.bisect_right(self._ends, offset)
        del self._batches[i:], self._bases[i:], self._ends[i:]
        self._cache.truncate_from_end(self.log_end_offset)
        self.flushed_end = min(self.flushed_end, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._batches.clear()
        self._bases.clear()
        self._ends.clear()
        self._log_start = offset
        self._cache.clear()
        self.flushed_end = offset

    def advance_log_start_offset(self, offset: int) -> bool:
        """Raise the log start offset to ``offset`` (a follower following its leader's),
        dropping the batches wholly below it; True if it moved."""
        if offset <= self._log_start:
            return False
        assert offset <= self.log_end_offset, "log start past the log end"
        i = bisect.bisect_right(self._ends, offset)
        del self._batches[:i], self._bases[:i], self._ends[:i]
        self._log_start = offset
        self._cache.truncate_from_start(offset)
        return True

    def flush(self) -> None:
        self.flushed_end = self.log_end_offset

    def sync_data(self) -> None:
        """As `flush`: the simulated log has no indexes or recovery-point file."""
        self.flushed_end = self.log_end_offset

    def checkpoint_high_watermark(self, high_watermark: int) -> None:
        self.checkpoint = high_watermark

    def lose_unflushed(self) -> None:
        """Power loss: every batch above the flush point is gone."""
        self.truncate_to(self.flushed_end)

    # --- reads --------------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True
    ) -> bytes:
        """Whole batches from the one holding ``offset``, at least one (unless not ``min_one``
        and it is larger than ``max_bytes``), up to ``max_bytes``, none whose base offset is
        ``>= max_offset``."""
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        out: list[bytes] = []
        size = 0
        while i < len(self._batches):
            if max_offset is not None and self._bases[i] >= max_offset:
                break
            if self._ends[i] > offset:
                b = self._batches[i]
                if (out or not min_one) and size + len(b) > max_bytes:
                    break
                out.append(b)
                size += len(b)
            i += 1
        return b"".join(out)

    def batches_between(self, low: int, high: int) -> list[bytes]:
        """The batches that hold any offset in ``[low, high)``."""
        i = max(0, bisect.bisect_right(self._bases, low) - 1)
        out: list[bytes] = []
        while i < len(self._batches) and self._bases[i] < high:
            if self._ends[i] > low:
                out.append(self._batches[i])
            i += 1
        return out

    def batch_at(self, base_offset: int) -> bytes | None:
        i = bisect.bisect_left(self._bases, base_offset)
        if i < len(self._bases) and self._bases[i] == base_offset:
            return self._batches[i]
        return None

    def headers(self) -> list[BatchHeader]:
        return [read_header(b) for b in self._batches]


__all__ = ["SimPartitionLog"]
