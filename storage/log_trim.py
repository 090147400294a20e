"""Where a log loses segments: truncation at the back, retention and log-start moves at the front.

Theory of operation
-------------------
`LogTrimmer` makes the changes that delete whole segments (or cut the active one) and move a
log's offsets with them. It holds exactly the three parts of a `storage.log.SegmentedLog`
such a change touches, and nothing else of the log (no clock, no flush policy, no health):

- the `SegmentList` (which segments exist; it deletes and cuts them),
- the `LogOffsets` (the log start offset and the recovery point, with their checkpoints),
- the `LeaderEpochCache` (trimmed to what is left, KIP-101).

Each change is durable when its method returns: the directory is fsynced after segment
files are deleted, the moved offset is checkpointed, the epoch cache is persisted by the
cache itself. The log checks that it is open before calling and maps any ``OSError`` raised
here at its disk-error boundary (`storage.log_health`); the config comes in per call, since
the log may change it (`SegmentedLog.update_config`).

Retention *decides* in `storage.retention` (a pure planner over `SegmentInfo`s); this module
applies the plan.
"""

from __future__ import annotations

from typing import final

from structlog.typing import FilteringBoundLogger

from storage.config import LogConfig
from storage.errors import InvalidOffsetError, OffsetOutOfRangeError
from storage.leader_epoch import LeaderEpochCache
from storage.log_offsets import LogOffsets
from storage.retention import plan_retention
from storage.segment_list import SegmentList


@final
class LogTrimmer:
    """Truncation and retention over one log's segments, offsets and epoch cache."""

    __slots__ = ("_epoch_cache", "_log", "_offsets", "_segments")

    def __init__(
        self,
        segments: SegmentList,
        offsets: LogOffsets,
        epoch_cache: LeaderEpochCache,
        logger: FilteringBoundLogger,
    ) -> None:
        self._segments = segments
        self._offsets = offsets
        self._epoch_cache = epoch_cache
        self._log = logger

    # --- the back --------------------------------------------------------------------------------

    def truncate_to(self, offset: int, config: LogConfig) -> bool:
        """`SegmentedLog.truncate_to`: remove every offset ``>= offset``; True if it changed.

        Raises:
            InvalidOffsetError: ``offset`` is negative.
        """
        if offset < 0:
            raise InvalidOffsetError(f"cannot truncate to negative offset {offset}")
        segments, offsets = self._segments, self._offsets
        old_end = segments.log_end_offset
        if offset >= old_end:
            # NB: the log keeps every offset, but an epoch entry starting at the log end (this
            # replica led an epoch and appended nothing in it) goes, as in Kafka's
            # ``UnifiedLog.truncateTo``: kept, it stays the follower's last fetched epoch, the
            # leader answers the same diverging epoch again, and the follower truncates to its
            # log end again, forever (a fetch livelock: the replica never rejoins the ISR).
            self._epoch_cache.truncate_from_end(old_end)
            return False
        if offset < offsets.log_start_offset:
            self.truncate_fully_and_start_at(offset, config)
            return True
        deleted = segments.delete_back_above(offset)
        removed = segments.active.truncate_to(offset)
        if segments.log_end_offset < offsets.log_start_offset:
            # NB: the batch holding ``offset`` began below the log start offset: nothing at or
            # above the start is left, so the log restarts empty there (the start never moves
            # back).
            self.truncate_fully_and_start_at(offsets.log_start_offset, config)
            return True
        if deleted:
            segments.sync_dir()
        end = segments.log_end_offset
        offsets.lower_recovery_point(end)
        self._epoch_cache.truncate_from_end(end)
        self._log.info(
            "log_truncated",
            offset=offset,
            previous_log_end_offset=old_end,
            log_end_offset=end,
            segments_deleted=deleted,
            bytes_removed=removed,
        )
        return True

    def truncate_fully_and_start_at(self, offset: int, config: LogConfig) -> None:
        """`SegmentedLog.truncate_fully_and_start_at`: start empty at ``offset``.

        Raises:
            InvalidOffsetError: ``offset`` is negative.
        """
        if offset < 0:
            raise InvalidOffsetError(f"cannot start a log at negative offset {offset}")
        self._segments.reset_at(offset, config)
        self._offsets.reset_at(offset)
        self._epoch_cache.clear()
        self._log.info("log_truncated_fully", log_start_offset=offset)

    # --- the front -------------------------------------------------------------------------------

    def advance_log_start_offset(self, offset: int) -> bool:
        """`SegmentedLog.advance_log_start_offset`: True if the start moved.

        Raises:
            OffsetOutOfRangeError: ``offset`` is above the log end offset.
        """
        offsets, end = self._offsets, self._segments.log_end_offset
        if offset > end:
            raise OffsetOutOfRangeError(
                f"cannot start the log at {offset}, past its end {end}",
                log_start_offset=offsets.log_start_offset,
                log_end_offset=end,
            )
        if offset <= offsets.log_start_offset:
            return False
        offsets.set_log_start_offset(offset)
        deleted = self._segments.delete_front_below(offset)
        self._after_start_moved(deleted, reason="log_start_offset_advanced")
        return True

    def apply_retention(self, config: LogConfig, now_ms: int, high_watermark: int | None) -> int:
        """`SegmentedLog.apply_retention`: returns the number of segments deleted."""
        plan = plan_retention(
            self._segments.infos(),
            config,
            log_start_offset=self._offsets.log_start_offset,
            now_ms=now_ms,
            high_watermark=high_watermark,
        )
        if plan.segments_to_delete:
            self._segments.delete_first(plan.segments_to_delete)
            self._offsets.set_log_start_offset(plan.log_start_offset)
            self._after_start_moved(plan.segments_to_delete, reason="retention_applied")
        return plan.segments_to_delete

    def _after_start_moved(self, deleted: int, *, reason: str) -> None:
        if deleted:
            self._segments.sync_dir()
        start = self._offsets.log_start_offset
        self._epoch_cache.truncate_from_start(start)
        self._offsets.checkpoint_log_start()
        self._log.info(reason, log_start_offset=start, segments_deleted=deleted)


__all__ = ["LogTrimmer"]
