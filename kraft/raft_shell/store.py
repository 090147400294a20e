"""`DurableRaftStorage`: the Raft core's `RaftStorage` over real files (the shell's disk).

- the log is a `storage.log.SegmentedLog` whose batches carry the Raft epoch as their
  partition leader epoch (one log format for metadata and data), synced on every Ready that
  asks for it (one fdatasync for all of a Ready's batches: group commit);
- the election state (`HardState`: epoch, voted-for, leader) lives in a rocksdict
  `StateStore` and is written with ``sync=True`` before anything that depends on it is sent;
- snapshots (KIP-630) are files ``snapshots/<end_offset>-<epoch>.checkpoint``; a snapshot being
  fetched grows in a ``.part`` file and is renamed into place when installed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from kraft.raft.messages import SnapshotId
from kraft.raft.ready import HardState, Ready
from kraft.types import Epoch, NodeId, Offset
from storage.config import LogConfig
from storage.log import SegmentedLog
from storage.records import read_header, split_batches
from storage.state import StateStore

_HARD_STATE_KEY = b"quorum-state"
_SNAPSHOT_SUFFIX = ".checkpoint"
_KEEP_SNAPSHOTS = 2


def _snapshot_name(sid: SnapshotId) -> str:
    return f"{sid.end_offset:020d}-{sid.epoch:010d}{_SNAPSHOT_SUFFIX}"


def _parse_snapshot_name(name: str) -> SnapshotId | None:
    if not name.endswith(_SNAPSHOT_SUFFIX):
        return None
    stem = name[: -len(_SNAPSHOT_SUFFIX)]
    try:
        end, epoch = stem.split("-")
        return SnapshotId(end_offset=Offset(int(end)), epoch=Epoch(int(epoch)))
    except ValueError:
        return None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DurableRaftStorage:
    """Files for one Raft replica under ``directory``: ``log/``, ``state/``, ``snapshots/``."""

    def __init__(self, directory: str | Path, *, segment_bytes: int = 64 << 20) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        # Raft logs always sync (DESIGN.md): each append call ends with one fdatasync of the
        # segment data; indexes and the recovery-point checkpoint follow at the next flush().
        config = LogConfig(
            segment_bytes=segment_bytes,
            retention_ms=-1,
            retention_bytes=-1,
            sync_every_append=True,
        )
        self.log = SegmentedLog.open(self.directory / "log", config=config)
        self._segment_bytes = segment_bytes
        self.state = StateStore(self.directory / "state")
        self._snapshots_dir = self.directory / "snapshots"
        self._snapshots_dir.mkdir(exist_ok=True)
        for stale in self._snapshots_dir.glob("*.part"):
            stale.unlink()  # a fetch that a crash interrupted starts over
        self._snapshots = sorted(
            sid for p in self._snapshots_dir.iterdir() if (sid := _parse_snapshot_name(p.name))
        )
        self._dirty = False

    # --- election state -----------------------------------------------------------------------

    def load_hard_state(self) -> HardState:
        raw = self.state.space("raft").get(_HARD_STATE_KEY)
        if raw is None:
            return HardState()
        d = json.loads(raw)
        return HardState(
            epoch=Epoch(d["epoch"]),
            voted_for=None if d["voted_for"] is None else NodeId(d["voted_for"]),
            leader_id=None if d["leader_id"] is None else NodeId(d["leader_id"]),
        )

    # --- the Ready contract, step 1 -----------------------------------------------------------

    def persist(self, rd: Ready) -> None:
        """Write what ``rd`` asks, and sync it all if ``rd.must_sync`` (one fsync per file)."""
        if rd.hard_state is not None:
            hs = rd.hard_state
            value = json.dumps(
                {"epoch": hs.epoch, "voted_for": hs.voted_for, "leader_id": hs.leader_id}
            ).encode()
            self.state.space("raft").put(_HARD_STATE_KEY, value, sync=True)
        if rd.truncate_to is not None:
            self.log.truncate_to(rd.truncate_to)
            self._dirty = True
        if rd.entries:
            # One write (and one fdatasync, by the log) per group of batches that fits in a
            # segment: normally the whole Ready.
            group: list[bytes] = []
            size = 0
            for batch in rd.entries:
                if group and size + len(batch) > self._segment_bytes:
                    self.log.append_as_follower(b"".join(group))
                    group, size = [], 0
                group.append(batch)
                size += len(batch)
            self.log.append_as_follower(b"".join(group))
            self._dirty = bool(rd.snapshot_chunks or rd.install_snapshot)
        for chunk in rd.snapshot_chunks:
            part = self._snapshots_dir / (_snapshot_name(chunk.snapshot_id) + ".part")
            with part.open("r+b" if part.exists() else "wb") as f:
                f.truncate(chunk.position)
                f.seek(chunk.position)
                f.write(chunk.data)
                if rd.must_sync:
                    os.fdatasync(f.fileno())
        if rd.install_snapshot is not None:
            sid = rd.install_snapshot
            part = self._snapshots_dir / (_snapshot_name(sid) + ".part")
            os.replace(part, self._snapshots_dir / _snapshot_name(sid))
            _fsync_dir(self._snapshots_dir)
            self._add_snapshot(sid)
            self.log.truncate_fully_and_start_at(sid.end_offset)
            self._dirty = True
        if rd.must_sync and self._dirty:
            self.log.flush()
            self._dirty = False

    def delete_before(self, offset: int) -> None:
        """Step 3: a snapshot now covers everything below ``offset``."""
        self.log.advance_log_start_offset(offset)

    def save_snapshot(self, sid: SnapshotId, data: bytes) -> None:
        """Write a snapshot the application took, durably (tmp, fsync, rename, fsync dir)."""
        self.write_snapshot_file(sid, data)
        self.add_snapshot(sid)

    def write_snapshot_file(self, sid: SnapshotId, data: bytes) -> None:
        """`save_snapshot`'s writes alone (tmp, fsync, rename, fsync dir): they touch no
        state of this object, so a worker thread may run them; `add_snapshot` then makes the
        snapshot known, on the owner's thread. A file written for a snapshot that is never
        added is a complete snapshot all the same (the next start finds it)."""
        final = self._snapshots_dir / _snapshot_name(sid)
        tmp = final.with_suffix(".tmp")
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        _fsync_dir(self._snapshots_dir)

    def add_snapshot(self, sid: SnapshotId) -> None:
        """A snapshot whose file `write_snapshot_file` wrote is the latest (the oldest beyond
        the few kept are deleted)."""
        self._add_snapshot(sid)

    def _add_snapshot(self, sid: SnapshotId) -> None:
        if sid not in self._snapshots:
            self._snapshots.append(sid)
            self._snapshots.sort()
        while len(self._snapshots) > _KEEP_SNAPSHOTS:
            old = self._snapshots.pop(0)
            (self._snapshots_dir / _snapshot_name(old)).unlink(missing_ok=True)

    def snapshot_data(self, sid: SnapshotId) -> bytes:
        return (self._snapshots_dir / _snapshot_name(sid)).read_bytes()

    def close(self) -> None:
        self.log.close()
        self.state.close()

    # --- RaftStorage --------------------------------------------------------------------------

    def log_start_offset(self) -> Offset:
        return Offset(self.log.log_start_offset)

    def log_end_offset(self) -> Offset:
        return Offset(self.log.log_end_offset)

    def read(self, start_offset: Offset, end_offset: Offset, max_bytes: int) -> list[bytes]:
        # NB: SegmentedLog.read stops at the end of a segment (as Kafka's does); the Raft
        # core wants [start, end) up to max_bytes, so keep reading across segments.
        out: list[bytes] = []
        size = 0
        offset = int(start_offset)
        while offset < end_offset and (not out or size < max_bytes):
            batches = split_batches(
                self.log.read(offset, max(1, max_bytes - size), max_offset=end_offset)
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
        return [
            (Epoch(e.epoch), Offset(e.start_offset)) for e in self.log.leader_epoch_cache.entries
        ]

    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._snapshots[-1] if self._snapshots else None

    def snapshot_size_bytes(self, snapshot_id: SnapshotId) -> int | None:
        if snapshot_id not in self._snapshots:
            return None
        return (self._snapshots_dir / _snapshot_name(snapshot_id)).stat().st_size

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        with (self._snapshots_dir / _snapshot_name(snapshot_id)).open("rb") as f:
            f.seek(position)
            return f.read(max_bytes)
