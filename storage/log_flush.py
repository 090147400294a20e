"""When a log's appended bytes reach the disk, and the fsyncs that put them there.

Theory of operation
-------------------
`LogFlusher` holds the parts of a `storage.log.SegmentedLog` that durability touches: the
`SegmentList` (whose segments and directory it fsyncs), the `LogOffsets` (the recovery point
it raises and checkpoints) and the pure `FlushPolicy` (``flush.messages`` / ``flush.ms``).
The log calls `after_append` once per append, `flush` and `sync_data` for its public methods
of the same names, and `maybe_flush` / `flush_due_in_ms` from a periodic tick.

- `flush`: fsync every segment that may hold data above the checkpointed recovery point (data,
  then indexes) and the directory if a segment was created; then the recovery point is the log
  end offset, checkpointed unless the flush was an append's own.
- `sync_data`: fdatasync only the dirty segments' data (and the directory after a roll): the
  recovery point moves, its checkpoint and the indexes wait for the next `flush` (recovery
  rebuilds them from the synced data).
- After an append: `sync_data` with ``sync_every_append``, else `flush` when the policy says
  so.

No clock: ``now_ms`` comes in. An ``OSError`` passes to the log's disk-error boundary
(`storage.log_health`).
"""

from __future__ import annotations

from typing import final

from storage.config import LogConfig
from storage.flush_policy import FlushPolicy
from storage.log_offsets import LogOffsets
from storage.segment_list import SegmentList


@final
class LogFlusher:
    """The flushes of one log. ``now_ms``: the log's open, which counts as a flush."""

    __slots__ = ("_offsets", "_policy", "_segments", "_sync_every_append")

    def __init__(
        self, segments: SegmentList, offsets: LogOffsets, config: LogConfig, now_ms: int
    ) -> None:
        self._segments = segments
        self._offsets = offsets
        self._policy = FlushPolicy(config, now_ms)
        self._sync_every_append = config.sync_every_append

    def update_config(self, config: LogConfig) -> None:
        self._policy.update_config(config)
        self._sync_every_append = config.sync_every_append

    def after_append(self, records: int, now_ms: int) -> None:
        """``records`` were just appended: sync or flush them if the config says so."""
        if self._sync_every_append:
            self.sync_data()
        elif self._policy.on_appended(records, now_ms):
            self.flush(now_ms, checkpoint=False)

    def flush(self, now_ms: int, *, checkpoint: bool) -> None:
        """Everything appended is durable on return (see the module docstring)."""
        segments = self._segments
        segments.sync(self._offsets.checkpointed_recovery_point)
        self._offsets.flushed_to(segments.log_end_offset, checkpoint=checkpoint)
        self._policy.flushed(now_ms)

    def sync_data(self) -> None:
        """The appended data is durable on return; indexes and the checkpoint wait."""
        self._segments.sync_data()
        self._offsets.flushed_to(self._segments.log_end_offset, checkpoint=False)

    def has_unflushed(self) -> bool:
        return (
            self._offsets.recovery_point < self._segments.log_end_offset
            or self._segments.active.dirty
        )

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush (with the checkpoint) if ``flush.ms`` has passed since the last flush and
        anything is unflushed; True if it flushed."""
        if self._policy.is_due(now_ms) and self.has_unflushed():
            self.flush(now_ms, checkpoint=True)
            return True
        return False

    def flush_due_in_ms(self, now_ms: int) -> int | None:
        """Milliseconds until `maybe_flush` would flush (0: now); None if nothing waits for it
        (or ``flush.ms`` is off)."""
        due_at_ms = self._policy.due_at_ms()
        if due_at_ms is None or not self.has_unflushed():
            return None
        return max(0, due_at_ms - now_ms)


__all__ = ["LogFlusher"]
