"""A quorum-mode replica's partition log as the Raft core's storage, and an in-memory
`QuorumStateStore`.

`ReplicaRaftStorage` makes a `ReplicaLog` (the broker's `SegmentedLog`, the simulator's
`SimPartitionLog`) the `kraft.raft.RaftStorage` a `RaftNode` reads: the Raft log *is* the
partition log, whose batches carry the Raft epoch as their partition leader epoch, and whose
leader-epoch cache is the Raft epoch cache.

Snapshots (KIP-630) are how Raft moves a log start. A partition has no state machine to
snapshot: what lies below its log start offset (retention) is simply gone. So the "snapshot"
ending at the log start is *empty*: `latest_snapshot_id` names it, `snapshot_size_bytes` is 0
and `read_snapshot` returns nothing. A follower that fetches below the leader's log start is
told to fetch that snapshot, gets zero bytes, and installs it: the driver truncates its log
fully and restarts it at the leader's log start (Kafka's follower does the same on
OFFSET_OUT_OF_RANGE below the leader's log start).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

from kraft.raft.messages import SnapshotId
from kraft.types import Epoch, Offset
from replication.driver.interface import ReplicaLog
from storage.leader_epoch import EpochEntry, LeaderEpochCache
from storage.records import read_header, split_batches

QUORUM_LOG_CACHE_BYTES = 4 << 20
"""The Raft log's in-memory tail per partition (the metadata quorum keeps 32 MiB; a broker
holds many partitions, and older batches are read back from the segment log)."""


@final
class ReplicaRaftStorage:
    """`kraft.raft.RaftStorage` over a `ReplicaLog` (see the module docstring)."""

    __slots__ = ("_log",)

    def __init__(self, log: ReplicaLog) -> None:
        self._log = log

    def log_start_offset(self) -> Offset:
        return Offset(self._log.log_start_offset)

    def log_end_offset(self) -> Offset:
        return Offset(self._log.log_end_offset)

    def read(self, start_offset: Offset, end_offset: Offset, max_bytes: int) -> list[bytes]:
        # NB: a segmented log's read stops at a segment's end (as Kafka's does); the core
        # wants [start, end) up to max_bytes, so keep reading across segments.
        out: list[bytes] = []
        size = 0
        offset = max(int(start_offset), self._log.log_start_offset)
        while offset < end_offset and (not out or size < max_bytes):
            batches = split_batches(
                self._log.read(offset, max(1, max_bytes - size), max_offset=end_offset)
            )
            if not batches:
                break
            for batch in batches:
                if out and size + len(batch) > max_bytes:
                    return out
                out.append(batch)
                size += len(batch)
            offset = read_header(batches[-1]).next_offset
        return out

    def epoch_start_offsets(self) -> Sequence[tuple[Epoch, Offset]]:
        return [(Epoch(e.epoch), Offset(e.start_offset)) for e in self._epoch_entries()]

    def latest_snapshot_id(self) -> SnapshotId | None:
        """The empty snapshot ending at the log start offset (None at offset 0). Its epoch is
        the epoch cache's first (the epoch at the log start: after a restart the epoch of the
        offset just below it is gone; a follower exactly at the start with the older epoch
        then reloads the empty snapshot, which costs nothing)."""
        start = self._log.log_start_offset
        if start <= 0:
            return None
        entries = self._epoch_entries()
        epoch = entries[0].epoch if entries else 0
        return SnapshotId(Offset(start), Epoch(epoch))

    def _epoch_entries(self) -> list[EpochEntry]:
        cache = self._log.leader_epoch_cache
        return cache.entries if isinstance(cache, LeaderEpochCache) else []

    def snapshot_size_bytes(self, snapshot_id: SnapshotId) -> int | None:
        if snapshot_id.end_offset > self._log.log_end_offset:
            return None
        return 0

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        return b""


class MemoryQuorumStateStore:
    """`QuorumStateStore` in memory (the simulator's disk: it survives a simulated crash
    because the simulator keeps the object; tests)."""

    def __init__(self) -> None:
        self.state: tuple[int, int | None] | None = None
        self.writes = 0

    def read(self) -> tuple[int, int | None] | None:
        return self.state

    def write(self, epoch: int, voted_for: int | None) -> None:
        self.state = (epoch, voted_for)
        self.writes += 1


__all__ = ["QUORUM_LOG_CACHE_BYTES", "MemoryQuorumStateStore", "ReplicaRaftStorage"]
