"""Idempotent-producer state of one partition (KIP-98): Kafka's ``ProducerStateManager``.

Theory of operation
-------------------
An idempotent producer stamps each batch with its producer id, producer epoch and the
sequence number of its first record (``base_sequence``); sequences count records per
partition and wrap from 2**31 - 1 to 0. For each producer id the partition keeps its epoch and
the metadata of its last `MAX_CACHED_BATCHES` (5) batches: first and last sequence, first and
last offset, max timestamp. The leader checks every produced batch against it (`check`):

- an epoch older than the producer's: INVALID_PRODUCER_EPOCH (Kafka answers this, not
  PRODUCER_FENCED, to idempotent producers since 2.7);
- same first and last sequence as a cached batch of the same epoch: a *duplicate* (a retry
  whose first attempt landed): not appended again, answered with the original offsets;
- otherwise the first sequence must follow the last cached one (``last + 1``, or 0 after
  2**31 - 1), else OUT_OF_ORDER_SEQUENCE_NUMBER; a newer epoch must start at sequence 0;
- a producer id with no state at all may start at any sequence (Kafka since KIP-360: its
  state may have been removed by retention or expiry).

`update` folds in each appended batch, on the leader after its append and on followers as
they replicate, so a new leader already knows every producer (the state survives failover).

Durability. The state is a fold of the log's batch headers, so it is rebuilt from the log
(`load_from_batches`); `snapshot` bytes bound the replay. The shell persists a snapshot named
by `map_end_offset` now and then and, on restart, loads the latest one at or below the log end
offset and replays the batch headers after it (Kafka's ``loadProducerState``). When the log
is truncated, `truncate_to` drops what the removed batches added; it returns False when the
remaining state cannot be exact (a producer's older history was evicted from the 5-batch
window or cleared by an epoch bump), and the shell then rebuilds it with `reload` from a
snapshot at or below the truncation point, as Kafka's ``truncateAndReload`` always does.

Transactions (KIP-98), as Kafka's ``ProducerStateManager`` keeps them: a producer's first
transactional batch opens its transaction (`ProducerStateEntry.current_txn_first_offset`); the
marker the coordinator writes (a control batch, `storage.control`) closes it, and an abort
marker adds the transaction to the aborted list (Kafka's ``.txnindex``, here in memory and in
the snapshot). The first offset of the oldest open transaction bounds the last stable offset
(`first_unstable_offset`); `aborted_transactions` is what a read_committed fetch returns. A
marker also carries the producer's epoch forward (the coordinator bumps it to fence). Any
truncation of a log that held transactions answers False (reload), as Kafka always reloads.

Pure: no I/O, no clock (timestamps are the batches' own).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import final

import google_crc32c

from storage.control import ControlType
from storage.errors import ErrorCode, KafkaStorageError
from storage.records import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader

MAX_CACHED_BATCHES = 5
"""Kafka's ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN`` (the producer's max in-flight)."""
MAX_SEQUENCE = 0x7FFFFFFF


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchMetadata:
    """One appended batch of a producer (Kafka's ``BatchMetadata``)."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerStateEntry:
    """A producer's state: its epoch and its last batches (oldest first, all of this epoch)."""

    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...]
    current_txn_first_offset: int = -1
    """The first offset of the producer's open transaction on this partition, -1 if none."""
    has_earlier_history: bool = False
    """True if the producer appended batches before the first cached one (evicted from the
    window, or of an older epoch): a truncation removing every cached batch cannot restore
    what came before."""
    coordinator_epoch: int = -1
    """The coordinator epoch of the producer's last marker here (Kafka's
    ``coordinatorEpoch``): a marker of an older coordinator is a zombie's."""
    last_marker_offset: int = -1
    """The offset of the producer's last marker here, -1 if none is known."""

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """Kafka's ``ProducerStateEntry.findDuplicateBatch``."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_sequence == first and batch.last_sequence == last:
                return batch
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortedTxn:
    """An aborted transaction on this partition: Kafka's ``AbortedTxn`` (the offset of its
    abort marker is ``last_offset``)."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class SequenceAccepted:
    """Append the batch."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SequenceDuplicate:
    """Do not append: answer with the offsets of the batch already in the log."""

    batch: BatchMetadata


@dataclass(frozen=True, slots=True, kw_only=True)
class SequenceRejected:
    error_code: ErrorCode
    message: str


ProducerCheck = SequenceAccepted | SequenceDuplicate | SequenceRejected
ACCEPTED = SequenceAccepted()


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """Kafka's ``ProducerAppendInfo.inSequence``: ``next`` follows ``last``, wrapping at 2**31-1."""
    return next_sequence == last_sequence + 1 or (
        next_sequence == 0 and last_sequence == MAX_SEQUENCE
    )


_SNAPSHOT_VERSION = 3
_SNAPSHOT_HEAD = struct.Struct(">HIqi")  # version, crc32c of the rest, map end offset, count
_ENTRY_V1 = struct.Struct(">qh?B")  # producer id, epoch, has earlier history, batch count
_ENTRY_V2 = struct.Struct(">qh?Bq")  # ... and (v2) the open transaction's first offset
_ENTRY = struct.Struct(">qh?Bqiq")  # ... and (v3) its last marker's coordinator epoch, offset
_ABORTED = struct.Struct(">qqq")  # (v2, after the entries, counted) producer, first, last
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, timestamp


@final
class ProducerStateManager:
    """Producer id -> `ProducerStateEntry` for one partition. Not thread-safe.

    Invariant: every entry holds 1..5 batches of its epoch, in offset order, except entries
    restored from a snapshot, which hold what the snapshot held.
    """

    def __init__(
        self,
        entries: Iterable[ProducerStateEntry] = (),
        *,
        map_end_offset: int = 0,
        aborted: Iterable[AbortedTxn] = (),
    ) -> None:
        self._entries: dict[int, ProducerStateEntry] = {e.producer_id: e for e in entries}
        self._map_end_offset = map_end_offset
        self._aborted: list[AbortedTxn] = list(aborted)
        self._saw_transactions = bool(self._aborted) or any(
            e.current_txn_first_offset >= 0 for e in self._entries.values()
        )
        self._markers_seen: dict[int, int] = {}
        """Markers folded in per producer, only ever counted up (not state: never reloaded)."""

    # --- queries --------------------------------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        """The offset after the last batch folded in: a snapshot taken now covers the log
        below it (Kafka's ``mapEndOffset``, the snapshot's file name)."""
        return self._map_end_offset

    @property
    def entries(self) -> Mapping[int, ProducerStateEntry]:
        return dict(self._entries)

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._entries.get(producer_id)

    def markers_seen(self, producer_id: int) -> int:
        """How many markers of ``producer_id`` this object folded in: a partition leader's
        KIP-890 verification guard holds while it does not change (a marker ended the
        transaction the coordinator verified)."""
        return self._markers_seen.get(producer_id, 0)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """A transaction of ``producer_id`` *at* ``producer_epoch`` is open on the partition
        (Kafka's ``UnifiedLog.hasOngoingTransaction``): only then may a transactional batch
        of that epoch skip the coordinator's verification (KIP-890). A batch of a newer epoch
        belongs to a later transaction even while an older one is open here: under
        transaction version 2 the client starts its next transaction, with the epoch EndTxn
        bumped, before the coordinator's marker ends the previous one on this partition."""
        entry = self._entries.get(producer_id)
        return (
            entry is not None
            and entry.current_txn_first_offset >= 0
            and entry.producer_epoch == producer_epoch
        )

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (the last stable offset is the
        smaller of it and the high watermark), None if no transaction is open."""
        firsts = [
            e.current_txn_first_offset
            for e in self._entries.values()
            if e.current_txn_first_offset >= 0
        ]
        return min(firsts) if firsts else None

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions with records in ``[start, end)``, oldest first (Kafka's
        ``collectAbortedTxns``: those whose marker is at or after ``start`` and that began
        before ``end``)."""
        return [a for a in self._aborted if a.last_offset >= start and a.first_offset < end]

    def check(self, header: BatchHeader) -> ProducerCheck:
        """Validate a client's batch before the leader appends it (see the module docstring).
        Batches without a producer id, and control batches, are always accepted."""
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID or header.is_control:
            return ACCEPTED
        if header.base_sequence < 0 or header.producer_epoch < 0:
            return SequenceRejected(
                error_code=ErrorCode.INVALID_RECORD,
                message=f"producer {producer_id}: an idempotent batch needs a sequence and epoch",
            )
        entry = self._entries.get(producer_id)
        if entry is None:
            return ACCEPTED  # KIP-360: no state left for this producer; any sequence starts it
        epoch = header.producer_epoch
        if epoch < entry.producer_epoch:
            return SequenceRejected(
                error_code=ErrorCode.INVALID_PRODUCER_EPOCH,
                message=f"producer {producer_id} epoch {epoch} is older than "
                f"{entry.producer_epoch}",
            )
        duplicate = entry.find_duplicate(header)
        if duplicate is not None:
            return SequenceDuplicate(batch=duplicate)
        first = header.base_sequence
        if epoch > entry.producer_epoch:
            if first != 0:  # an epoch bump restarts the sequences at 0
                return SequenceRejected(
                    error_code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    message=f"producer {producer_id}: new epoch {epoch} must start at sequence "
                    f"0, not {first}",
                )
            return ACCEPTED
        if not in_sequence(entry.last_sequence, first):
            return SequenceRejected(
                error_code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                message=f"producer {producer_id}: sequence {first} does not follow "
                f"{entry.last_sequence}",
            )
        return ACCEPTED

    def check_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        *,
        transaction_version: int,
        high_watermark: int,
    ) -> ErrorCode:
        """May the coordinator's end-transaction marker be appended (Kafka's
        ``appendEndTxnMarker`` checks, on the leader)? NONE, or:

        - INVALID_PRODUCER_EPOCH: the producer is past the marker's epoch. Under transaction
          version 2 (KIP-890 part 2) the coordinator bumps the epoch to end a transaction, so a
          marker must be *newer* than the epoch it ends (KAFKA-18575): a marker at the
          producer's current epoch was written already, and a late copy of it would end the
          producer's next transaction, written at that same epoch;
        - TRANSACTION_COORDINATOR_FENCED: a newer coordinator wrote this producer's markers
          here (the marker comes from a zombie);
        - CONCURRENT_TRANSACTIONS (retriable): the copy written already is not committed yet
          (at or above ``high_watermark``), so it may still be truncated away.

        The coordinator counts the first two as done: the transaction is ended on the
        partition.
        """
        entry = self._entries.get(producer_id)
        if entry is None:
            return ErrorCode.NONE
        if producer_epoch < entry.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if transaction_version >= 2 and producer_epoch == entry.producer_epoch:
            if entry.last_marker_offset >= high_watermark:
                return ErrorCode.CONCURRENT_TRANSACTIONS
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return ErrorCode.NONE

    # --- changes ----------------------------------------------------------------------------

    def update(self, header: BatchHeader, base_offset: int) -> None:
        """Fold in a batch appended at ``base_offset`` (leader: after its append; follower and
        replay: ``header.base_offset``). Does not validate: the leader checked it, and a
        follower takes what its leader wrote (Kafka's ``AppendOrigin.REPLICATION``)."""
        last_offset = base_offset + header.last_offset_delta
        self._map_end_offset = max(self._map_end_offset, last_offset + 1)
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID:
            return
        if header.is_control:
            self._end_transaction(header, base_offset)
            return
        if header.base_sequence < 0:
            return
        batch = BatchMetadata(
            first_sequence=header.base_sequence,
            last_sequence=header.last_sequence,
            first_offset=base_offset,
            last_offset=last_offset,
            timestamp_ms=header.max_timestamp_ms,
        )
        entry = self._entries.get(producer_id)
        txn_first = -1 if entry is None else entry.current_txn_first_offset
        if header.is_transactional:
            self._saw_transactions = True
            if txn_first < 0:
                txn_first = base_offset
        if entry is None:
            self._entries[producer_id] = ProducerStateEntry(
                producer_id=producer_id,
                producer_epoch=header.producer_epoch,
                batches=(batch,),
                current_txn_first_offset=txn_first,
            )
        elif header.producer_epoch != entry.producer_epoch:
            # Kafka's maybeUpdateProducerEpoch: a new epoch forgets the old epoch's batches.
            self._entries[producer_id] = ProducerStateEntry(
                producer_id=producer_id,
                producer_epoch=header.producer_epoch,
                batches=(batch,),
                has_earlier_history=True,
                current_txn_first_offset=txn_first,
            )
        else:
            batches = (*entry.batches, batch)
            evicted = len(batches) > MAX_CACHED_BATCHES
            self._entries[producer_id] = replace(
                entry,
                batches=batches[-MAX_CACHED_BATCHES:],
                has_earlier_history=entry.has_earlier_history or evicted,
                current_txn_first_offset=txn_first,
            )

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget the producers whose last batch here is ``expiration_ms`` or more older than
        ``now_ms`` (by its max timestamp, as Kafka's ``lastTimestamp``), unless a transaction
        of theirs is open here (KIP-854's ``producer.id.expiration.ms``); the number forgotten.
        A producer that comes back after that starts a new sequence here, as Kafka's does."""
        expired = [
            pid
            for pid, e in self._entries.items()
            if e.current_txn_first_offset < 0
            and now_ms - (e.batches[-1].timestamp_ms if e.batches else -1) >= expiration_ms
        ]
        for pid in expired:  # NB: `markers_seen` stays: it only ever counts up
            del self._entries[pid]
        return len(expired)

    def _end_transaction(self, header: BatchHeader, offset: int) -> None:
        """A marker at ``offset`` ends the producer's open transaction (Kafka's
        ``appendEndTxnMarker``); its epoch, bumped by a fencing coordinator, becomes the
        producer's. A marker with no open transaction (written again by a new coordinator)
        changes nothing else."""
        self._saw_transactions = True
        producer_id, epoch = header.producer_id, header.producer_epoch
        self._markers_seen[producer_id] = self._markers_seen.get(producer_id, 0) + 1
        entry = self._entries.get(producer_id)
        coordinator_epoch = header.coordinator_epoch
        if entry is None:
            self._entries[producer_id] = ProducerStateEntry(
                producer_id=producer_id,
                producer_epoch=epoch,
                batches=(),
                coordinator_epoch=coordinator_epoch,
                last_marker_offset=offset,
            )
            return
        first = entry.current_txn_first_offset
        if first >= 0 and header.control_type == ControlType.ABORT:
            self._aborted.append(
                AbortedTxn(producer_id=producer_id, first_offset=first, last_offset=offset)
            )
        if coordinator_epoch < 0:  # not read with its record: keep the one known
            coordinator_epoch = entry.coordinator_epoch
        if epoch > entry.producer_epoch:
            self._entries[producer_id] = replace(
                entry,
                producer_epoch=epoch,
                batches=(),
                has_earlier_history=True,
                current_txn_first_offset=-1,
                coordinator_epoch=coordinator_epoch,
                last_marker_offset=offset,
            )
        else:
            self._entries[producer_id] = replace(
                entry,
                current_txn_first_offset=-1,
                coordinator_epoch=coordinator_epoch,
                last_marker_offset=offset,
            )

    def load_from_batches(self, headers: Iterable[BatchHeader]) -> None:
        """Replay batch headers read from the log (in offset order), e.g. after a snapshot."""
        for header in headers:
            self.update(header, header.base_offset)

    def truncate_to(self, offset: int) -> bool:
        """Forget what the batches at or after ``offset`` added (the log was truncated there).

        Returns:
            True if the state is now exactly the fold of the remaining log; False if it may
            not be (then `reload` it). NB: the dedup window may hold fewer than 5 batches even
            when True: evicted batches do not come back.
        """
        exact = not self._saw_transactions  # a removed marker reopens its transaction: reload
        self._map_end_offset = min(self._map_end_offset, offset)
        self._aborted = [a for a in self._aborted if a.last_offset < offset]
        for producer_id, entry in list(self._entries.items()):
            keep = tuple(b for b in entry.batches if b.last_offset < offset)
            if entry.current_txn_first_offset >= offset:
                entry = replace(entry, current_txn_first_offset=-1)
                self._entries[producer_id] = entry
            if len(keep) == len(entry.batches):
                continue
            if keep:
                self._entries[producer_id] = replace(entry, batches=keep)
            else:
                del self._entries[producer_id]
                exact = exact and not entry.has_earlier_history
        return exact

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The log was emptied and restarts at ``offset``: no producer state is left."""
        self._entries.clear()
        self._aborted.clear()
        self._saw_transactions = False
        self._map_end_offset = offset

    def reload(
        self, snapshot: bytes | None, headers: Iterable[BatchHeader], *, start_offset: int = 0
    ) -> None:
        """Replace the state with ``snapshot``'s (or nothing, at ``start_offset``) plus the
        replay of ``headers`` (the log's batches from the snapshot's `map_end_offset`).

        Raises:
            KafkaStorageError: the snapshot is corrupt (delete it and reload without it).
        """
        base = (
            ProducerStateManager(map_end_offset=start_offset)
            if snapshot is None
            else ProducerStateManager.from_snapshot(snapshot)
        )
        self._entries = base._entries
        self._map_end_offset = base._map_end_offset
        self._aborted = base._aborted
        self._saw_transactions = base._saw_transactions
        self.load_from_batches(headers)

    # --- snapshots ----------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The state as bytes, covering the log below `map_end_offset` (CRC-32C protected)."""
        parts: list[bytes] = []
        for producer_id in sorted(self._entries):
            entry = self._entries[producer_id]
            parts.append(
                _ENTRY.pack(
                    producer_id,
                    entry.producer_epoch,
                    entry.has_earlier_history,
                    len(entry.batches),
                    entry.current_txn_first_offset,
                    entry.coordinator_epoch,
                    entry.last_marker_offset,
                )
            )
            for b in entry.batches:
                parts.append(
                    _BATCH.pack(
                        b.first_sequence,
                        b.last_sequence,
                        b.first_offset,
                        b.last_offset,
                        b.timestamp_ms,
                    )
                )
        parts.append(struct.pack(">i", len(self._aborted)))
        parts.extend(
            _ABORTED.pack(a.producer_id, a.first_offset, a.last_offset) for a in self._aborted
        )
        body = struct.pack(">qi", self._map_end_offset, len(self._entries)) + b"".join(parts)
        crc = google_crc32c.value(body)
        return struct.pack(">HI", _SNAPSHOT_VERSION, crc) + body

    @classmethod
    def from_snapshot(cls, data: bytes) -> ProducerStateManager:
        """Load `snapshot` bytes.

        Raises:
            KafkaStorageError: the snapshot is truncated, of an unknown version, or fails its
                CRC.
        """
        try:
            version, crc, map_end_offset, count = _SNAPSHOT_HEAD.unpack_from(data, 0)
            if version not in (1, 2, _SNAPSHOT_VERSION):
                raise KafkaStorageError(f"unknown producer snapshot version {version}")
            if google_crc32c.value(bytes(data[6:])) != crc:
                raise KafkaStorageError("producer snapshot fails its CRC")
            pos = _SNAPSHOT_HEAD.size
            entries: list[ProducerStateEntry] = []
            for _ in range(count):
                txn_first = coordinator_epoch = marker_offset = -1
                if version == 1:
                    producer_id, epoch, earlier, n = _ENTRY_V1.unpack_from(data, pos)
                    pos += _ENTRY_V1.size
                elif version == 2:
                    producer_id, epoch, earlier, n, txn_first = _ENTRY_V2.unpack_from(data, pos)
                    pos += _ENTRY_V2.size
                else:
                    producer_id, epoch, earlier, n, txn_first, coordinator_epoch, marker_offset = (
                        _ENTRY.unpack_from(data, pos)
                    )
                    pos += _ENTRY.size
                batches = []
                for _b in range(n):
                    first_seq, last_seq, first, last, ts = _BATCH.unpack_from(data, pos)
                    pos += _BATCH.size
                    batches.append(
                        BatchMetadata(
                            first_sequence=first_seq,
                            last_sequence=last_seq,
                            first_offset=first,
                            last_offset=last,
                            timestamp_ms=ts,
                        )
                    )
                entries.append(
                    ProducerStateEntry(
                        producer_id=producer_id,
                        producer_epoch=epoch,
                        batches=tuple(batches),
                        has_earlier_history=earlier,
                        current_txn_first_offset=txn_first,
                        coordinator_epoch=coordinator_epoch,
                        last_marker_offset=marker_offset,
                    )
                )
            aborted: list[AbortedTxn] = []
            if version >= 2:
                (n_aborted,) = struct.unpack_from(">i", data, pos)
                pos += 4
                for _a in range(n_aborted):
                    pid, first, last = _ABORTED.unpack_from(data, pos)
                    pos += _ABORTED.size
                    aborted.append(
                        AbortedTxn(producer_id=pid, first_offset=first, last_offset=last)
                    )
        except struct.error as e:
            raise KafkaStorageError(f"truncated producer snapshot: {e}") from e
        if pos != len(data):
            raise KafkaStorageError("trailing bytes after the producer snapshot")
        return cls(entries, map_end_offset=map_end_offset, aborted=aborted)

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager(producers={len(self._entries)}, "
            f"map_end_offset={self._map_end_offset})"
        )


__all__ = [
    "MAX_CACHED_BATCHES",
    "MAX_SEQUENCE",
    "AbortedTxn",
    "BatchMetadata",
    "ProducerCheck",
    "ProducerStateEntry",
    "ProducerStateManager",
    "SequenceAccepted",
    "SequenceDuplicate",
    "SequenceRejected",
    "in_sequence",
]
