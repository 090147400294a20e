"""The Raft core's view of its log: durable batches behind a read-only `RaftStorage`, plus
the batches it has appended but the shell has not yet made durable.

Theory of operation
-------------------
The core never does I/O. Like etcd's ``raftLog`` over its ``Storage`` interface, `RaftLog`
keeps the tail of the log in memory and reads older batches through `RaftStorage`, which
the shell implements (the simulator over memory, a server over ``storage.log``)::

      log_start      mem_start        durable_end      handed_end     log_end
         |  storage ...  |  memory cache ...  |   unpersisted batches     |
                                               \\_ in a Ready _/\\_ not yet _/

- ``log_end`` is where the next batch goes; batches above ``durable_end`` exist only here
  until the shell persists them (`take_unpersisted` hands them out in a `Ready`,
  `mark_persisted` is `RaftNode.advance` saying they are synced).
- A truncation (KIP-595 divergence) is recorded as ``pending_truncate`` and handed to the
  shell with the next batches: the shell must truncate before it appends.
- Storage is only read below ``mem_start``, which never exceeds any truncation point, so
  batches the shell still holds past a pending truncation are never seen.
- The epoch cache maps each epoch to the offset where its first batch starts (Kafka's
  ``LeaderEpochFileCache``): epoch E ends where the next epoch starts, or at ``log_end``.

Offsets count records (Kafka style); the unit moved around is the batch (``bytes`` in
Kafka's v2 format, with the Raft epoch as its partition leader epoch).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Protocol, final

from kraft.raft.messages import SnapshotId
from kraft.raft.voters import (
    SNAPSHOT_FRAME_BYTES_MAX,
    VoterHistory,
    parse_voters_batch,
    split_snapshot,
)
from kraft.types import Epoch, NodeId, Offset
from storage.errors import CorruptRecordError
from storage.records import BatchHeader, read_header


class LogStorage(Protocol):
    """What the core reads of the durable log; the shell implements it (etcd's ``Storage``).

    Reads return what the shell has written, synced or not; the core never reads past a
    truncation it has asked for and not yet seen applied.
    """

    def log_start_offset(self) -> Offset:
        """The first offset in the log (the latest snapshot's end offset, or 0)."""
        ...

    def log_end_offset(self) -> Offset:
        """The offset after the last batch in the log."""
        ...

    def read(self, start_offset: Offset, end_offset: Offset, max_bytes: int) -> list[bytes]:
        """Whole batches from the one containing ``start_offset``, stopping before
        ``end_offset`` and once ``max_bytes`` is reached (but at least one batch)."""
        ...

    def epoch_start_offsets(self) -> Sequence[tuple[Epoch, Offset]]:
        """(epoch, start offset) for each epoch with a batch in the log, ascending."""
        ...


class SnapshotStorage(Protocol):
    """What the core reads of the snapshots (KIP-630); the bytes stay in the shell."""

    def latest_snapshot_id(self) -> SnapshotId | None: ...

    def snapshot_size_bytes(self, snapshot_id: SnapshotId) -> int | None:
        """The size of a complete snapshot, or None if there is no such snapshot."""
        ...

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes: ...


class RaftStorage(LogStorage, SnapshotStorage, Protocol):
    """The one storage object a `RaftNode` is given."""


@final
class RaftLog:
    """The log as the core sees it. Not thread-safe; owned by one `RaftNode`."""

    __slots__ = (
        "_bases",
        "_batches",
        "_cache_bytes_max",
        "_durable_end",
        "_ends",
        "_epochs",
        "_handed_end",
        "_log_end",
        "_log_start",
        "_mem_bytes",
        "_mem_start",
        "_pending_truncate",
        "_snapshot_id",
        "_storage",
        "_truncated_since_handoff",
        "voter_history",
    )

    def __init__(
        self,
        storage: RaftStorage,
        *,
        cache_bytes_max: int = 32 << 20,
        static_voters: frozenset[NodeId] = frozenset(),
        dynamic_voters: bool = False,
    ) -> None:
        self._storage = storage
        self.voter_history: VoterHistory | None = (
            VoterHistory(static_voters) if dynamic_voters else None
        )
        """KIP-853: the voter sets in this log; None when the voters are static config."""
        self._cache_bytes_max = cache_bytes_max
        self._log_start: int = storage.log_start_offset()
        self._snapshot_id: SnapshotId | None = storage.latest_snapshot_id()
        end = storage.log_end_offset()
        assert self._log_start <= end, "storage log start is past its end"
        # Invariant: log_start <= mem_start <= durable_end <= handed_end <= log_end
        self._log_end: int = end
        self._durable_end: int = end
        self._handed_end: int = end
        self._mem_start: int = end
        self._bases: list[int] = []
        self._ends: list[int] = []
        self._batches: list[bytes] = []
        self._mem_bytes = 0
        self._pending_truncate: int | None = None
        self._truncated_since_handoff: int | None = None
        self._epochs: list[tuple[int, int]] = [
            (int(e), int(o)) for e, o in storage.epoch_start_offsets()
        ]
        self._truncate_epochs_from_start(self._log_start)
        self._restore_snapshot_epoch()
        if self.voter_history is not None:
            self._load_voter_history()

    # --- accessors ----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> Offset:
        return Offset(self._log_start)

    @property
    def log_end_offset(self) -> Offset:
        return Offset(self._log_end)

    @property
    def durable_end_offset(self) -> Offset:
        """The end of the prefix the shell has synced: a follower's fetch offset (its ack)."""
        return Offset(self._durable_end)

    @property
    def snapshot_id(self) -> SnapshotId | None:
        return self._snapshot_id

    @property
    def last_epoch(self) -> Epoch:
        """The epoch of the last batch (or of the snapshot if the log is empty), else 0."""
        return Epoch(self._epochs[-1][0]) if self._epochs else Epoch(0)

    @property
    def has_unpersisted(self) -> bool:
        return self._handed_end < self._log_end or self._pending_truncate is not None

    @property
    def has_pending_truncation(self) -> bool:
        return self._pending_truncate is not None

    def epoch_start_offsets(self) -> list[tuple[Epoch, Offset]]:
        return [(Epoch(e), Offset(o)) for e, o in self._epochs]

    def end_offset_for_epoch(self, epoch: int) -> tuple[Epoch, Offset] | None:
        """KIP-101/595: the largest epoch <= ``epoch`` in the log and the offset where it
        ends, or None if every epoch in the log is larger."""
        i = bisect.bisect_right(self._epochs, (epoch, 1 << 62)) - 1
        if i < 0:
            return None
        end = self._epochs[i + 1][1] if i + 1 < len(self._epochs) else self._log_end
        return Epoch(self._epochs[i][0]), Offset(end)

    def epoch_for_offset(self, offset: int) -> Epoch:
        """The epoch of the batch holding ``offset`` (log_start - 1 gives the snapshot's)."""
        if offset < self._log_start and self._snapshot_id is not None:
            return self._snapshot_id.epoch
        i = bisect.bisect_right([o for _, o in self._epochs], offset) - 1
        return Epoch(self._epochs[i][0]) if i >= 0 else Epoch(0)

    # --- appends and truncation ---------------------------------------------------------------

    def append(self, batch: bytes, header: BatchHeader | None = None) -> BatchHeader:
        """Append one batch at the log end (its base offset must equal it)."""
        if header is None:
            header = read_header(batch)
        assert header.base_offset == self._log_end, (
            f"batch base offset {header.base_offset} is not the log end {self._log_end}"
        )
        assert header.record_count > 0
        epoch = header.partition_leader_epoch
        if not self._epochs or epoch > self._epochs[-1][0]:
            self._epochs.append((epoch, header.base_offset))
        else:
            assert epoch == self._epochs[-1][0], (
                f"epoch {epoch} below the last epoch {self._epochs[-1][0]} of the log"
            )
        if not self._batches:
            self._mem_start = header.base_offset
        self._bases.append(header.base_offset)
        self._ends.append(header.next_offset)
        self._batches.append(batch)
        self._mem_bytes += len(batch)
        self._log_end = header.next_offset
        if header.is_control and self.voter_history is not None:
            self._note_voters(header.base_offset, batch)
        return header

    def truncate_to(self, offset: int) -> Offset:
        """Drop every batch at or above ``offset`` (rounded down to a batch boundary).

        Returns:
            The new log end offset.
        """
        assert self._log_start <= offset, "cannot truncate into the snapshot"
        if offset >= self._log_end:
            return Offset(self._log_end)
        if offset >= self._mem_start and self._batches:
            i = bisect.bisect_right(self._bases, offset) - 1
            if i >= 0 and self._bases[i] < offset:
                offset = self._bases[i]  # NB: inside a batch: cut the whole batch
            keep = bisect.bisect_left(self._bases, offset)
            for b in self._batches[keep:]:
                self._mem_bytes -= len(b)
            del self._bases[keep:], self._ends[keep:], self._batches[keep:]
        else:
            self._bases.clear()
            self._ends.clear()
            self._batches.clear()
            self._mem_bytes = 0
        self._mem_start = min(self._mem_start, offset)
        self._log_end = offset
        self._durable_end = min(self._durable_end, offset)
        self._handed_end = min(self._handed_end, offset)
        self._pending_truncate = (
            offset if self._pending_truncate is None else min(self._pending_truncate, offset)
        )
        self._truncated_since_handoff = (
            offset
            if self._truncated_since_handoff is None
            else min(self._truncated_since_handoff, offset)
        )
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()
        self._restore_snapshot_epoch()
        if self.voter_history is not None:
            self.voter_history.truncate(offset)  # KIP-853: back to the set before the cut
        return Offset(offset)

    def take_unpersisted(self) -> tuple[Offset | None, tuple[bytes, ...], Offset]:
        """Hand the batches the shell must persist to a `Ready`.

        Returns:
            (truncate_to, batches, end offset after them).
        """
        truncate = self._pending_truncate
        self._pending_truncate = None
        self._truncated_since_handoff = None
        start = bisect.bisect_left(self._bases, self._handed_end)
        batches = tuple(self._batches[start:])
        self._handed_end = self._log_end
        return (None if truncate is None else Offset(truncate)), batches, Offset(self._log_end)

    def mark_persisted(self, end_offset: int) -> None:
        """The shell synced everything handed out up to ``end_offset`` (`RaftNode.advance`)."""
        if self._truncated_since_handoff is not None:
            # Batches handed out past a later truncation are stale on disk until the shell
            # applies that truncation; they do not count as durable.
            end_offset = min(end_offset, self._truncated_since_handoff)
        if end_offset > self._durable_end:
            assert end_offset <= self._log_end
            self._durable_end = end_offset
        self._maybe_trim_cache()

    # --- reads --------------------------------------------------------------------------------

    def read(self, start_offset: int, max_bytes: int, end_offset: int | None = None) -> list[bytes]:
        """Whole batches from the one holding ``start_offset`` up to ``end_offset`` (default
        the log end), at most ``max_bytes`` but at least one batch if any is in range."""
        end = self._log_end if end_offset is None else min(end_offset, self._log_end)
        assert start_offset >= self._log_start, "read below the log start offset"
        out: list[bytes] = []
        if start_offset >= end:
            return out
        size = 0
        pos = start_offset
        if pos < self._mem_start:
            for b in self._storage.read(Offset(pos), Offset(min(self._mem_start, end)), max_bytes):
                out.append(b)
                size += len(b)
            pos = read_header(out[-1]).next_offset if out else self._mem_start
            if size >= max_bytes or pos >= end or pos < self._mem_start:
                # NB: a short read from storage ends the read here: the batches in memory
                # start at mem_start, and skipping to them would leave a gap.
                return out
        i = max(0, bisect.bisect_right(self._bases, pos) - 1)
        n = len(self._bases)
        while i < n and self._bases[i] < end:
            if self._ends[i] > pos:
                b = self._batches[i]
                if out and size + len(b) > max_bytes:
                    break
                out.append(b)
                size += len(b)
            i += 1
        return out

    # --- snapshots ----------------------------------------------------------------------------

    def advance_log_start(self, snapshot_id: SnapshotId) -> None:
        """KIP-630: a snapshot ending at ``snapshot_id.end_offset`` replaces the log before it."""
        offset = snapshot_id.end_offset
        assert offset <= self._log_end, "snapshot past the log end"
        if self._snapshot_id is None or snapshot_id > self._snapshot_id:
            self._snapshot_id = snapshot_id
        if offset <= self._log_start:
            return
        self._log_start = offset
        if self.voter_history is not None:
            self.voter_history.advance_start(offset)
        keep = bisect.bisect_right(self._bases, offset) - 1
        if keep > 0:
            for b in self._batches[:keep]:
                self._mem_bytes -= len(b)
            del self._bases[:keep], self._ends[:keep], self._batches[:keep]
            self._mem_start = self._bases[0]
        self._truncate_epochs_from_start(offset)

    def install_snapshot(
        self, snapshot_id: SnapshotId, voters: Mapping[NodeId, str] | None = None
    ) -> None:
        """A follower replaces its whole log by a snapshot fetched from the leader (KIP-630)."""
        offset = snapshot_id.end_offset
        self._snapshot_id = snapshot_id
        self._bases.clear()
        self._ends.clear()
        self._batches.clear()
        self._mem_bytes = 0
        self._log_start = self._log_end = self._mem_start = offset
        self._durable_end = self._handed_end = offset
        self._pending_truncate = None
        self._truncated_since_handoff = None
        self._epochs = [(snapshot_id.epoch, offset)]
        if self.voter_history is not None:
            # ``voters``: read from the first chunk; if that was too short to hold the frame,
            # the shell's copy is read once written (`load_snapshot_voters`).
            self.voter_history.reset(voters)

    def load_snapshot_voters(self) -> None:
        """KIP-853: take the voter set at the log start from the latest snapshot's frame."""
        history = self.voter_history
        snapshot = self._snapshot_id
        if history is None or snapshot is None:
            return
        try:
            head = self._storage.read_snapshot(snapshot, 0, SNAPSHOT_FRAME_BYTES_MAX)
            voters, _ = split_snapshot(head)
        except CorruptRecordError:
            voters = None
        if voters is not None and not history.from_log:
            history.reset(voters)

    def _note_voters(self, offset: int, batch: bytes) -> None:
        assert self.voter_history is not None
        try:
            voters = parse_voters_batch(batch)
        except CorruptRecordError:
            voters = None  # NB: a leader wrote it; a bad one is ignored, never a crash
        if voters is not None:
            self.voter_history.append(offset, voters)

    def _load_voter_history(self) -> None:
        # Kafka's KRaftControlRecordStateMachine: the snapshot's set, then every VotersRecord
        # in the log after it.
        if self._snapshot_id is not None and self._snapshot_id.end_offset >= self._log_start:
            self.load_snapshot_voters()
        pos = self._log_start
        while pos < self._log_end:
            batches = self._storage.read(Offset(pos), Offset(self._log_end), 1 << 20)
            if not batches:
                break
            for batch in batches:
                header = read_header(batch)
                if header.is_control and header.next_offset > pos:
                    self._note_voters(header.base_offset, batch)
                pos = max(pos, header.next_offset)

    def _restore_snapshot_epoch(self) -> None:
        # NB: with every batch at the log start gone, the log ends in the snapshot's epoch:
        # keep it, or the last epoch would read as 0 and votes would compare logs wrongly.
        snapshot = self._snapshot_id
        if snapshot is not None and (not self._epochs or self._epochs[0][1] > self._log_start):
            self._epochs.insert(0, (snapshot.epoch, self._log_start))

    def _truncate_epochs_from_start(self, offset: int) -> None:
        # Kafka's LeaderEpochFileCache.truncateFromStart: the last epoch starting below the new
        # log start now starts at it.
        i = bisect.bisect_right([o for _, o in self._epochs], offset) - 1
        if i >= 0:
            epoch = self._epochs[i][0]
            self._epochs[: i + 1] = [(epoch, offset)]

    def _maybe_trim_cache(self) -> None:
        if self._mem_bytes <= self._cache_bytes_max:
            return
        target = self._cache_bytes_max // 2
        k = 0
        freed = 0
        while (
            k < len(self._batches)
            and self._mem_bytes - freed > target
            and self._ends[k] <= self._durable_end
        ):
            freed += len(self._batches[k])
            k += 1
        if k:
            del self._bases[:k], self._ends[:k], self._batches[:k]
            self._mem_bytes -= freed
            self._mem_start = self._bases[0] if self._bases else self._durable_end


__all__ = ["LogStorage", "RaftLog", "RaftStorage", "SnapshotStorage"]
