"""Preparing an append: check the batches, assign offsets, and the epochs they start.

Theory of operation
-------------------
Before a multi-batch append touches a file, the log asks these functions what to write:

- a *leader* append (`prepare_leader_append`) checks each batch (header, size, CRC, via
  `storage.segment.scan_batches`), that no batch exceeds ``max.message.bytes`` and the whole
  call fits one ``segment.bytes``, then rewrites each base offset to continue the log end
  offset and stamps the leader epoch if given (in a copy);
- a *follower* append (`check_follower_append`) checks the same and that the fetched batches
  continue the log end offset exactly: they keep the leader's offsets and epochs.

The common case, one batch per call, takes a faster path: `checked_single_batch` recognizes it
from the header alone and makes the same checks on that header tuple without building spans
or copying (keep the two paths in step).

The multi-batch functions return the batches' `BatchSpan`s as written. After the write,
`assign_epochs` records in the leader-epoch cache each epoch the batches start (KIP-101),
after the write so that a failed one adds none. Nothing here does I/O or keeps state.
"""

from __future__ import annotations

import struct

import google_crc32c

from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidOffsetError,
    InvalidRecordError,
    RecordTooLargeError,
)
from storage.leader_epoch import LeaderEpochCache
from storage.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    set_base_offset,
    set_partition_leader_epoch,
)
from storage.segment import BatchSpan, parse_header, scan_batches

# The v2 header fields an append needs, the others skipped: batch length, partition leader
# epoch, magic, CRC, last offset delta, max timestamp, record count.
_APPEND_HEADER = struct.Struct(">8xiibI2xi8xq8x2x4xi")
_CRC_START = 21
_crc32c = google_crc32c.value


def check_append_size(size: int, config: LogConfig) -> None:
    """Kafka: a whole append must fit in one segment (RecordBatchTooLargeException).

    Raises:
        RecordTooLargeError: ``size`` exceeds ``segment.bytes``.
    """
    if size > config.segment_bytes:
        raise RecordTooLargeError(
            f"append of {size} bytes exceeds segment.bytes={config.segment_bytes}"
        )


def checked_single_batch(
    data: bytes, config: LogConfig
) -> tuple[tuple[int, int, int, int, int, int, int], bytes] | None:
    """The header fields of ``data`` that an append needs and the bytes its CRC covers (from
    the attributes to the end: a copy), checked as `prepare_leader_append` checks each batch,
    if ``data`` is exactly one batch by its length field; else None (the caller takes the
    multi-batch path, which finds whatever is wrong). One call on the hot path: a slow version
    here costs every append. The fields, in order: batch length, partition leader epoch,
    magic, CRC, last offset delta, max timestamp, record count.

    Raises:
        CorruptRecordError: a bad header (magic, length, offset delta) or CRC.
        RecordTooLargeError: the batch exceeds ``max.message.bytes`` or ``segment.bytes``.
    """
    size = len(data)
    if size < BATCH_HEADER_SIZE:
        return None
    h = _APPEND_HEADER.unpack_from(data, 0)
    if h[0] + LOG_OVERHEAD != size:
        return None
    if h[2] != MAGIC or h[0] < BATCH_HEADER_SIZE - LOG_OVERHEAD or h[4] < 0:
        parse_header(data, 0)  # raises CorruptRecordError with the reason
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {size} bytes exceeds max.message.bytes={config.max_message_bytes}"
        )
    if size > config.segment_bytes:
        check_append_size(size, config)
    # NB: google_crc32c takes bytes only (not a memoryview), so the checked bytes are a copy;
    # the caller writes that copy (hot in the cache) after a new 21-byte head
    body = data[_CRC_START:]
    if _crc32c(body) != h[3]:
        raise CorruptRecordError("CRC mismatch in batch")
    return h, body


def _scan(data: bytes, config: LogConfig) -> list[BatchSpan]:
    spans = scan_batches(data, expected_offset=None)[0]
    if not spans:
        raise InvalidRecordError("an append needs at least one batch")
    check_append_size(len(data), config)
    return spans


def prepare_leader_append(
    data: bytes, *, log_end_offset: int, leader_epoch: int | None, config: LogConfig
) -> tuple[bytearray, list[BatchSpan]]:
    """The bytes to write for a leader append of ``data`` at ``log_end_offset``, and their
    spans (offsets assigned, ``leader_epoch`` stamped if given).

    Raises:
        CorruptRecordError: a batch is truncated, has a bad magic or fails its CRC.
        RecordTooLargeError: a batch exceeds ``max.message.bytes``, or the whole append
            exceeds ``segment.bytes``.
        InvalidRecordError: ``data`` holds no batch.
    """
    spans = _scan(data, config)
    limit = config.max_message_bytes
    for span in spans:
        if span.size > limit:
            raise RecordTooLargeError(
                f"batch of {span.size} bytes exceeds max.message.bytes={limit}"
            )
    out = bytearray(data)
    offset = log_end_offset
    assigned: list[BatchSpan] = []
    for span in spans:
        set_base_offset(out, offset, span.position)
        epoch = span.partition_leader_epoch
        if leader_epoch is not None:
            set_partition_leader_epoch(out, leader_epoch, span.position)
            epoch = leader_epoch
        nxt = offset + span.next_offset - span.base_offset
        assigned.append(
            span._replace(base_offset=offset, next_offset=nxt, partition_leader_epoch=epoch)
        )
        offset = nxt
    return out, assigned


def check_follower_append(
    data: bytes, *, log_end_offset: int, config: LogConfig
) -> list[BatchSpan]:
    """The spans of batches fetched from the leader, which must continue ``log_end_offset``.

    Raises:
        InvalidOffsetError: the batches do not continue the log end offset contiguously.
        CorruptRecordError: a batch is truncated or fails its CRC.
        RecordTooLargeError: the append exceeds ``segment.bytes``.
        InvalidRecordError: ``data`` holds no batch.
    """
    spans = _scan(data, config)
    expected = log_end_offset
    for span in spans:
        if span.base_offset != expected:
            raise InvalidOffsetError(
                f"batch base offset {span.base_offset} does not continue the log at {expected}"
            )
        expected = span.next_offset
    return spans


def assign_epochs(cache: LeaderEpochCache, spans: list[BatchSpan]) -> None:
    """Record in ``cache`` each leader epoch that starts in ``spans`` (KIP-101)."""
    latest = cache.latest_epoch
    for span in spans:
        epoch = span.partition_leader_epoch
        if epoch >= 0 and epoch != latest:
            cache.assign(epoch, span.base_offset)
            latest = cache.latest_epoch


__all__ = [
    "assign_epochs",
    "check_append_size",
    "check_follower_append",
    "checked_single_batch",
    "prepare_leader_append",
]
