"""The log cleaner's file work: read the cleanable segments, rewrite them, swap them in.

Theory of operation (Kafka's ``Cleaner.cleanSegments`` and ``LogSegment`` swap files)
-----------------------------------------------------------------------------------
A pass has three steps, so that the long middle one runs off the owner's thread (the broker
runs it in one of ``log.cleaner.threads`` worker threads, as Kafka does, while its event loop
keeps serving):

- `prepare_clean` (the owner's thread): `storage.compaction.plan_compaction` says what is
  cleanable; the job records each planned segment as it is now (base, next offset, size,
  path, and the segment object itself as its identity).
- `run_clean` (any thread; it touches nothing the log owns): reads the planned segments by
  path through the log's `FileIO`, holding at most one segment read plus one group's cleaned
  bytes (up to ``segment.bytes``) in memory:

  1. *map*: the keyed records of the dirty part go into an `OffsetMap` bounded by
     ``log.cleaner.dedupe.buffer.size``; a map that fills ends the pass early (the rest of the
     dirty part waits for the next pass);
  2. *rewrite*: each segment up to the map's end is filtered (`compaction.clean_batches`) and
     grouped (below), and each group that changed is written to ``<first base>.log.cleaned``
     and fsynced (swap step 1).

- `apply_clean` (the owner's thread, once `is_current` says every planned segment is still
  the one the job read: the same segment objects, sizes and next offsets; after retention, a
  truncation or a reset in between the pass is moot and `discard_clean` deletes its
  ``.cleaned`` files): swaps each group in (steps 2-5) and checkpoints the pass's end;
  `finish_clean` makes that choice for `storage.log.SegmentedLog.finish_compaction`.
  `clean_log` runs the three in a row.

Consecutive segments whose cleaned bytes fit in one ``segment.bytes`` are merged into one
segment named by the first one's base offset (Kafka's ``groupSegmentsBySize``), so a
compacted log does not keep one small file per segment ever written. The swap of one group,
each step durable before the next, so a crash at any point leaves either the old segments or
the new one, never a mix:

====  ===========================================================  ==========================
step  action                                                       a crash after it leaves
====  ===========================================================  ==========================
1     write ``<first base>.log.cleaned``, fsync (worker)           the old segments (recovery
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
a swap. The end of the pass (the next pass's first dirty offset) is checkpointed in
``cleaner-offset-checkpoint`` after the swaps.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from structlog.typing import FilteringBoundLogger

from storage.checkpoint import fsync_dir, read_offset, write_offset, write_synced
from storage.compaction import (
    CLEANER_OFFSET_CHECKPOINT,
    CompactionPlan,
    OffsetMap,
    clean_batches,
    map_keys,
    plan_compaction,
    scan_transactions,
)
from storage.config import INT_MAX, LogConfig
from storage.errors import CorruptRecordError, KafkaStorageError
from storage.file_io import FileIO
from storage.records import iter_batches
from storage.segment import INDEX_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, segment_file_name
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
    """Where the pass ended: the plan's first uncleanable offset, or earlier when the offset
    map filled (the next pass's first dirty offset)."""
    dirty_ratio: float
    keys_mapped: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentSnapshot:
    """One planned segment as the job saw it."""

    base_offset: int
    next_offset: int
    size_bytes: int
    path: Path
    segment: LogSegment
    """The live segment object: the swap applies only while it is still in the list (a
    truncation or a reset may put a new file under the same name; the worker never uses
    it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanJob:
    """What `run_clean` works on: immutable, safe to hand to another thread."""

    directory: Path
    plan: CompactionPlan
    segments: tuple[SegmentSnapshot, ...]
    config: LogConfig
    now_ms: int
    io: FileIO
    offset_map_bytes: int | None
    """``log.cleaner.dedupe.buffer.size`` for this pass (None: unbounded)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanedGroup:
    """Segments ``[first, last]`` of the job become the one in ``cleaned`` (None: the group
    is a lone segment that lost nothing, left as it is)."""

    first: int
    last: int
    cleaned: Path | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanOutput:
    """What `run_clean` wrote: durable ``.cleaned`` files, one per changed group."""

    groups: tuple[CleanedGroup, ...]
    end_offset: int
    keys_mapped: int
    records_removed: int
    bytes_before: int
    bytes_after: int


def prepare_clean(
    directory: Path,
    segments: SegmentList,
    config: LogConfig,
    *,
    log_start_offset: int,
    high_watermark: int,
    now_ms: int,
    offset_map_bytes: int | None = None,
) -> CleanJob | None:
    """Plan a pass (on the log owner's thread); None when there is nothing to do.

    Raises:
        OSError: a disk error reading the checkpoint.
    """
    first_dirty = read_offset(directory / CLEANER_OFFSET_CHECKPOINT)
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
    planned = segments.files[: plan.segment_count]
    return CleanJob(
        directory=directory,
        plan=plan,
        segments=tuple(
            SegmentSnapshot(
                base_offset=seg.base_offset,
                next_offset=seg.next_offset,
                size_bytes=seg.size,
                path=seg.log_path,
                segment=seg,
            )
            for seg in planned
        ),
        config=config,
        now_ms=now_ms,
        io=planned[0].io,
        offset_map_bytes=offset_map_bytes,
    )


def _read(job: CleanJob, seg: SegmentSnapshot) -> bytes:
    fd = job.io.open(seg.path, os.O_RDONLY)
    try:
        data = job.io.pread(fd, seg.size_bytes, 0)
    finally:
        os.close(fd)
    if len(data) != seg.size_bytes:
        raise CorruptRecordError(f"segment {seg.path} is shorter than its recorded size")
    return data


def run_clean(job: CleanJob) -> CleanOutput:
    """Map and rewrite (any thread; see the module docstring). The ``.cleaned`` files it
    returns are durable; `apply_clean` swaps them in or `discard_clean` deletes them.

    Raises:
        OSError: a disk error (or a planned segment deleted meanwhile: the pass is moot).
        CorruptRecordError: a segment does not decode.
    """
    plan, config, now_ms = job.plan, job.config, job.now_ms
    offsets = OffsetMap.for_buffer(job.offset_map_bytes)
    end = plan.end_offset
    for seg in job.segments:  # which transactions aborted (their batches precede the marker)
        scan_transactions(_read(job, seg), offsets)
    unresolved = offsets.first_unresolved(plan.first_dirty_offset)
    if unresolved is not None:
        end = min(end, unresolved)  # a transaction whose marker is past the range: not yet
    for seg in job.segments:  # the clean part too: each producer's last batch
        stop = map_keys(
            _read(job, seg), offsets, end_offset=end, start_offset=plan.first_dirty_offset
        )
        if stop is not None:
            end = stop  # the map is full: this pass ends here
            break
    offsets.end_offset = end
    todo = [seg for seg in job.segments if seg.base_offset < end]
    groups: list[CleanedGroup] = []
    removed = before = after = 0
    written: list[Path] = []
    # Groups of consecutive segments whose cleaned bytes fit one segment become one (Kafka's
    # groupSegmentsBySize): ``group`` holds the cleaned data of the segments from ``first``.
    first = 0
    group: list[bytes] = []
    group_changed = False

    def close_group() -> None:
        nonlocal first, group_changed
        last = first + len(group) - 1
        cleaned = None
        if group_changed or len(group) > 1:
            cleaned = write_cleaned_file(job, job.segments[first].base_offset, b"".join(group))
            written.append(cleaned)
        groups.append(CleanedGroup(first=first, last=last, cleaned=cleaned))
        first = last + 1
        group.clear()
        group_changed = False

    try:
        for i, seg in enumerate(todo):
            data = _read(job, seg)
            before += len(data)
            cleaned = clean_batches(data, offsets, config, now_ms=now_ms)
            if cleaned is not None:
                data, count = cleaned
                removed += count
            after += len(data)
            if group and (
                sum(map(len, group)) + len(data) > config.segment_bytes
                or seg.next_offset - job.segments[first].base_offset > INT_MAX
            ):
                close_group()
            assert first + len(group) == i
            group.append(data)
            group_changed = group_changed or cleaned is not None
        if group:
            close_group()
    except BaseException:
        _unlink_all(written)
        raise
    return CleanOutput(
        groups=tuple(groups),
        end_offset=end,
        keys_mapped=len(offsets),
        records_removed=removed,
        bytes_before=before,
        bytes_after=after,
    )


def write_cleaned_file(job: CleanJob, base_offset: int, data: bytes) -> Path:
    """Step 1: ``data`` durably in ``<base>.log.cleaned`` (any thread); returns its path."""
    cleaned = job.directory / (segment_file_name(base_offset) + CLEANED_SUFFIX)
    fd = job.io.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        view = memoryview(data)
        while view:
            view = view[job.io.write(fd, view) :]
        job.io.fsync(fd)
    finally:
        os.close(fd)
    return cleaned


def _unlink_all(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def discard_clean(output: CleanOutput) -> None:
    """Delete a pass's ``.cleaned`` files (a pass not applied; recovery would too)."""
    _unlink_all([g.cleaned for g in output.groups if g.cleaned is not None])


def is_current(segments: SegmentList, job: CleanJob) -> bool:
    """Whether the log's first segments are still the ones the job planned (the same segment
    objects, with the same next offset and size), the active segment after them."""
    files = segments.files
    count = len(job.segments)
    if len(files) <= count:  # the active segment is never cleaned
        return False
    return all(
        seg is snap.segment and seg.next_offset == snap.next_offset and seg.size == snap.size_bytes
        for seg, snap in zip(files[:count], job.segments, strict=True)
    )


def apply_clean(segments: SegmentList, job: CleanJob, output: CleanOutput) -> CleanResult:
    """Swap a finished pass onto the live log (on the log owner's thread, which checked
    `is_current` first) and checkpoint its end.

    Raises:
        OSError: a disk error (a swap in progress is finished by recovery).
    """
    assert is_current(segments, job), "the log changed under the pass"
    rewritten = 0
    for index, group in enumerate(output.groups):  # each group is one segment once swapped
        if group.cleaned is not None:
            swap = group.cleaned.with_name(group.cleaned.name[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX)
            os.replace(group.cleaned, swap)
            fsync_dir(job.directory)
            segments.replace_with_swap(index, index + group.last - group.first, swap, job.config)
            rewritten += 1
    write_offset(job.directory / CLEANER_OFFSET_CHECKPOINT, output.end_offset)
    return CleanResult(
        segments_cleaned=output.groups[-1].last + 1 if output.groups else 0,
        segments_rewritten=rewritten,
        records_removed=output.records_removed,
        bytes_before=output.bytes_before,
        bytes_after=output.bytes_after,
        first_dirty_offset=job.plan.first_dirty_offset,
        end_offset=output.end_offset,
        dirty_ratio=job.plan.dirty_ratio,
        keys_mapped=output.keys_mapped,
    )


def clean_log(
    directory: Path,
    segments: SegmentList,
    config: LogConfig,
    *,
    log_start_offset: int,
    high_watermark: int,
    now_ms: int,
    offset_map_bytes: int | None = None,
) -> CleanResult | None:
    """One whole cleaner pass on the caller's thread (`prepare_clean`, `run_clean`,
    `apply_clean`); None when the plan says there is nothing to do.

    Raises:
        OSError: a disk error (the caller maps it; a swap in progress is finished by
            recovery).
        CorruptRecordError: a segment does not decode.
    """
    job = prepare_clean(
        directory,
        segments,
        config,
        log_start_offset=log_start_offset,
        high_watermark=high_watermark,
        now_ms=now_ms,
        offset_map_bytes=offset_map_bytes,
    )
    if job is None:
        return None
    return apply_clean(segments, job, run_clean(job))  # nothing changes it meanwhile


def finish_clean(
    segments: SegmentList,
    job: CleanJob,
    output: CleanOutput | Exception,
    *,
    log_usable: bool,
    logger: FilteringBoundLogger,
) -> CleanResult | None:
    """The owner's end of a pass: `apply_clean` if the log is still usable (open, not failed)
    and `is_current`, else drop the pass (`discard_clean`; None). An ``Exception`` from
    `run_clean` is raised here, unless the pass is dropped anyway.

    Raises:
        OSError: a disk error during the swap (the caller maps it; recovery finishes it).
        Exception: the one `run_clean` raised.
    """
    if not log_usable or not is_current(segments, job):
        if not isinstance(output, Exception):
            discard_clean(output)
        logger.info("log_compaction_dropped", reason="log_changed_during_the_pass")
        return None
    if isinstance(output, Exception):
        raise output
    result = apply_clean(segments, job, output)
    logger.info(
        "log_compacted",
        segments_cleaned=result.segments_cleaned,
        segments_rewritten=result.segments_rewritten,
        records_removed=result.records_removed,
        bytes_before=result.bytes_before,
        bytes_after=result.bytes_after,
        end_offset=result.end_offset,
        keys_mapped=result.keys_mapped,
        dirty_ratio=round(result.dirty_ratio, 3),
    )
    return result


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
    "CleanJob",
    "CleanOutput",
    "CleanResult",
    "CleanedGroup",
    "SegmentSnapshot",
    "apply_clean",
    "clean_log",
    "discard_clean",
    "finish_clean",
    "finish_interrupted_swaps",
    "is_current",
    "prepare_clean",
    "run_clean",
    "write_cleaned_file",
    "write_swap_file",
]
