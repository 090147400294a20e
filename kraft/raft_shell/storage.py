"""`DriverStorage`: what a Raft driver needs of its disk (`DurableRaftStorage` is one)."""

from __future__ import annotations

from typing import Protocol

from kraft.raft.log import RaftStorage
from kraft.raft.messages import SnapshotId
from kraft.raft.ready import HardState, Ready


class DriverStorage(RaftStorage, Protocol):
    """The core's read-only `RaftStorage`, plus the writes of the Ready contract."""

    def load_hard_state(self) -> HardState: ...

    def persist(self, rd: Ready) -> None:
        """Step 1 of the Ready contract: hard state, truncation, entries, snapshot chunks and
        install; synced before returning if ``rd.must_sync``."""

    def delete_before(self, offset: int) -> None: ...

    def save_snapshot(self, sid: SnapshotId, data: bytes) -> None: ...

    def write_snapshot_file(self, sid: SnapshotId, data: bytes) -> None:
        """`save_snapshot`'s file alone, durably; safe on a worker thread."""

    def add_snapshot(self, sid: SnapshotId) -> None:
        """A snapshot `write_snapshot_file` wrote is saved (the rest of `save_snapshot`)."""

    def snapshot_data(self, sid: SnapshotId) -> bytes: ...

    def close(self) -> None: ...


__all__ = ["DriverStorage"]
