"""Automatic snapshots are paced by the state's size: a large metadata image is not
re-serialised after every small interval of applied bytes (each snapshot stalls the loop)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kraft.raft.messages import SnapshotId
from kraft.raft_shell.snapshots import Snapshots
from kraft.raft_shell.store import DurableRaftStorage


@dataclass
class _StateMachine:
    size: int

    def snapshot(self) -> bytes:
        return b"x" * self.size


@dataclass
class _Applier:
    state_machine: _StateMachine
    bytes_since_snapshot: int = 0
    applied_offset: int = 99

    def snapshot_taken(self) -> None:
        self.bytes_since_snapshot = 0


@dataclass
class _Storage:
    saved: list[Any] = field(default_factory=list)

    def save_snapshot(self, sid: Any, data: bytes) -> None:
        self.saved.append((sid, len(data)))


class _Node:
    log_start_offset = 0

    def snapshot_id_at(self, end: int) -> SnapshotId:
        return SnapshotId(end_offset=end, epoch=1)

    def snapshot_taken(self, sid: SnapshotId) -> None:
        self.log_start_offset = sid.end_offset

    def voters_at(self, end: int) -> None:
        return None  # static voters: the snapshot carries no voters frame


def test_the_next_snapshot_waits_for_as_many_applied_bytes_as_the_last_one_held() -> None:
    applier = _Applier(_StateMachine(size=10_000))
    snapshots = Snapshots(cast(Any, _Storage()), cast(Any, applier), interval_bytes=1_000)
    applier.bytes_since_snapshot = 1_000
    assert snapshots.due()  # the first: the interval alone
    snapshots.take(cast(Any, _Node()))
    applier.bytes_since_snapshot = 5_000
    assert not snapshots.due(), "a 10 kB state is not re-serialised after 5 kB of log"
    applier.bytes_since_snapshot = 10_000
    assert snapshots.due()


def test_a_small_state_keeps_the_configured_interval() -> None:
    applier = _Applier(_StateMachine(size=100))
    snapshots = Snapshots(cast(Any, _Storage()), cast(Any, applier), interval_bytes=1_000)
    applier.bytes_since_snapshot = 1_000
    snapshots.take(cast(Any, _Node()))
    applier.bytes_since_snapshot = 1_000
    assert snapshots.due()


@dataclass
class _ImmutableStateMachine:
    state: bytes
    serialised: int = 0

    def snapshot(self) -> bytes:
        raise AssertionError("the driver serialises through snapshot_writer")

    def snapshot_writer(self) -> Any:
        state = self.state

        def write() -> bytes:
            self.serialised += 1
            return state

        return write


def test_a_capture_defers_the_serialisation_to_the_caller_and_keeps_the_state_as_of_then() -> None:
    """The driver runs it in a worker thread: at 10,000 partitions the metadata image took ~1 s
    to serialise under load, on the event loop that answers Raft fetches."""
    machine = _ImmutableStateMachine(state=b"v1")
    applier = _Applier(cast(Any, machine))
    storage = _Storage()
    snapshots = Snapshots(cast(Any, storage), cast(Any, applier), interval_bytes=1)
    node = _Node()
    captured = snapshots.capture(cast(Any, node))
    assert captured is not None and machine.serialised == 0
    sid, serialize = captured
    machine.state = b"v2-applied-later"
    assert snapshots.finish(cast(Any, node), sid, serialize()) == sid
    assert storage.saved == [(sid, 2)] and node.log_start_offset == 100


def test_a_captured_snapshot_the_log_start_passed_meanwhile_is_dropped() -> None:
    applier = _Applier(_StateMachine(size=10))
    storage = _Storage()
    snapshots = Snapshots(cast(Any, storage), cast(Any, applier), interval_bytes=1)
    node = _Node()
    captured = snapshots.capture(cast(Any, node))
    assert captured is not None
    node.log_start_offset = 500  # a snapshot from the leader was installed meanwhile
    assert snapshots.finish(cast(Any, node), captured[0], captured[1]()) is None
    assert storage.saved == []


def test_a_snapshot_file_written_on_a_worker_thread_is_saved_only_at_finish(
    tmp_path: Path,
) -> None:
    """The driver writes the file (its fsyncs) with the serialisation, off the event loop; the
    storage's bookkeeping, which the loop reads, changes only at `finish`, on the loop."""
    storage = DurableRaftStorage(tmp_path)
    try:
        machine = _ImmutableStateMachine(state=b"image")
        snapshots = Snapshots(storage, cast(Any, _Applier(cast(Any, machine))), interval_bytes=1)
        node = _Node()
        captured = snapshots.capture(cast(Any, node))
        assert captured is not None
        sid, serialize = captured
        with ThreadPoolExecutor(1) as worker:
            data = worker.submit(snapshots.write, sid, serialize).result()
        assert data == b"image" and machine.serialised == 1
        assert storage.latest_snapshot_id() is None, "not saved before finish"
        assert snapshots.finish(cast(Any, node), sid, data, written=True) == sid
        assert storage.latest_snapshot_id() == sid and storage.snapshot_data(sid) == b"image"
        assert node.log_start_offset == sid.end_offset
    finally:
        storage.close()
