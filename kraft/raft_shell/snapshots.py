"""`Snapshots`: when the driver snapshots its state machine, and how (KIP-630)."""

from __future__ import annotations

from kraft.raft import RaftNode
from kraft.raft.messages import SnapshotId
from kraft.raft_shell.state_machine import Applier
from kraft.raft_shell.storage import DriverStorage


class Snapshots:
    """Saves the state machine's snapshot at its last applied offset and tells the node, which
    then trims the log below it; automatically every ``interval_bytes`` applied (0: only on
    demand)."""

    def __init__(self, storage: DriverStorage, applier: Applier, interval_bytes: int) -> None:
        self._storage = storage
        self._applier = applier
        self.interval_bytes = interval_bytes

    def due(self) -> bool:
        return bool(self.interval_bytes) and (
            self._applier.bytes_since_snapshot >= self.interval_bytes
        )

    def take(self, node: RaftNode) -> SnapshotId | None:
        """Snapshot at the last applied offset; None if the log starts there already."""
        end = self._applier.applied_offset + 1
        if end <= node.log_start_offset:
            return None
        sid = node.snapshot_id_at(end)
        self._storage.save_snapshot(sid, self._applier.state_machine.snapshot())
        node.snapshot_taken(sid)
        self._applier.snapshot_taken()
        return sid


__all__ = ["Snapshots"]
