"""DurableRaftStorage: the Raft core's storage contract over real files."""

from __future__ import annotations

from pathlib import Path

from kraft.raft.ready import HardState, Ready
from kraft.raft_shell.store import DurableRaftStorage
from kraft.types import Epoch, NodeId, Offset
from storage.records import build_batch, read_header


def _persist(store: DurableRaftStorage, first: int, count: int, epoch: int) -> None:
    entries = tuple(
        build_batch([b"x" * 200], timestamp_ms=1, base_offset=o, partition_leader_epoch=epoch)
        for o in range(first, first + count)
    )
    store.persist(Ready(entries=entries, entries_end_offset=Offset(first + count), must_sync=True))


def test_read_spans_segments_up_to_the_end_offset(tmp_path: Path) -> None:
    """Regression: SegmentedLog.read stops at a segment's end; a short read made the core
    skip from the first segment to its in-memory batches ("committed batches are not
    contiguous" on a controller's second restart)."""
    store = DurableRaftStorage(tmp_path, segment_bytes=1024)
    _persist(store, 0, 20, epoch=1)
    assert len(store.log.segments) > 3
    batches = store.read(Offset(0), Offset(20), max_bytes=1 << 20)
    assert [read_header(b).base_offset for b in batches] == list(range(20))
    some = store.read(Offset(3), Offset(20), max_bytes=700)
    assert [read_header(b).base_offset for b in some] == [3, 4]  # stops at max_bytes
    assert [read_header(b).base_offset for b in store.read(Offset(5), Offset(7), 1)] == [5]
    store.close()


def test_election_state_and_log_survive_reopening(tmp_path: Path) -> None:
    store = DurableRaftStorage(tmp_path, segment_bytes=1024)
    store.persist(Ready(hard_state=HardState(epoch=Epoch(3), voted_for=NodeId(2)), must_sync=True))
    _persist(store, 0, 8, epoch=3)
    store.close()
    again = DurableRaftStorage(tmp_path, segment_bytes=1024)
    assert again.load_hard_state() == HardState(epoch=Epoch(3), voted_for=NodeId(2))
    assert again.log_end_offset() == 8
    assert list(again.epoch_start_offsets()) == [(3, 0)]
    again.close()
