"""Opening a log directory: load its segments and recover after an unclean shutdown.

Theory of operation (Kafka's ``LogLoader``)
-------------------------------------------
1. Leftovers of interrupted operations go: ``*.tmp`` checkpoint files, index files without a
   segment file, the log cleaner's ``*.log.cleaned`` files; its ``*.log.swap`` files replace
   their segments (`storage.log_cleaner.finish_interrupted_swaps`), which are then recovered
   (their indexes rebuilt).
2. After a clean shutdown (the marker file exists) every segment is trusted: its indexes are
   sanity-checked and only the bytes after the last index entry are read to find its next
   offset. A segment that fails the checks is recovered anyway.
3. After an unclean shutdown, segments wholly below the checkpointed recovery point are trusted
   the same way (their bytes and indexes were fsynced before that checkpoint was written). Every
   later segment is *recovered*: each batch's header, CRC-32C and offset contiguity are checked
   from the segment start, the file is cut at the first torn or corrupt batch, every later
   segment is deleted, and the indexes are rebuilt. So a batch that was flushed is never lost,
   and a corrupt batch is never served.
4. The leader-epoch cache is loaded (or rebuilt from the batches if its file is missing) and
   trimmed to ``[log start offset, log end offset]``.

The marker is deleted (and the deletion synced) before the log accepts writes, so a crash from
then on is seen as unclean.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import structlog

from storage.checkpoint import fsync_dir, read_offset
from storage.config import LogConfig
from storage.file_io import FileIO
from storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from storage.log_cleaner import finish_interrupted_swaps
from storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, BatchSpan, LogSegment

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"

_SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex)$")

_log = structlog.get_logger(__name__)


@dataclass(slots=True, kw_only=True)
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    checkpointed_recovery_point: int | None
    checkpointed_log_start_offset: int | None
    epoch_cache: LeaderEpochCache
    had_clean_shutdown: bool
    segments_recovered: int
    bytes_truncated: int


def load_log(directory: Path, config: LogConfig, io: FileIO) -> LoadedLog:
    """Open (creating if needed) the log in ``directory``; recover it if it was not closed
    cleanly. On return the clean-shutdown marker is gone (durably). ``io`` does the segments'
    data I/O (`storage.file_io`).

    Raises:
        KafkaStorageError: if a checkpoint file is malformed.
        OSError: if the directory cannot be read or written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / CLEAN_SHUTDOWN_FILE
    clean = marker.exists()
    swapped = finish_interrupted_swaps(directory)
    bases = _clean_directory(directory)
    recovery_point_checkpoint = read_offset(directory / RECOVERY_POINT_CHECKPOINT)
    start_checkpoint = read_offset(directory / LOG_START_OFFSET_CHECKPOINT)
    recovery_point = recovery_point_checkpoint or 0
    log = _log.bind(directory=str(directory))

    segments: list[LogSegment] = []
    leo_holder = [0]
    epoch_path = directory / LEADER_EPOCH_CHECKPOINT
    loaded_cache = LeaderEpochCache.load(epoch_path, lambda: leo_holder[0])
    cache = loaded_cache or LeaderEpochCache(None, lambda: leo_holder[0])

    def assign_epoch(span: BatchSpan) -> None:
        if span.partition_leader_epoch >= 0:
            cache.assign(span.partition_leader_epoch, span.base_offset)

    recovered = truncated = 0
    for i, base in enumerate(bases):
        seg = LogSegment.open_existing(directory, base, config, io)
        if segments and base != segments[-1].next_offset:
            # Not contiguous with what precedes (that segment was cut or is damaged): drop it
            # and everything after, as a corrupt tail.
            log.warning("segment_discarded", base_offset=base, expected=segments[-1].next_offset)
            seg.delete()
            for later in bases[i + 1 :]:
                LogSegment.open_existing(directory, later, config, io).delete()
            break
        below_recovery_point = i + 1 < len(bases) and bases[i + 1] <= recovery_point
        trusted = (clean or below_recovery_point) and base not in swapped and seg.load()
        if trusted:
            if loaded_cache is None:
                for _pos, h in seg.iter_headers(0):
                    if h[2] >= 0:
                        cache.assign(h[2], h[0])
        else:
            cut = seg.recover(assign_epoch)
            seg.dirty = True  # validated, but maybe only in the page cache (a process crash)
            recovered += 1
            if cut:
                truncated += cut
                log.warning(
                    "tail_truncated",
                    segment=base,
                    bytes_truncated=cut,
                    next_offset=seg.next_offset,
                )
                segments.append(seg)
                for later in bases[i + 1 :]:
                    LogSegment.open_existing(directory, later, config, io).delete()
                break
        segments.append(seg)

    if not segments:
        base = max(start_checkpoint or 0, 0)
        segments.append(LogSegment.create(directory, base, config, io))
    log_end_offset = segments[-1].next_offset
    leo_holder[0] = log_end_offset
    log_start_offset = max(start_checkpoint or 0, segments[0].base_offset)
    if log_start_offset > log_end_offset:
        # The start moved past what survived (e.g. a snapshot was installed, then a crash cut
        # the log): start empty there.
        for seg in reversed(segments):
            seg.delete()
        segments = [LogSegment.create(directory, log_start_offset, config, io)]
        log_end_offset = log_start_offset
        leo_holder[0] = log_end_offset
        cache.clear()

    if loaded_cache is None:
        cache = LeaderEpochCache(epoch_path, lambda: leo_holder[0], cache.entries)
    cache.truncate_from_end(log_end_offset)
    cache.truncate_from_start(log_start_offset)
    if loaded_cache is None and cache.entries:
        # NB: a missing file reads as an empty cache, so a new log writes none (each write is
        # two fsyncs: a broker opening 10,000 new replicas spent most of its time in them).
        cache.flush()

    recovery_point = log_end_offset if clean else min(recovery_point, log_end_offset)
    if clean:
        marker.unlink()
    fsync_dir(directory)  # the marker's removal, deleted tails, created segments
    if not bases:
        log.info("log_created", log_start_offset=log_start_offset)
    elif recovered or not clean:
        log.info(
            "log_recovered",
            clean_shutdown=clean,
            segments=len(segments),
            segments_recovered=recovered,
            bytes_truncated=truncated,
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
            recovery_point=recovery_point,
        )
    return LoadedLog(
        segments=segments,
        log_start_offset=log_start_offset,
        recovery_point=recovery_point,
        checkpointed_recovery_point=recovery_point_checkpoint,
        # A missing checkpoint reads as the first segment's base: no need to write that one.
        checkpointed_log_start_offset=(
            log_start_offset
            if start_checkpoint is None and log_start_offset == segments[0].base_offset
            else start_checkpoint
        ),
        epoch_cache=cache,
        had_clean_shutdown=clean,
        segments_recovered=recovered,
        bytes_truncated=truncated,
    )


def _clean_directory(directory: Path) -> list[int]:
    """Delete leftovers; return the base offsets of the segment files, ascending."""
    logs: set[int] = set()
    indexes: list[tuple[int, Path]] = []
    for entry in os.scandir(directory):
        if entry.name.endswith(".tmp"):
            os.unlink(entry.path)
            continue
        m = _SEGMENT_NAME.match(entry.name)
        if m is None:
            continue
        base = int(m.group(1))
        if "." + m.group(2) == LOG_SUFFIX:
            logs.add(base)
        elif "." + m.group(2) in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            indexes.append((base, Path(entry.path)))
    for base, path in indexes:
        if base not in logs:
            path.unlink()
    return sorted(logs)


__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "LoadedLog",
    "load_log",
]
