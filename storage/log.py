"""The segmented log: a directory of segments holding a partition's (or the Raft log's) batches.

Theory of operation
-------------------
A log is a list of `LogSegment`s named by base offset; only the last one, the *active*
segment, takes appends. It rolls to a new segment when an append would exceed
``segment.bytes``, when its first append is older than ``segment.ms``, or when an index is full.
Retention deletes whole segments from the front (never the active one) and moves the *log
start offset* up; truncation cuts from the back. Offsets are strictly contiguous from the log
start offset to the *log end offset* (LEO, the next offset to assign).

`SegmentedLog` does the appends and reads itself and owns the parts the rest works on,
each handed only what it changes: the `SegmentList` (the segment files), the `LogOffsets` (log
start offset and recovery point), the `LeaderEpochCache`. Flushing is `storage.log_flush`
(segments, offsets, flush policy); truncation and retention are `storage.log_trim` (segments,
offsets, epoch cache); compaction is `storage.log_cleaner` (segments). The log's public
methods check that it is open and map disk errors, then call them.

Batches are bytes: a leader append validates each batch's header, size and CRC, rewrites its
base offset (and leader epoch) in place and writes the whole call in one ``os.write``; a read
is an index lookup and one ``os.pread``. Nothing decodes records on these paths.

Durability contract
-------------------
- `append` returns once the bytes are in the OS page cache. They are durable when `flush`
  or `sync_data` returns, or at once with ``sync_every_append`` (one fdatasync per call:
  callers batch), or when ``flush.messages`` / ``flush.ms`` trigger a flush.
- `recovery_point` is the offset below which everything is durable. `flush` also writes it to
  ``recovery-point-offset-checkpoint`` (after fsyncing the data and indexes below it), so
  recovery only re-validates what lies above the checkpoint.
- `truncate_to`, `truncate_fully_and_start_at`, log-start-offset changes and leader-epoch
  changes are durable when they return.
- After a crash, `SegmentedLog.open` keeps every flushed batch and never serves a corrupt one
  (see `storage.log_loader`).

Disk errors
-----------
Every ``OSError`` becomes `KafkaStorageError` at one boundary (`storage.log_health`): a failed
append's write is undone, any other failure fails the log until it is reopened, and a read
never serves a corrupt batch (`storage.log_read`; `fail_corrupt` for a replica with another
copy).

Not thread-safe: one owner calls it (the shell's event loop).
"""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from storage.checkpoint import fsync_dir
from storage.config import LogConfig
from storage.errors import KafkaStorageError, KraftError
from storage.file_io import FileIO, file_io_for, storage_error
from storage.file_region import Records
from storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from storage.log_append import (
    assign_epochs,
    check_follower_append,
    checked_single_batch,
    prepare_leader_append,
)
from storage.log_cleaner import (
    CleanJob,
    CleanOutput,
    CleanResult,
    finish_clean,
    prepare_clean,
    run_clean,
)
from storage.log_flush import LogFlusher
from storage.log_health import LogHealth, maps_storage_errors
from storage.log_loader import CLEAN_SHUTDOWN_FILE, load_log
from storage.log_offsets import LogOffsets
from storage.log_read import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    offset_for_timestamp,
    read_batches,
    read_region,
)
from storage.log_trim import LogTrimmer
from storage.retention import SegmentInfo
from storage.segment import BatchSpan
from storage.segment_list import SegmentList

# a batch's first 21 bytes: base offset, batch length, partition leader epoch, magic, CRC
_HEAD = struct.Struct(">qiibI")

_logger = structlog.get_logger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class SegmentedLog:
    """A segmented, recoverable log of v2 record batches in one directory. Use `open`."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock_ms: Callable[[], int],
        file_io: FileIO | None = None,
    ) -> None:
        self._directory = directory
        self._config = config
        self._clock_ms = clock_ms
        self._log = _logger.bind(directory=str(directory))
        self._io = file_io_for(directory) if file_io is None else file_io
        self._health = LogHealth(directory, self._log)
        try:
            self._load()
        except OSError as e:
            raise storage_error(e, "open", directory) from e

    def _load(self) -> None:
        directory, config, clock_ms = self._directory, self._config, self._clock_ms
        loaded = load_log(directory, config, self._io)
        self._segments = SegmentList(directory, loaded.segments, self._io, self._log)
        self._offsets = LogOffsets(
            directory,
            log_start_offset=loaded.log_start_offset,
            recovery_point=loaded.recovery_point,
            checkpointed_log_start_offset=loaded.checkpointed_log_start_offset,
            checkpointed_recovery_point=loaded.checkpointed_recovery_point,
        )
        self._epoch_cache = LeaderEpochCache(
            directory / LEADER_EPOCH_CHECKPOINT,
            lambda: self._segments.log_end_offset,
            loaded.epoch_cache.entries,
        )
        self._trimmer = LogTrimmer(self._segments, self._offsets, self._epoch_cache, self._log)
        self._flusher = LogFlusher(self._segments, self._offsets, config, clock_ms())
        self.had_clean_shutdown = loaded.had_clean_shutdown
        self._offsets.checkpoint_log_start(if_changed=True)
        self._offsets.lower_recovery_point(self._offsets.recovery_point)  # a stale checkpoint

    @classmethod
    def open(
        cls,
        directory: str | Path,
        config: LogConfig | None = None,
        clock_ms: Callable[[], int] | None = None,
        *,
        file_io: FileIO | None = None,
    ) -> SegmentedLog:
        """Open the log in ``directory``, creating it if needed and recovering it if it was not
        closed cleanly.

        Args:
            config: the log's settings (default `LogConfig()`).
            clock_ms: the clock for ``segment.ms``, ``flush.ms`` and retention (wall clock by
                default; tests and the simulator inject theirs).
            file_io: the segments' system calls (default: `storage.file_io.file_io_for`; tests
                inject faults here).

        Raises:
            KafkaStorageError: on a malformed checkpoint file, or if the directory is not
                usable (any ``OSError``).
        """
        return cls(Path(directory), config or LogConfig(), clock_ms or wall_clock_ms, file_io)

    # --- read-only state -------------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return self._offsets.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments.log_end_offset

    @property
    def active_segment_base_offset(self) -> int:
        """The base offset of the segment taking appends: it changes when the log rolls."""
        return self._segments.active.base_offset

    @property
    def recovery_point(self) -> int:
        """Every offset below this is durable on disk."""
        return self._offsets.recovery_point

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self._epoch_cache

    @property
    def segments(self) -> list[SegmentInfo]:
        return self._segments.infos()

    @property
    def size_bytes(self) -> int:
        return self._segments.size_bytes

    @property
    def closed(self) -> bool:
        return self._health.closed

    @property
    def failed(self) -> KafkaStorageError | None:
        """The error that failed the log (see "Disk errors" above), or None if it works."""
        return self._health.failed

    @maps_storage_errors
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: see `LeaderEpochCache.end_offset_for`."""
        self._health.check_open()
        return self._epoch_cache.end_offset_for(epoch)

    @maps_storage_errors
    def assign_leader_epoch(self, epoch: int, start_offset: int) -> bool:
        """`LeaderEpochCache.assign`, durably, with disk errors mapped (a new leader's epoch)."""
        self._health.check_open()
        return self._epoch_cache.assign(epoch, start_offset)

    # --- appends ---------------------------------------------------------------------------------

    def append(
        self, batch: bytes | bytearray | memoryview, *, leader_epoch: int | None = None
    ) -> int:
        """Append one or more concatenated batches as leader: validate them, assign offsets
        from the log end offset (rewriting each base offset), stamp ``leader_epoch`` if given,
        and write them in one write. Durability: see the module docstring.

        Returns:
            The base offset assigned to the first batch.

        Raises:
            CorruptRecordError: a batch is truncated, has a bad magic or fails its CRC.
            RecordTooLargeError: a batch exceeds ``max.message.bytes``, or the whole append
                exceeds ``segment.bytes``.
            InvalidRecordError: ``batch`` is empty.
            KafkaStorageError: a disk error (see "Disk errors").
            LogClosedError: the log is closed.
        """
        # The hottest call of a broker: `maps_storage_errors` inlined (one frame less), the
        # open check reduced to one attribute, one batch checked in one call and written with
        # one writev: a new 21-byte head (base offset and epoch assigned) and the copy of the
        # rest that the CRC check made.
        health = self._health
        try:
            if not health.serving:
                health.check_open()
            data = batch if type(batch) is bytes else bytes(batch)
            checked = checked_single_batch(data, self._config)
            if checked is None:
                return self._append_many(data, leader_epoch)
            (length, epoch, magic, crc, delta, max_timestamp_ms, records), body = checked
            segments = self._segments
            offset = segments.active.next_offset
            next_offset = offset + delta + 1
            if leader_epoch is not None:
                epoch = leader_epoch
            if epoch >= 0 and epoch != self._epoch_cache.latest_epoch:
                self._epoch_cache.assign(epoch, offset)
            now_ms = self._clock_ms()
            try:
                seg = segments.for_append(len(data), next_offset, now_ms, self._config)
                seg.append_batch(
                    _HEAD.pack(offset, length, epoch, magic, crc),
                    body,
                    offset,
                    next_offset,
                    max_timestamp_ms,
                    now_ms,
                )
            except OSError as e:
                raise self._undo_append(e) from e
            self._flusher.after_append(records, now_ms)
            return offset
        except OSError as e:
            raise health.failed_by(e, "append") from e

    def _append_many(self, data: bytes, leader_epoch: int | None) -> int:
        first = self.log_end_offset
        out, assigned = prepare_leader_append(
            data, log_end_offset=first, leader_epoch=leader_epoch, config=self._config
        )
        if leader_epoch is not None:
            if leader_epoch != self._epoch_cache.latest_epoch:
                self._epoch_cache.assign(leader_epoch, first)
            self._append(out, assigned)
        else:
            self._append(out, assigned)
            # NB: after the write, so that a failed one adds no epoch
            assign_epochs(self._epoch_cache, assigned)
        return first

    @maps_storage_errors
    def append_as_follower(self, batches: bytes | bytearray | memoryview) -> int:
        """Append batches fetched from the leader, keeping their offsets and leader epochs.

        Returns:
            The base offset of the first batch (the log end offset before the call).

        Raises:
            InvalidOffsetError: the batches do not continue the log end offset contiguously.
            CorruptRecordError: a batch is truncated or fails its CRC.
            RecordTooLargeError: the append exceeds ``segment.bytes``.
            InvalidRecordError: ``batches`` is empty.
            LogClosedError: the log is closed.
        """
        self._health.check_open()
        data = batches if type(batches) is bytes else bytes(batches)
        first = self.log_end_offset
        spans = check_follower_append(data, log_end_offset=first, config=self._config)
        self._append(data, spans)
        assign_epochs(self._epoch_cache, spans)  # NB: after the write, as in `append`
        return first

    def _append(self, data: bytes | bytearray, spans: list[BatchSpan]) -> None:
        now_ms = self._clock_ms()
        try:
            seg = self._segments.for_append(len(data), spans[-1].next_offset, now_ms, self._config)
            seg.append(data, spans, now_ms)
        except OSError as e:
            raise self._undo_append(e) from e
        self._flusher.after_append(sum(span.record_count for span in spans), now_ms)

    def _undo_append(self, error: OSError) -> KafkaStorageError:
        """An append's roll or write failed before the segment recorded it: cut the active
        segment's file back to its recorded size (dropping a partial write) so the log is as
        before the call. Returns the error to raise.

        Raises:
            OSError: the cut failed too (the log then fails; see "Disk errors").
        """
        self._segments.cut_active_to_recorded_size()
        self._log.warning("append_undone", error=error.strerror, log_end_offset=self.log_end_offset)
        return storage_error(error, "append", self._directory)

    @maps_storage_errors
    def update_config(self, config: LogConfig) -> None:
        """Kafka's ``UnifiedLog.updateConfig``: apply a changed config to the open log at once.
        ``segment.bytes``, ``segment.ms``, ``max.message.bytes``, ``flush.*`` and
        ``retention.*`` govern the next append, roll, flush and retention pass;
        ``segment.index.bytes`` reaches only segments created from now on."""
        if config == self._config:
            return
        self._config = config
        self._flusher.update_config(config)
        self._segments.update_config(config)
        self._log.info("log_config_updated", **config.to_properties())

    # --- flushing (`storage.log_flush`) ----------------------------------------------------------

    @maps_storage_errors
    def flush(self) -> None:
        """fsync every unflushed segment (data and indexes) and the directory if segments were
        created, advance the recovery point to the log end offset and checkpoint it. Durable on
        return.

        Raises:
            LogClosedError: the log is closed.
        """
        self._health.check_open()
        self._flusher.flush(self._clock_ms(), checkpoint=True)

    @maps_storage_errors
    def sync_data(self) -> None:
        """fdatasync the data appended so far (and the directory after a roll): durable on
        return, as with ``sync_every_append``. The indexes and the recovery-point checkpoint
        wait for the next `flush`; recovery after a crash rebuilds them from the synced data.
        One fdatasync instead of `flush`'s five or so fsyncs (a Raft replica's per-Ready sync).

        Raises:
            LogClosedError: the log is closed.
        """
        self._health.check_open()
        self._flusher.sync_data()

    @maps_storage_errors
    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Flush if ``flush.ms`` has passed since the last flush (call it from a periodic tick);
        returns True if it flushed."""
        self._health.check_open()
        return self._flusher.maybe_flush(self._clock_ms() if now_ms is None else now_ms)

    def flush_due_in_ms(self) -> int | None:
        """Milliseconds until `maybe_flush` would flush (0: now): ``flush.ms`` since the last
        flush, if anything is unflushed; None if nothing waits for it (or ``flush.ms`` is off).
        For a shell that sleeps until its next deadline instead of polling."""
        if self._health.closed:
            return None
        return self._flusher.flush_due_in_ms(self._clock_ms())

    # --- reads -----------------------------------------------------------------------------------

    @maps_storage_errors
    def read(
        self,
        from_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one: bool = True,
    ) -> bytes:
        """Whole batches as raw bytes, starting with the batch that holds ``from_offset``.

        At most ``max_bytes``, except that the first batch is returned whole even if larger
        (Kafka's minOneMessage; with ``min_one`` False such a batch is not read: ``b""``); no batch
        whose base offset is ``>= max_offset`` (pass the high watermark to read only committed
        data); ``b""`` at the log end offset or when ``from_offset >= max_offset``. Reads stay
        within one segment.

        Raises:
            OffsetOutOfRangeError: ``from_offset`` is outside [log start offset, log end
                offset]; the error carries both.
            CorruptRecordError: a batch of the answer fails its header, CRC or offset checks
                (data corrupted on disk; see "Disk errors" and `fail_corrupt`).
            KafkaStorageError: a disk error (the log fails: see "Disk errors").
            LogClosedError: the log is closed.
        """
        self._health.check_open()
        return read_batches(
            self._segments.files,
            self._segments.bases,
            log_start_offset=self._offsets.log_start_offset,
            from_offset=from_offset,
            max_bytes=max_bytes,
            max_offset=max_offset,
            directory=self._directory,
            logger=self._log,
            min_one=min_one,
        )

    @maps_storage_errors
    def read_region(
        self,
        from_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one: bool = True,
    ) -> Records:
        """The batches `read` returns, as a `FileRegion` of their segment (``b""`` for none),
        for a sender that hands them to the kernel (``sendfile``): found from the index and
        batch headers, not read, and so not CRC-checked (`storage.log_read.read_region`).

        Raises:
            As `read`.
        """
        self._health.check_open()
        return read_region(
            self._segments.files,
            self._segments.bases,
            log_start_offset=self._offsets.log_start_offset,
            from_offset=from_offset,
            max_bytes=max_bytes,
            max_offset=max_offset,
            directory=self._directory,
            logger=self._log,
            min_one=min_one,
        )

    def fail_corrupt(self, offset: int, reason: str) -> KafkaStorageError:
        """Take the log out of service because a read from ``offset`` found corrupt data: lower
        the recovery point to the base offset of the segment holding ``offset`` (durably, if
        the disk lets it), so the next open re-validates that segment and cuts it at the
        corrupt batch, and fail the log (see "Disk errors"). Returns the error to raise.

        Only for a replica that another copy can rebuild: the cut drops every later batch.
        """
        if self._health.failed is not None:
            return self._health.failed
        with contextlib.suppress(OSError):  # lowered even if the checkpoint fails
            self._offsets.lower_recovery_point(self._segments.base_offset_holding(offset))
        return self._health.fail(KafkaStorageError(reason))

    @maps_storage_errors
    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """The first offset at or after the log start offset whose record timestamp is
        ``>= timestamp_ms`` (ListOffsets by timestamp), or None if every record is older.
        `EARLIEST_TIMESTAMP` (-2) answers the log start offset, `LATEST_TIMESTAMP` (-1) the
        log end offset.

        Raises:
            LogClosedError: the log is closed.
        """
        self._health.check_open()
        return offset_for_timestamp(
            self._segments.files,
            log_start_offset=self._offsets.log_start_offset,
            timestamp_ms=timestamp_ms,
        )

    # --- truncation and retention (`storage.log_trim`) -------------------------------------------

    @maps_storage_errors
    def truncate_to(self, offset: int) -> bool:
        """Remove every offset ``>= offset`` (no-op if ``offset >= LEO``). A batch holding
        ``offset`` is removed whole, so the new LEO may be below ``offset``. Below the log start
        offset this is `truncate_fully_and_start_at`. Durable on return; returns True if the
        log changed. If the batch holding ``offset`` starts below the log start offset, the log
        is left empty at the log start offset.

        Raises:
            InvalidOffsetError: ``offset`` is negative.
            LogClosedError: the log is closed.
        """
        self._health.check_open()
        return self._trimmer.truncate_to(offset, self._config)

    @maps_storage_errors
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset`` (log start = LEO = ``offset``);
        clears the leader-epoch cache. Durable on return.

        Raises:
            InvalidOffsetError: ``offset`` is negative.
            LogClosedError: the log is closed.
        """
        self._health.check_open()
        self._trimmer.truncate_fully_and_start_at(offset, self._config)

    @maps_storage_errors
    def advance_log_start_offset(self, offset: int) -> bool:
        """Raise the log start offset to ``offset`` (after a Raft snapshot, or DeleteRecords),
        deleting the segments wholly below it (never the active one) and trimming the epoch
        cache. No-op if ``offset`` is not above the current start. Durable on return; returns
        True if the start moved.

        Raises:
            OffsetOutOfRangeError: ``offset`` is above the log end offset.
            LogClosedError: the log is closed.
        """
        self._health.check_open()
        return self._trimmer.advance_log_start_offset(offset)

    delete_records_before = advance_log_start_offset

    @maps_storage_errors
    def apply_retention(
        self, now_ms: int | None = None, *, high_watermark: int | None = None
    ) -> int:
        """Delete old segments from the front by ``retention.ms`` (the segment's newest
        timestamp is older than ``now - retention.ms``), then by ``retention.bytes`` (while the
        log stays at least that large without the segment). Never deletes the active segment,
        nor, if ``high_watermark`` is given, a segment holding offsets at or above it. Moves the
        log start offset to the first remaining segment. Durable on return.

        Returns:
            The number of segments deleted.

        Raises:
            LogClosedError: the log is closed.
        """
        self._health.check_open()
        now_ms = self._clock_ms() if now_ms is None else now_ms
        return self._trimmer.apply_retention(self._config, now_ms, high_watermark)

    # --- compaction (`storage.log_cleaner`) ------------------------------------------------------

    def compact(
        self,
        now_ms: int | None = None,
        *,
        high_watermark: int,
        offset_map_bytes: int | None = None,
    ) -> CleanResult | None:
        """One log-cleaner pass on this thread if ``cleanup.policy`` includes ``compact``: keep
        the latest record of each key in the cleanable segments (never the active one, never
        at or past ``high_watermark``, never younger than ``min.compaction.lag.ms``),
        tombstones until ``delete.retention.ms``, when the dirty ratio reaches
        ``min.cleanable.dirty.ratio``; with ``offset_map_bytes``
        (``log.cleaner.dedupe.buffer.size``) only the dirty prefix whose keys fit. Offsets,
        segment bases and the log end offset do not change. Durable on return (a crash midway
        is finished by recovery). See `storage.compaction` and `storage.log_cleaner`.
        `prepare_compaction` and `finish_compaction` split it around `run_clean`, which may
        run in a worker thread.

        Returns:
            What the pass did, or None if there was nothing to clean.

        Raises:
            KafkaStorageError: a disk error (the log fails: see "Disk errors").
            LogClosedError: the log is closed.
            CorruptRecordError: a segment does not decode.
        """
        job = self.prepare_compaction(now_ms, high_watermark, offset_map_bytes)
        if job is None:
            return None
        output: CleanOutput | Exception
        try:
            output = run_clean(job)
        except (OSError, KraftError) as e:
            output = e
        return self.finish_compaction(job, output)

    @maps_storage_errors
    def prepare_compaction(
        self, now_ms: int | None, high_watermark: int, offset_map_bytes: int | None = None
    ) -> CleanJob | None:
        """Plan a pass (`storage.log_cleaner.prepare_clean`; None: nothing to clean)."""
        self._health.check_open()
        return prepare_clean(
            self._directory,
            self._segments,
            self._config,
            log_start_offset=self._offsets.log_start_offset,
            high_watermark=min(high_watermark, self.log_end_offset),
            now_ms=self._clock_ms() if now_ms is None else now_ms,
            offset_map_bytes=offset_map_bytes,
        )

    @maps_storage_errors
    def finish_compaction(
        self, job: CleanJob, output: CleanOutput | Exception
    ) -> CleanResult | None:
        """Swap a pass's output in (`storage.log_cleaner.finish_clean`), or raise its error;
        None if the log changed under the pass (retention, a truncation) or closed: dropped."""
        health = self._health
        usable = not health.closed and health.failed is None
        return finish_clean(self._segments, job, output, log_usable=usable, logger=self._log)

    # --- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Flush everything, checkpoint, write the clean-shutdown marker and close the files;
        the next open skips recovery. Idempotent. A failed log is abandoned instead.

        Raises:
            KafkaStorageError: a disk error; the files are closed anyway (no marker: the next
                open recovers the log).
        """
        if self._health.closed:
            return
        if self._health.failed is not None:
            self.abandon()  # NB: nothing of a failed log is trusted: the next open recovers it
            return
        try:
            self._flusher.flush(self._clock_ms(), checkpoint=True)
            self._offsets.checkpoint_log_start(if_changed=True)
        except OSError as e:
            self.abandon()
            raise self._health.fail(storage_error(e, "close", self._directory)) from e
        self._health.mark_closed()
        errors = self._segments.close()
        try:
            if not errors:
                (self._directory / CLEAN_SHUTDOWN_FILE).touch()
                fsync_dir(self._directory)
        except OSError as e:
            errors.append(e)
        if errors:
            raise self._health.fail(storage_error(errors[0], "close", self._directory)) from errors[
                0
            ]
        self._log.info("log_closed", log_end_offset=self.log_end_offset)

    def abandon(self) -> None:
        """Close the file descriptors as a crash would: nothing flushed, no clean-shutdown
        marker, pending index entries lost. How a failed log is closed (the next open
        recovers it), and a crash for tests and the simulator."""
        if self._health.closed:
            return
        self._segments.abandon()
        self._health.mark_closed()

    def __enter__(self) -> SegmentedLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"SegmentedLog({str(self._directory)!r}, log_start_offset={self.log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, segments={len(self._segments)})"
        )


__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "SegmentInfo",
    "SegmentedLog",
    "wall_clock_ms",
]
