"""The leader-epoch cache: which leader epoch started at which offset (KIP-101, KIP-279).

Theory of operation
-------------------
Every batch carries the epoch of the leader that appended it. The cache keeps one entry per
epoch, ``epoch -> start offset`` (the first offset written in that epoch), strictly increasing
in both, like Kafka's ``LeaderEpochFileCache``. It answers OffsetForLeaderEpoch
(`end_offset_for`): a follower that asks "where did epoch E end?" truncates its log there
before fetching, instead of to its high watermark (KIP-101), so a failover never leaves two
replicas with different records at the same offset.

The log owns the cache and calls `assign` on append, `truncate_from_end` on truncation and
`truncate_from_start` when the log start offset moves. Each change is persisted to the
``leader-epoch-checkpoint`` file (Kafka's format) before the method returns; an entry may thus
name a start offset that a crash later removed from the log, and the log trims such entries
with `truncate_from_end(log_end_offset)` when it opens.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from storage.checkpoint import read_entries, write_entries

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """``epoch -> start offset``, persisted to ``<dir>/leader-epoch-checkpoint`` after each change.

    Invariant: epochs and start offsets both strictly increase along the entries.
    Not thread-safe: its log calls it from one thread.
    """

    def __init__(
        self,
        path: Path | None,
        log_end_offset: Callable[[], int],
        entries: list[EpochEntry] | None = None,
    ) -> None:
        """Use `load` to read an existing checkpoint. ``path=None`` keeps the cache in memory."""
        self._path = path
        self._log_end_offset = log_end_offset
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        for e in entries or ():
            self._epochs.append(e.epoch)
            self._offsets.append(e.start_offset)
        self._check()

    @classmethod
    def load(cls, path: Path, log_end_offset: Callable[[], int]) -> LeaderEpochCache | None:
        """The cache persisted at ``path``, or None if there is no checkpoint file.

        Raises:
            KafkaStorageError: if the file is malformed.
        """
        rows = read_entries(path, 2)
        if rows is None:
            return None
        cache = cls(path, log_end_offset)
        for epoch, offset in rows:
            cache._assign(epoch, offset)  # tolerate a non-monotonic file as Kafka does
        return cache

    # --- queries ---------------------------------------------------------------------------

    @property
    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, o) for e, o in zip(self._epochs, self._offsets, strict=True)]

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_epoch(self) -> int | None:
        return self._epochs[0] if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset``: that of the last entry starting at or before it."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def start_offset_for(self, epoch: int) -> int | None:
        i = bisect.bisect_left(self._epochs, epoch)
        if i < len(self._epochs) and self._epochs[i] == epoch:
            return self._offsets[i]
        return None

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """Answer OffsetForLeaderEpoch for ``epoch``: ``(epoch found, its end offset)``.

        - ``epoch`` is the latest epoch: ``(epoch, log end offset)``;
        - otherwise the largest cached epoch ``F <= epoch``: ``(F, start offset of the first
          epoch after F)`` -- the follower truncates to that offset (KIP-279);
        - ``epoch`` below the earliest cached epoch: ``(epoch, start offset of the earliest
          epoch)``, as Kafka's ``LeaderEpochFileCache.endOffsetFor`` answers since KIP-279: the
          requester's epoch ended no later than where our history begins;
        - ``epoch`` undefined (-1), above the latest epoch, or an empty cache:
          ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``.
        """
        undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return undefined
        if epoch == self._epochs[-1]:
            return epoch, self._log_end_offset()
        if epoch > self._epochs[-1]:
            return undefined
        if epoch < self._epochs[0]:
            return epoch, self._offsets[0]
        i = bisect.bisect_right(self._epochs, epoch) - 1  # floor entry; i < len - 1 here
        return self._epochs[i], self._offsets[i + 1]

    # --- changes (each one is persisted before returning) ------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns True if the cache changed.

        As Kafka's ``LeaderEpochFileCache.assign``: the same epoch at a later offset is a
        no-op; an epoch older than the latest is ignored (and logged); a newer epoch (or the
        latest one at a lower offset) first removes the trailing entries whose start offset is
        at or after ``start_offset``.

        Raises:
            ValueError: on a negative epoch or offset (programmer error).
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry ({epoch}, {start_offset})")
        changed = self._assign(epoch, start_offset)
        if changed:
            self._persist()
        return changed

    def _agrees(self, epoch: int, offset: int) -> bool:
        """Whether a batch of ``epoch`` at ``offset`` lies where the cache puts that epoch:
        at or after its start, before the next epoch's."""
        index = bisect.bisect_left(self._epochs, epoch)
        if index == len(self._epochs) or self._epochs[index] != epoch:
            return False
        next_start = self._offsets[index + 1] if index + 1 < len(self._offsets) else None
        return self._offsets[index] <= offset and (next_start is None or offset < next_start)

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if self._epochs:
            latest, latest_start = self._epochs[-1], self._offsets[-1]
            if epoch == latest and start_offset >= latest_start:
                return False
            if epoch < latest:
                if self._agrees(epoch, start_offset):
                    return False  # a replay of what the cache records (a log reopened)
                _log.warning(
                    "epoch_assignment_ignored",
                    epoch=epoch,
                    start_offset=start_offset,
                    latest_epoch=latest,
                )
                return False
        removed = 0
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            self._epochs.pop()
            self._offsets.pop()
            removed += 1
        if removed:
            _log.info(
                "epoch_entries_truncated", epoch=epoch, start_offset=start_offset, removed=removed
            )
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        self._check()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries starting at or after ``end_offset`` (the log was truncated there)."""
        i = bisect.bisect_left(self._offsets, end_offset)
        if i < len(self._offsets):
            del self._epochs[i:]
            del self._offsets[i:]
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget offsets below ``start_offset`` (the log start moved up): drop the entries that
        end at or before it and move the start of the one covering it up to ``start_offset``."""
        i = bisect.bisect_right(self._offsets, start_offset) - 1
        if i < 0 or (i == 0 and self._offsets[0] == start_offset):
            return
        del self._epochs[:i]
        del self._offsets[:i]
        self._offsets[0] = start_offset
        self._check()
        self._persist()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._offsets.clear()
            self._persist()

    def flush(self) -> None:
        """Persist the current entries (even if unchanged)."""
        self._persist()

    # --- internals ----------------------------------------------------------------------------

    def _persist(self) -> None:
        if self._path is not None:
            write_entries(self._path, list(zip(self._epochs, self._offsets, strict=True)))

    def _check(self) -> None:
        # Invariant: both columns strictly increase.
        for i in range(1, len(self._epochs)):
            assert self._epochs[i - 1] < self._epochs[i], self._epochs
            assert self._offsets[i - 1] < self._offsets[i], self._offsets

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries!r})"


__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCache",
]
