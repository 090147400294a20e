"""`Snapshots`: when the driver snapshots its state machine, and how (KIP-630)."""

from __future__ import annotations

from collections.abc import Callable

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
        captured = self.capture(node)
        if captured is None:
            return None
        sid, serialize = captured
        return self.finish(node, sid, serialize())

    def capture(self, node: RaftNode) -> tuple[SnapshotId, Callable[[], bytes]] | None:
        """The id of a snapshot at the last applied offset and a function that returns its
        bytes; None if the log starts there already.

        A state machine with ``snapshot_writer()`` hands out a function of its state as of
        now that reads only immutable data, so the driver runs it in a worker thread: at
        10,000 partitions the metadata image takes ~1 s of one core to serialise under load,
        which on the event loop cost the quorum its leader. Else the bytes are taken here.
        KIP-853: the bytes begin with the voter set at ``end`` when it lives in the log
        (`frame_snapshot`; static voters: the state machine's bytes alone).
        """
        end = self._applier.applied_offset + 1
        if end <= node.log_start_offset:
            return None
        sid = node.snapshot_id_at(end)
        voters = node.voters_at(end)
        writer = getattr(self._applier.state_machine, "snapshot_writer", None)
        if writer is None:
            data = frame_snapshot(voters, self._applier.state_machine.snapshot())
            return sid, lambda: data
        serialize: Callable[[], bytes] = writer()
        if voters is None:
            return sid, serialize
        return sid, lambda: frame_snapshot(voters, serialize())

    def write(self, sid: SnapshotId, serialize: Callable[[], bytes]) -> bytes:
        """A captured snapshot's bytes, written durably to its own file; touches nothing the
        loop reads, so a worker thread runs it: on a loaded machine the file's fsyncs held the
        controller's loop (and its Raft fetches) for hundreds of milliseconds. `finish` with
        ``written=True`` then saves it."""
        data = serialize()
        self._storage.write_snapshot_file(sid, data)
        return data

    def finish(
        self, node: RaftNode, sid: SnapshotId, data: bytes, *, written: bool = False
    ) -> SnapshotId | None:
        """Save a captured snapshot (``written``: its file is already durable, `write`) and
        let the node trim its log below it; None (nothing saved) if the log start moved past
        it meanwhile (a snapshot installed from the leader; a file already written stays, a
        complete older snapshot)."""
        if sid.end_offset <= node.log_start_offset:
            return None
        self.last_snapshot_bytes = len(data)
        if written:
            self._storage.add_snapshot(sid)
        else:
            self._storage.save_snapshot(sid, data)
        node.snapshot_taken(sid)
        self._applier.snapshot_taken()
        return sid


__all__ = ["Snapshots"]
