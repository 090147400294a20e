"""`SimDisk`: one node's disk in memory, losing every unsynced write when the node crashes.

It implements `kraft.raft.RaftStorage` (what the core reads) and keeps the `HardState`.
Writes change the *current* image at once and are queued; `sync` replays the queue onto
the *durable* image; `crash` throws the current image away and reopens the durable one.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import final

from kraft.raft.messages import SnapshotId
from kraft.raft.ready import HardState, Ready
from kraft.types import Epoch, Offset
from storage.records import read_header


@dataclass(slots=True)
class _Image:
    """The on-disk state at one moment."""

    hard_state: HardState = field(default_factory=HardState)
    log_start: int = 0
    bases: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    epochs: list[int] = field(default_factory=list)
    batches: list[bytes] = field(default_factory=list)
    snapshots: dict[SnapshotId, bytes] = field(default_factory=dict)
    partial: dict[SnapshotId, bytearray] = field(default_factory=dict)

    def copy(self) -> _Image:
        return _Image(
            hard_state=self.hard_state,
            log_start=self.log_start,
            bases=list(self.bases),
            ends=list(self.ends),
            epochs=list(self.epochs),
            batches=list(self.batches),
            snapshots=dict(self.snapshots),
            partial={k: bytearray(v) for k, v in self.partial.items()},
        )

    @property
    def log_end(self) -> int:
        return self.ends[-1] if self.ends else self.log_start

    def apply(self, op: tuple[object, ...]) -> None:
        kind = op[0]
        if kind == "append":
            batch = op[1]
            assert isinstance(batch, bytes)
            header = read_header(batch)
            assert header.base_offset == self.log_end, "append leaves a gap"
            self.bases.append(header.base_offset)
            self.ends.append(header.next_offset)
            self.epochs.append(header.partition_leader_epoch)
            self.batches.append(batch)
        elif kind == "hard_state":
            assert isinstance(op[1], HardState)
            self.hard_state = op[1]
        elif kind == "truncate":
            offset = op[1]
            assert isinstance(offset, int)
            i = bisect.bisect_left(self.bases, offset)
            del self.bases[i:], self.ends[i:], self.epochs[i:], self.batches[i:]
        elif kind == "delete_before":
            offset = op[1]
            assert isinstance(offset, int)
            i = bisect.bisect_right(self.ends, offset)
            del self.bases[:i], self.ends[:i], self.epochs[:i], self.batches[:i]
            self.log_start = max(self.log_start, offset)
        elif kind == "chunk":
            sid, position, data = op[1], op[2], op[3]
            assert isinstance(sid, SnapshotId) and isinstance(position, int)
            assert isinstance(data, bytes)
            buf = self.partial.setdefault(sid, bytearray())
            del buf[position:]
            buf += data
        elif kind == "install":
            sid = op[1]
            assert isinstance(sid, SnapshotId)
            self.snapshots[sid] = bytes(self.partial.pop(sid, b""))
            self.bases.clear()
            self.ends.clear()
            self.epochs.clear()
            self.batches.clear()
            self.log_start = sid.end_offset
        elif kind == "save_snapshot":
            sid, data = op[1], op[2]
            assert isinstance(sid, SnapshotId) and isinstance(data, bytes)
            self.snapshots[sid] = data
        else:  # pragma: no cover
            raise AssertionError(f"unknown disk op {kind!r}")

    def batch_at(self, base_offset: int) -> bytes | None:
        i = bisect.bisect_left(self.bases, base_offset)
        if i < len(self.bases) and self.bases[i] == base_offset:
            return self.batches[i]
        return None


@final
class SimDisk:
    """A node's disk; `kraft.raft.RaftStorage` over its current image."""

    __slots__ = ("_current", "_durable", "_pending", "syncs", "unsafe_volatile_hard_state")

    def __init__(self, *, unsafe_volatile_hard_state: bool = False) -> None:
        self.unsafe_volatile_hard_state = unsafe_volatile_hard_state
        """A deliberate bug for checker tests: the election state is never synced."""
        self._durable = _Image()
        self._current = _Image()
        self._pending: list[tuple[object, ...]] = []
        self.syncs = 0

    # --- writes -------------------------------------------------------------------------------

    def _write(self, *op: object) -> None:
        self._current.apply(op)
        if op[0] == "hard_state" and self.unsafe_volatile_hard_state:
            return
        self._pending.append(op)

    def write_ready(self, rd: Ready) -> None:
        """Step 1 of the `Ready` contract, without the sync."""
        if rd.hard_state is not None:
            self._write("hard_state", rd.hard_state)
        if rd.truncate_to is not None:
            self._write("truncate", rd.truncate_to)
        for batch in rd.entries:
            self._write("append", batch)
        for chunk in rd.snapshot_chunks:
            self._write("chunk", chunk.snapshot_id, chunk.position, chunk.data)
        if rd.install_snapshot is not None:
            self._write("install", rd.install_snapshot)

    def delete_before(self, offset: int) -> None:
        self._write("delete_before", offset)

    def save_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._write("save_snapshot", snapshot_id, data)

    def sync(self) -> None:
        for op in self._pending:
            self._durable.apply(op)
        self._pending.clear()
        self.syncs += 1

    def crash(self) -> None:
        """Lose every unsynced write."""
        self._pending.clear()
        self._current = self._durable.copy()

    def wipe(self) -> None:
        self._pending.clear()
        self._durable = _Image()
        self._current = _Image()

    # --- what the simulator's checkers read ---------------------------------------------------

    @property
    def durable(self) -> _Image:
        return self._durable

    @property
    def hard_state(self) -> HardState:
        """The election state a restart would see (the durable one)."""
        return self._durable.hard_state

    def snapshot_data(self, snapshot_id: SnapshotId) -> bytes:
        return self._current.snapshots[snapshot_id]

    # --- RaftStorage --------------------------------------------------------------------------

    def log_start_offset(self) -> Offset:
        return Offset(self._current.log_start)

    def log_end_offset(self) -> Offset:
        return Offset(self._current.log_end)

    def read(self, start_offset: Offset, end_offset: Offset, max_bytes: int) -> list[bytes]:
        img = self._current
        i = max(0, bisect.bisect_right(img.bases, start_offset) - 1)
        out: list[bytes] = []
        size = 0
        while i < len(img.bases) and img.bases[i] < end_offset:
            if img.ends[i] > start_offset:
                b = img.batches[i]
                if out and size + len(b) > max_bytes:
                    break
                out.append(b)
                size += len(b)
            i += 1
        return out

    def epoch_start_offsets(self) -> Sequence[tuple[Epoch, Offset]]:
        img = self._current
        out: list[tuple[Epoch, Offset]] = []
        for epoch, base in zip(img.epochs, img.bases, strict=True):
            if not out or epoch != out[-1][0]:
                out.append((Epoch(epoch), Offset(base)))
        return out

    def latest_snapshot_id(self) -> SnapshotId | None:
        return max(self._current.snapshots, default=None)

    def snapshot_size_bytes(self, snapshot_id: SnapshotId) -> int | None:
        data = self._current.snapshots.get(snapshot_id)
        return None if data is None else len(data)

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        return self._current.snapshots[snapshot_id][position : position + max_bytes]


__all__ = ["SimDisk"]
