"""Reads over a log's segment list: locate the segment, read whole batches, validate them.

Theory of operation
-------------------
A read is an index lookup and one ``pread`` in the segment holding the offset
(`storage.segment.LogSegment.read`); nothing decodes records. The segment is found by
bisecting the segments' base offsets, skipping empty segments (a roll leaves the previous
active segment's successor empty until the next append). A read never crosses a segment.

Every read validates what it returns before anyone sees it: each batch's header, CRC-32C and
base offsets continuing one another (`storage.segment.find_corrupt_batch`; about 0.35 µs per
batch plus 35 µs per MB). A batch corrupted on disk is never served: the read raises
`CorruptRecordError` and logs ``corrupt_batch_read``, and the log stays usable (the caller
decides; a replica with another copy calls `SegmentedLog.fail_corrupt`).

*Regions* (`read_region`, a plaintext Kafka listener's consumer Fetch): the same batches as a
`storage.file_region.FileRegion` of the segment, which the listener sends with ``sendfile``
without reading them. Only their headers are checked on the way: a batch corrupted on disk is
served to that consumer, whose CRC check (``check.crcs``, on by default) refuses it, as with
Kafka's brokers, which never check CRCs on a fetch.

These are functions of the segment list the log owns and passes in; they keep no state and
never change the list. Disk errors (``OSError``) pass through to the log's one boundary.
"""

from __future__ import annotations

import bisect
import errno
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from structlog.typing import FilteringBoundLogger

from storage.errors import CorruptRecordError, OffsetOutOfRangeError
from storage.file_region import FileRegion, Records
from storage.segment import LogSegment, find_corrupt_batch

EARLIEST_TIMESTAMP = -2
"""`offset_for_timestamp` of this answers the log start offset (Kafka's ListOffsets -2)."""
LATEST_TIMESTAMP = -1
"""`offset_for_timestamp` of this answers the log end offset (Kafka's ListOffsets -1)."""
MAX_TIMESTAMP = -3
"""`offset_for_timestamp` of this answers the first record with the largest timestamp
(Kafka's ListOffsets -3, KIP-734)."""
EARLIEST_LOCAL_TIMESTAMP = -4
"""Kafka's ListOffsets -4 (KIP-405): the local log's start, here the log start offset (kraft
keeps no remote tier)."""


REGION_MIN_BYTES: Final = 64 * 1024
"""`read_region` answers fewer bytes than this as bytes (read and CRC-checked, as `read_batches`
does): a region's descriptor and ``sendfile`` cost more system calls than copying that little."""


def read_batches(
    segments: Sequence[LogSegment],
    bases: Sequence[int],
    *,
    log_start_offset: int,
    from_offset: int,
    max_bytes: int,
    max_offset: int | None,
    directory: Path,
    logger: FilteringBoundLogger,
    min_one: bool = True,
) -> bytes:
    """`SegmentedLog.read` over ``segments`` (whose base offsets are ``bases``).

    Raises:
        OffsetOutOfRangeError: ``from_offset`` is outside [log start offset, log end offset].
        CorruptRecordError: a batch of the answer fails its header, CRC or offset checks.
        OSError: a disk error (the caller maps it).
    """
    seg = _segment_of(segments, bases, log_start_offset, from_offset, max_offset)
    if seg is None:
        return b""
    try:
        data = seg.read(from_offset, max(max_bytes, 0), max_offset, min_one=min_one)
    except CorruptRecordError as e:
        raise _corrupt(seg, from_offset, e.message, directory, logger) from e
    return _checked(seg, from_offset, data, directory, logger)


def read_region(
    segments: Sequence[LogSegment],
    bases: Sequence[int],
    *,
    log_start_offset: int,
    from_offset: int,
    max_bytes: int,
    max_offset: int | None,
    directory: Path,
    logger: FilteringBoundLogger,
    min_one: bool = True,
) -> Records:
    """`SegmentedLog.read_region` over ``segments``: the batches `read_batches` returns, as a
    `FileRegion` of their segment when they are `REGION_MIN_BYTES` or more (else as bytes,
    checked as `read_batches` checks them). A region's headers are checked, not its CRCs: its
    bytes are not read (the consumer checks the CRCs, ``check.crcs``, as with Kafka).

    Raises:
        OffsetOutOfRangeError: ``from_offset`` is outside [log start offset, log end offset].
        CorruptRecordError: a bad batch header on the way.
        OSError: a disk error (the caller maps it).
    """
    seg = _segment_of(segments, bases, log_start_offset, from_offset, max_offset)
    if seg is None:
        return b""
    try:
        position, size, next_offset = seg.region(
            from_offset, max(max_bytes, 0), max_offset, min_one=min_one
        )
    except CorruptRecordError as e:
        raise _corrupt(seg, from_offset, e.message, directory, logger) from e
    if size >= REGION_MIN_BYTES:
        try:
            return FileRegion.of(seg.fd, position, size, next_offset)
        except OSError as e:
            # NB: out of file descriptors (many consumers' responses in flight) is no disk
            # error: read the bytes instead.
            if e.errno not in (errno.EMFILE, errno.ENFILE):
                raise
    data = seg.io.pread(seg.fd, size, position) if size else b""
    return _checked(seg, from_offset, data, directory, logger)


def _checked(
    seg: LogSegment, from_offset: int, data: bytes, directory: Path, logger: FilteringBoundLogger
) -> bytes:
    """``data`` once every batch in it passed its header, CRC and offset checks.

    Raises:
        CorruptRecordError: one did not (logged, as `_corrupt` says).
    """
    corrupt = find_corrupt_batch(data)
    if corrupt is not None:
        raise _corrupt(seg, from_offset, corrupt, directory, logger)
    return data


def _segment_of(
    segments: Sequence[LogSegment],
    bases: Sequence[int],
    log_start_offset: int,
    from_offset: int,
    max_offset: int | None,
) -> LogSegment | None:
    """The segment a read from ``from_offset`` reads, or None when it reads nothing (the log
    end offset, or at or past ``max_offset``).

    Raises:
        OffsetOutOfRangeError: ``from_offset`` is outside [log start offset, log end offset].
    """
    leo = segments[-1].next_offset
    if from_offset == leo:
        return None
    if from_offset < log_start_offset or from_offset > leo:
        raise OffsetOutOfRangeError(log_start_offset=log_start_offset, log_end_offset=leo)
    if max_offset is not None and from_offset >= max_offset:
        return None
    i = bisect.bisect_right(bases, from_offset) - 1
    seg = segments[i]
    while from_offset >= seg.next_offset:  # skip empty segments
        i += 1
        seg = segments[i]
    return seg


def _corrupt(
    segment: LogSegment,
    offset: int,
    reason: str,
    directory: Path,
    logger: FilteringBoundLogger,
) -> CorruptRecordError:
    logger.error("corrupt_batch_read", segment=segment.base_offset, reason=reason)
    return CorruptRecordError(
        f"corrupt batch in {segment.log_path.name} of {directory}: {reason}", offset=offset
    )


def offset_for_timestamp(
    segments: Sequence[LogSegment], *, log_start_offset: int, timestamp_ms: int
) -> int | None:
    """`SegmentedLog.offset_for_timestamp` over ``segments``: the first offset at or after
    ``log_start_offset`` whose record timestamp is ``>= timestamp_ms``, or None; for
    `MAX_TIMESTAMP`, the first record with the largest timestamp (None for an empty log)."""
    if timestamp_ms in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return log_start_offset
    if timestamp_ms == MAX_TIMESTAMP:
        live = [s for s in segments if s.next_offset > log_start_offset and s.max_timestamp_ms >= 0]
        if not live:
            return None
        # NB: the first segment on ties; a segment's maximum may come from a record below the
        # log start offset (then None), which retention makes rare.
        newest = max(live, key=lambda s: s.max_timestamp_ms)
        return newest.find_offset_by_timestamp(newest.max_timestamp_ms, log_start_offset)
    if timestamp_ms == LATEST_TIMESTAMP:
        return segments[-1].next_offset
    for seg in segments:
        if seg.next_offset <= log_start_offset or seg.max_timestamp_ms < timestamp_ms:
            continue
        found = seg.find_offset_by_timestamp(timestamp_ms, log_start_offset)
        if found is not None:
            return found
    return None


__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "REGION_MIN_BYTES",
    "offset_for_timestamp",
    "read_batches",
    "read_region",
]
