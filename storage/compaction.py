"""Log compaction's decisions: which segments the cleaner may clean, and which records it keeps.

Theory of operation (Kafka's ``LogCleanerManager`` and ``LogCleaner``, KIP-58, KIP-354)
--------------------------------------------------------------------------------------
A log with ``cleanup.policy`` including ``compact`` keeps, for each key, its latest record.
This module decides; `storage.log_cleaner` reads and rewrites the files.

*What is cleanable* (`plan_compaction`). The cleanable range is a prefix of whole segments:

- never the active (last) segment;
- never a segment holding an offset at or above the high watermark the caller passes in (a
  replica cleans only committed data: a truncation after a leader change must find the
  uncommitted tail as it was written);
- never a segment whose newest record is younger than ``min.compaction.lag.ms`` (KIP-58);
  the range stops at the first segment that fails any rule.

Its end is the *first uncleanable offset*. The *first dirty offset* is where the last pass
ended (the ``cleaner-offset-checkpoint``; the log start offset when there is none). A pass
runs only when the dirty part is at least ``min.cleanable.dirty.ratio`` of the range's bytes.

*What is kept* (`OffsetMap`, `keeps`), Kafka's two-pass clean. The cleaner maps each key of
the *dirty* part (from the first dirty offset on) to its latest offset there, then rewrites the
range from the log start to where the map ends and keeps a record unless the map holds a newer
offset of its key. The part before the first dirty offset was cleaned by earlier passes, so it
holds one record per key already; a key there that the dirty part updates goes with that
update. A latest record that is a tombstone (null value) is kept until its batch's *delete
horizon* (below), so a consumer that reads the log from its start within
``delete.retention.ms`` of the pass that first found the tombstone sees the delete. Records
without a key are kept (the leader refuses them on a compacted topic, as Kafka does).
Records past the map's end are never touched, so a key whose newest record lies there
keeps its older records in the range too, until a later pass.

*The delete horizon* (KIP-534, Kafka 3.1+). A tombstone's age is not its own timestamp (a
producer's clock, possibly long ago) but the time the cleaner first saw it. The first pass that
keeps a tombstone in a batch without a horizon rewrites that batch with attributes bit 6 set
and its base timestamp set to the pass's time plus ``delete.retention.ms``; the records'
timestamp deltas are rewritten relative to it, so every record keeps its timestamp (readers add
the delta to the base, as Kafka's do: `storage.records`). A later pass removes the batch's
tombstones once its time is at or past the horizon (Kafka keeps them while ``now < horizon``).
A batch keeps its horizon when rewritten again; a batch whose horizon is set and that loses no
record is not rewritten; a batch without tombstones gets no horizon. An emptied batch has none
(Kafka's empty header: no flag, base timestamp -1).

*The bound* (``log.cleaner.dedupe.buffer.size``, Kafka's ``SkimpyOffsetMap``). The map holds
an MD5 digest of each key (16 bytes, as Kafka's) and its offset, and at most as many entries
as the buffer pays for at `OFFSET_MAP_ENTRY_BYTES` each. `map_keys` stops before the first
batch that does not fit, and that batch's base offset ends the pass: a pass that does not fit
cleans a prefix of the dirty part, checkpoints its end, and the next pass continues from there
(it always takes at least one batch, so every pass moves on, unless an unresolved transaction
ends it first: "Transactions"). A digest collision makes the
cleaner drop an older record of another key with the same digest (Kafka accepts the same
risk with the same hash).

NB (deviations from Kafka): batches whose records are all removed are not
dropped: each run of them (in one leader epoch) becomes one empty 61-byte batch covering their
offsets, and a producer's last batch keeps its own header, so batch offsets stay contiguous
(followers, readers and recovery need no change). Kafka drops such batches (keeping only a
producer's last), which leaves holes between batches. Transaction markers (control batches) are
never mapped nor removed, and get no horizon (Kafka sets one on a marker whose transaction has
no batch left in the log and removes the marker after it).

*Transactions* (KIP-98; Kafka's ``CleanedTransactionMetadata``). The records of an aborted
transaction are not mapped (a committed value of their key stays the latest) and are removed
(no read_committed reader ever sees them). `scan_transactions` learns which batches were aborted
from the markers in the range the pass reads (a transaction's batches precede its marker; Kafka
reads its aborted-transaction index instead). The broker plans passes below the last stable
offset, as Kafka does, and a pass also ends at the first transactional batch whose marker lies
past the range (`OffsetMap.first_unresolved`: a marker above the high watermark), so every
batch a pass maps or removes belongs to a transaction whose outcome it knows.

Nothing here reads a clock or a file: ``now_ms`` and the segments come in.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import google_crc32c

from storage.compression import Compression, compress
from storage.config import LONG_MAX, LogConfig
from storage.control import ControlType
from storage.records import (
    BATCH_HEADER_SIZE,
    CRC_START,
    DELETE_HORIZON_BIT,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    RecordTuple,
    encode_record,
    iter_batches,
    record_tuples,
)
from storage.retention import SegmentInfo

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
"""One offset per log directory: the first dirty offset, where the last cleaning ended."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPlan:
    """Clean the first ``segment_count`` segments, ``[log start offset, end_offset)``."""

    segment_count: int
    first_dirty_offset: int
    end_offset: int
    """The first uncleanable offset: the next pass's first dirty offset."""
    dirty_ratio: float


def cleanable_segment_count(
    segments: Sequence[SegmentInfo], config: LogConfig, *, high_watermark: int, now_ms: int
) -> int:
    """How many leading segments the cleaner may clean (see "What is cleanable")."""
    lag_horizon_ms = now_ms - config.min_compaction_lag_ms
    n = 0
    while n < len(segments) - 1:  # never the active segment
        seg = segments[n]
        if seg.next_offset > high_watermark:
            break
        if config.min_compaction_lag_ms > 0 and seg.max_timestamp_ms > lag_horizon_ms:
            break
        n += 1
    return n


def plan_compaction(
    segments: Sequence[SegmentInfo],
    config: LogConfig,
    *,
    first_dirty_offset: int | None,
    log_start_offset: int,
    high_watermark: int,
    now_ms: int,
) -> CompactionPlan | None:
    """What the cleaner cleans now, or None (not a compacted log, nothing cleanable, or the
    dirty ratio below ``min.cleanable.dirty.ratio``).

    Args:
        segments: the log's segments in offset order, the active one last.
        first_dirty_offset: the checkpointed end of the last pass (None: never cleaned).
        high_watermark: nothing at or above it is cleaned.
    """
    if not config.compact or not segments:
        return None
    n = cleanable_segment_count(segments, config, high_watermark=high_watermark, now_ms=now_ms)
    if n == 0:
        return None
    end = segments[n - 1].next_offset
    first_dirty = max(first_dirty_offset or 0, log_start_offset)
    if first_dirty >= end:
        return None  # everything cleanable was cleaned
    clean_bytes = sum(s.size_bytes for s in segments[:n] if s.next_offset <= first_dirty)
    dirty_bytes = sum(s.size_bytes for s in segments[:n] if s.next_offset > first_dirty)
    total = clean_bytes + dirty_bytes
    ratio = dirty_bytes / total if total else 0.0
    if dirty_bytes == 0 or ratio < config.min_cleanable_dirty_ratio:
        return None
    return CompactionPlan(
        segment_count=n, first_dirty_offset=first_dirty, end_offset=end, dirty_ratio=ratio
    )


OFFSET_MAP_ENTRY_BYTES = 128
"""What one `OffsetMap` entry costs in memory here (a 16-byte digest and an offset in a
Python dict: ~128 bytes measured with tracemalloc; Kafka's packed map pays 24)."""


class OffsetMap:
    """Each key's latest offset in the part of the log a pass maps (Kafka's
    ``SkimpyOffsetMap``: keyed by an MD5 digest of the key), each producer id's last batch in
    the range the pass cleans (whose header an emptied batch keeps), and where that range
    ends.

    Args:
        capacity: the most keys it holds (None: unbounded); see `map_keys`.
    """

    __slots__ = (
        "_latest",
        "_open_txn",
        "aborted_batches",
        "capacity",
        "end_offset",
        "last_batch_of_producer",
    )

    def __init__(self, capacity: int | None = None) -> None:
        self._latest: dict[bytes, int] = {}
        self.capacity = capacity
        self.end_offset = LONG_MAX
        """Records at or past it are outside this pass: `keeps` keeps them."""
        self.last_batch_of_producer: dict[int, int] = {}
        """producer id -> base offset of its last batch in the cleaned range."""
        self.aborted_batches: set[int] = set()
        """Base offsets of the batches of aborted transactions (`scan_transactions`)."""
        self._open_txn: dict[int, list[int]] = {}
        """producer id -> base offsets of its transactional batches after its last marker."""

    def first_unresolved(self, start_offset: int) -> int | None:
        """The first transactional batch at or after ``start_offset`` whose marker
        `scan_transactions` has not seen yet (None: none): a pass must end there."""
        firsts = [o for batches in self._open_txn.values() for o in batches if o >= start_offset]
        return min(firsts) if firsts else None

    @classmethod
    def for_buffer(cls, buffer_bytes: int | None) -> OffsetMap:
        """A map that fits ``log.cleaner.dedupe.buffer.size`` (None: unbounded)."""
        if buffer_bytes is None:
            return cls()
        return cls(max(1, buffer_bytes // OFFSET_MAP_ENTRY_BYTES))

    def put(self, key: bytes, offset: int) -> None:
        """Record ``key`` at ``offset``; offsets come in increasing order."""
        self._latest[_digest(key)] = offset

    def get(self, key: bytes) -> int | None:
        return self._latest.get(_digest(key))

    def has_room(self, keys: int) -> bool:
        """Whether ``keys`` more (new) keys surely fit."""
        return self.capacity is None or len(self._latest) + keys <= self.capacity

    def __len__(self) -> int:
        return len(self._latest)


def _digest(key: bytes) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()


def keeps(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    offsets: OffsetMap,
    *,
    delete_horizon_ms: int | None,
    now_ms: int,
) -> bool:
    """Whether the cleaner keeps this record of the cleaned range (see "What is kept" and
    "The delete horizon": ``delete_horizon_ms`` is its batch's, None when not set yet)."""
    if key is None or offset >= offsets.end_offset:
        return True  # no key, or beyond the range this pass cleans
    latest = offsets.get(key)
    if latest is not None and offset < latest:
        return False  # a newer record of the key follows
    if value is None:  # the latest record of its key (mapped, or in the clean part)
        return delete_horizon_ms is None or now_ms < delete_horizon_ms
    return True


# --- rewriting batches (pure: bytes in, bytes out) ----------------------------------------------

_HEADER = struct.Struct(">qiibIhiqqqhii")  # the v2 batch header as a tuple
_CODEC_MASK = 0x07
_NO_TIMESTAMP = -1


def scan_transactions(data: bytes, offsets: OffsetMap) -> None:
    """Learn from ``data`` (whole batches, in offset order across calls, from the start of the
    range a pass reads) which transactional batches were aborted: a producer's transactional
    batches belong to the transaction its next marker ends; an ABORT marker puts their base
    offsets in ``offsets.aborted_batches``. Batches whose marker is not seen yet stay open
    (`OffsetMap.first_unresolved`). Reads headers only.

    Raises:
        CorruptRecordError: a batch header does not parse.
    """
    for _, header in iter_batches(data):
        pid = header.producer_id
        if pid == NO_PRODUCER_ID or not header.is_transactional:
            continue
        if not header.is_control:
            offsets._open_txn.setdefault(pid, []).append(header.base_offset)
            continue
        ended = offsets._open_txn.pop(pid, [])
        if header.control_type == ControlType.ABORT:
            offsets.aborted_batches.update(ended)


def map_keys(
    data: bytes, offsets: OffsetMap, *, end_offset: int, start_offset: int = 0
) -> int | None:
    """Map the keyed records of ``data`` (whole batches) in ``[start_offset, end_offset)``
    into ``offsets``, and note each producer's last batch below ``end_offset``.

    Returns:
        None if every batch fitted; else the base offset of the first batch that did not (the
        map is full: the pass ends there). A batch always fits into an empty map.

    Raises:
        CorruptRecordError: a batch does not decode.
    """
    for pos, header in iter_batches(data):
        if header.base_offset >= end_offset:
            return None
        mapped = header.next_offset > start_offset
        if mapped and len(offsets) and not offsets.has_room(header.record_count):
            return header.base_offset
        if header.producer_id != NO_PRODUCER_ID:
            offsets.last_batch_of_producer[header.producer_id] = header.base_offset
        if not mapped or header.is_control or header.base_offset in offsets.aborted_batches:
            continue  # the clean part (its keys are unique already), a marker, or aborted
        for offset, _ts, key, _value, _headers in record_tuples(data, pos):
            if key is not None and start_offset <= offset < end_offset:
                offsets.put(key, offset)
    return None


def clean_batches(
    data: bytes, offsets: OffsetMap, config: LogConfig, *, now_ms: int
) -> tuple[bytes, int] | None:
    """``data`` (one segment's whole batches) with the records `keeps` drops removed and the
    delete horizon set where a kept tombstone needs one, and how many records were removed;
    None if no batch changed. A rewritten batch keeps its base offset, last offset delta,
    leader epoch, timestamps' base (unless it gets a horizon now: see "The delete horizon"),
    producer id, epoch and base sequence, and codec; its record count, length, max timestamp
    and CRC are recomputed. A batch left without records stays as
    an empty batch (61 bytes, uncompressed) covering the same offsets; a run of such batches
    of one leader epoch becomes one empty batch without a producer id, except a producer's
    last batch in the range, which keeps its own header (its producer id, epoch and sequence,
    for the producer state a replica rebuilds from the log; Kafka keeps it for that reason).

    Raises:
        CorruptRecordError: a batch does not decode.
    """
    out: list[bytes] = []
    removed = 0
    changed = False
    pending_empty: list[tuple[int, ...]] = []  # headers of a run of emptied batches to merge

    def flush_empties() -> None:
        if pending_empty:
            max_ts = max(h[8] for h in pending_empty)
            out.append(_empty_batch(pending_empty[0], pending_empty[-1], max_ts))
            pending_empty.clear()

    view = memoryview(data)
    for pos, header in iter_batches(data):
        if header.is_control:  # a transaction's marker is kept (the producer state needs it)
            flush_empties()
            out.append(bytes(view[pos : pos + header.size_bytes]))
            continue
        records = record_tuples(data, pos)
        horizon = header.delete_horizon_ms
        if (
            header.base_offset in offsets.aborted_batches
            and header.base_offset < offsets.end_offset
        ):
            kept = []  # an aborted transaction's records: never visible to read_committed
        else:
            kept = [
                r
                for r in records
                if keeps(r[0], r[2], r[3], offsets, delete_horizon_ms=horizon, now_ms=now_ms)
            ]
        h = _HEADER.unpack_from(data, pos)
        if horizon is None and any(r[3] is None for r in kept):  # a tombstone's first pass
            horizon = now_ms + config.delete_retention_ms
            changed = True
        elif len(kept) == len(records) and records:
            flush_empties()
            out.append(bytes(view[pos : pos + header.size_bytes]))
            continue
        removed += len(records) - len(kept)
        changed = changed or len(kept) < len(records)
        if kept:
            flush_empties()
            out.append(_rebuilt_batch(h, kept, horizon))
            continue
        if h[9] != NO_PRODUCER_ID and offsets.last_batch_of_producer.get(h[9]) == h[0]:
            flush_empties()
            out.append(_empty_batch(h, h, h[8], keep_producer=True))
            continue
        if pending_empty and pending_empty[-1][2] != h[2]:  # another leader epoch
            flush_empties()
        pending_empty.append(h)
    flush_empties()
    if not changed:
        return None
    return b"".join(out), removed


def _rebuilt_batch(h: tuple[int, ...], kept: Sequence[RecordTuple], horizon: int | None) -> bytes:
    """A batch of ``kept`` with ``h``'s header fields; with ``horizon`` (the batch's delete
    horizon, new or kept) in the base timestamp and attributes bit 6."""
    base_offset, _, epoch, magic, _, attributes, delta, base_ts, _, pid, pepoch, seq, _ = h
    if horizon is not None:
        base_ts = horizon
        attributes |= DELETE_HORIZON_BIT
    body = b"".join(
        encode_record(offset - base_offset, ts - base_ts, key, value, headers)
        for offset, ts, key, value, headers in kept
    )
    codec = Compression(attributes & _CODEC_MASK)
    max_ts = max(r[1] for r in kept)
    return _batch(
        (base_offset, epoch, magic, attributes, delta, base_ts, max_ts, pid, pepoch, seq),
        len(kept),
        compress(codec, body),
    )


def _empty_batch(
    first: tuple[int, ...], last: tuple[int, ...], max_ts: int, *, keep_producer: bool = False
) -> bytes:
    """One empty batch covering ``first``'s base offset to ``last``'s last offset; with the
    producer fields of ``first`` if ``keep_producer``, else none (-1). Like Kafka's empty
    header, it has no delete horizon (bit 6 clear) and base timestamp -1 (no record)."""
    base_offset = first[0]
    last_offset = last[0] + last[6]
    producer = (first[9], first[10], first[11]) if keep_producer else (NO_PRODUCER_ID, -1, -1)
    return _batch(
        (
            base_offset,
            first[2],
            first[3],
            first[5] & ~(_CODEC_MASK | DELETE_HORIZON_BIT),
            last_offset - base_offset,
            _NO_TIMESTAMP,
            max_ts,
            *producer,
        ),
        0,
        b"",
    )


def _batch(fields: tuple[int, ...], count: int, body: bytes) -> bytes:
    base_offset, epoch, magic, attributes, delta, base_ts, max_ts, pid, pepoch, seq = fields
    out = bytearray(
        _HEADER.pack(
            base_offset,
            BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body),
            epoch,
            magic,
            0,
            attributes,
            delta,
            base_ts,
            max_ts,
            pid,
            pepoch,
            seq,
            count,
        )
    )
    out += body
    struct.pack_into(">I", out, CRC_START - 4, google_crc32c.value(bytes(out[CRC_START:])))
    return bytes(out)


__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "OFFSET_MAP_ENTRY_BYTES",
    "CompactionPlan",
    "OffsetMap",
    "clean_batches",
    "cleanable_segment_count",
    "keeps",
    "map_keys",
    "plan_compaction",
    "scan_transactions",
]
