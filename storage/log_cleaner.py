"""The log cleaner's file work: read the cleanable segments, rewrite them, swap them in.

Theory of operation (Kafka's ``Cleaner.cleanSegments`` and ``LogSegment`` swap files)
-----------------------------------------------------------------------------------
`clean_log` asks `storage.compaction.plan_compaction` what to clean, then makes two passes
over the planned segments, holding at most one segment read plus one group's cleaned bytes
(up to ``segment.bytes``) in memory:

1. *map*: every keyed record below the first uncleanable offset goes into an `OffsetMap`
   (each key's latest offset);
2. *rewrite*: each segment's records are filtered (`compaction.clean_batches`), groups are
   formed and swapped in (below); a lone segment that loses nothing is left as it is.

Consecutive segments whose cleaned bytes fit in one ``segment.bytes`` are merged into one
segment named by the first one's base offset (Kafka's ``groupSegmentsBySize``), so a
compacted log does not keep one small file per segment ever written. The swap of one group,
each step durable before the next, so a crash at any point leaves either the old segments or
the new one, never a mix:

====  ===========================================================  ==========================
step  action                                                       a crash after it leaves
====  ===========================================================  ==========================
1     write ``<first base>.log.cleaned``, fsync                    the old segments (recovery
                                                                   deletes ``.cleaned``)
2     rename it to ``<first base>.log.swap``, fsync the directory  the swap to finish
3     delete the group's later segments and the first one's        the swap to finish
      indexes, fsync the directory
4     rename ``.swap`` over ``<first base>.log``, fsync the dir    the new segment
5     reopen the segment and rebuild its indexes                   the new segment
====  ===========================================================  ==========================

`finish_interrupted_swaps` is recovery's half (``storage.log_loader`` calls it first): a
``.cleaned`` file is deleted; a ``.swap`` file replaces its segment, the segments it covers
after its base are deleted, and its indexes are rebuilt. Record offsets never change and the
merged segment covers exactly its group's offsets, so readers and followers are unaffected by
a swap. The first dirty offset is
checkpointed in ``cleaner-offset-checkpoint`` after a pass.

NB: the cleaner runs on the caller's thread (the broker's event loop), one log at a time: a
pass over large segments delays the broker's other work while it runs (Kafka runs
``log.cleaner.threads`` threads beside the request handlers).
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from storage.checkpoint import fsync_dir, read_offset, write_offset, write_synced
from storage.compaction import (
    CLEANER_OFFSET_CHECKPOINT,
    OffsetMap,
    clean_batches,
    map_keys,
    plan_compaction,
)
from storage.config import INT_MAX, LogConfig
from storage.errors import CorruptRecordError, KafkaStorageError
from storage.records import iter_batches
from storage.segment import INDEX_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name
from storage.segment_list import SegmentList

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_LEFTOVER = re.compile(r"^(\d{20})\.log\.(cleaned|swap)$")
_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanResult:
    """What one pass did."""

    segments_cleaned: int
    segments_rewritten: int
    records_removed: int
    bytes_before: int
    bytes_after: int
    first_dirty_offset: int
    end_offset: int
    dirty_ratio: float


def clean_log(
    directory: Path,
    segments: SegmentList,
    config: LogConfig,
    *,
    log_start_offset: int,
    high_watermark: int,
    now_ms: int,
) -> CleanResult | None:
    """One cleaner pass over the log in ``directory`` (see the module docstring); None when
    the plan says there is nothing to do.

    Raises:
        OSError: a disk error (the caller maps it; a swap in progress is finished by
            recovery).
        CorruptRecordError: a segment does not decode.
    """
    checkpoint = directory / CLEANER_OFFSET_CHECKPOINT
    first_dirty = read_offset(checkpoint)
    if first_dirty is not None and first_dirty > segments.log_end_offset:
        first_dirty = None  # the log was truncated below it since: clean from the start
    plan = plan_compaction(
        segments.infos(),
        config,
        first_dirty_offset=first_dirty,
        log_start_offset=log_start_offset,
        high_watermark=high_watermark,
        now_ms=now_ms,
    )
    if plan is None:
        return None
    offsets = OffsetMap()
    for seg in list(segments.files[: plan.segment_count]):
        map_keys(seg.io.pread(seg.fd, seg.size, 0), offsets, end_offset=plan.end_offset)
    rewritten = removed = before = after = 0
    # Groups of consecutive segments whose cleaned bytes fit one segment become one (Kafka's
    # groupSegmentsBySize): ``group`` holds the cleaned data of the segments from ``index``.
    index = 0
    group: list[bytes] = []
    group_changed = False
    remaining = plan.segment_count

    def swap_group() -> None:
        nonlocal index, rewritten, group_changed
        if group_changed or len(group) > 1:
            swap = write_swap_file(directory, segments.files[index].base_offset, b"".join(group))
            segments.replace_with_swap(index, index + len(group) - 1, swap, config)
            rewritten += 1
        index += 1  # the group is one segment now
        group.clear()
        group_changed = False

    for _ in range(remaining):
        seg = segments.files[index + len(group)]
        data = seg.io.pread(seg.fd, seg.size, 0)
        before += len(data)
        cleaned = clean_batches(data, offsets, config, now_ms=now_ms)
        if cleaned is not None:
            data, count = cleaned
            removed += count
        after += len(data)
        if group and (
            sum(map(len, group)) + len(data) > config.segment_bytes
            or seg.next_offset - segments.files[index].base_offset > INT_MAX
        ):
            swap_group()
        group.append(data)
        group_changed = group_changed or cleaned is not None
    if group:
        swap_group()
    write_offset(checkpoint, plan.end_offset)
    return CleanResult(
        segments_cleaned=plan.segment_count,
        segments_rewritten=rewritten,
        records_removed=removed,
        bytes_before=before,
        bytes_after=after,
        first_dirty_offset=plan.first_dirty_offset,
        end_offset=plan.end_offset,
        dirty_ratio=plan.dirty_ratio,
    )


def write_swap_file(directory: Path, base_offset: int, data: bytes) -> Path:
    """Steps 1-2: ``data`` durably in ``<base>.log.swap``; returns its path."""
    name = segment_file_name(base_offset)
    cleaned = directory / (name + CLEANED_SUFFIX)
    write_synced(cleaned, data)
    swap = directory / (name + SWAP_SUFFIX)
    os.replace(cleaned, swap)
    fsync_dir(directory)
    return swap


def finish_interrupted_swaps(directory: Path) -> set[int]:
    """Recovery: delete ``*.cleaned`` files and finish every ``*.swap`` (steps 3-4): the
    segments the swap file covers after its own base (a merged group) are deleted, the swap
    file replaces the first. Returns the base offsets of the segments swapped in, whose
    indexes the loader must rebuild."""
    swapped: set[int] = set()
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        m = _LEFTOVER.match(entry.name)
        if m is None:
            continue
        if m.group(2) == CLEANED_SUFFIX[1:]:
            os.unlink(entry.path)
            continue
        base = int(m.group(1))
        next_offset = base
        try:
            for _pos, header in iter_batches(Path(entry.path).read_bytes()):
                next_offset = header.next_offset  # written whole and fsynced before the rename
        except CorruptRecordError as e:
            raise KafkaStorageError(f"corrupt cleaner swap file {entry.path}: {e}") from e
        for other in os.scandir(directory):
            n = _SEGMENT_FILE.match(other.name)
            if n is not None and base < int(n.group(1)) < next_offset:
                os.unlink(other.path)  # a later member of the merged group
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / segment_file_name(base, suffix))
        os.replace(entry.path, directory / segment_file_name(base))
        swapped.add(base)
    if swapped:
        fsync_dir(directory)
    return swapped


__all__ = [
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "CleanResult",
    "clean_log",
    "finish_interrupted_swaps",
    "write_swap_file",
]
