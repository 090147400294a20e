"""`Snapshots`: when the driver snapshots its state machine, and how (KIP-630)."""

from __future__ import annotations

from kraft.raft import RaftNode
from kraft.raft.messages import SnapshotId
from kraft.raft.voters import frame_snapshot
from kraft.raft_shell.state_machine import Applier
from kraft.raft_shell.storage import DriverStorage


class Snapshots:
    """Saves the state machine's snapshot at its last applied offset and tells the node, which
    then trims the log below it; automatically every ``interval_bytes`` applied (0: only on
    demand), but never after fewer applied bytes than the last snapshot held.

    NB: a snapshot costs time in proportion to the whole state (a 10,000-partition metadata
    image is over 1 MB of JSON, half a second of one core), so with a fixed small interval its
    cost per applied record grows with the state, and each one stalls the loop that also
    answers Raft fetches. Waiting for as many applied bytes as the last snapshot held keeps
    the cost per applied byte constant (amortised O(1)), as a log-structured store compacts.
    """

    def __init__(self, storage: DriverStorage, applier: Applier, interval_bytes: int) -> None:
        self._storage = storage
        self._applier = applier
        self.interval_bytes = interval_bytes
        self.last_snapshot_bytes = 0

    def due(self) -> bool:
        return bool(self.interval_bytes) and (
            self._applier.bytes_since_snapshot >= max(self.interval_bytes, self.last_snapshot_bytes)
        )

    def take(self, node: RaftNode) -> SnapshotId | None:
        """Snapshot at the last applied offset; None if the log starts there already."""
        end = self._applier.applied_offset + 1
        if end <= node.log_start_offset:
            return None
        sid = node.snapshot_id_at(end)
        # KIP-853: a snapshot carries the voter set at its end (none while it is static).
        data = frame_snapshot(node.voters_at(end), self._applier.state_machine.snapshot())
        self.last_snapshot_bytes = len(data)
        self._storage.save_snapshot(sid, data)
        node.snapshot_taken(sid)
        self._applier.snapshot_taken()
        return sid


__all__ = ["Snapshots"]
