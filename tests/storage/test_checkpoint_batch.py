"""`CheckpointBatch`: checkpoint writes collected in a block reach the disk together, at
`flush`, with the content they would have had one at a time (a broker taking over hundreds of
leaderships writes their epoch checkpoints this way, not one fsync pair after another)."""

from __future__ import annotations

from pathlib import Path

from storage.checkpoint import CheckpointBatch, read_entries, write_entries, write_offset
from storage.leader_epoch import LeaderEpochCache


def test_writes_in_the_block_reach_the_disk_at_flush_with_the_last_content(
    tmp_path: Path,
) -> None:
    paths = [tmp_path / f"p{i}" / "checkpoint" for i in range(5)]
    for path in paths:
        path.parent.mkdir()
    batch = CheckpointBatch()
    with batch.collecting():
        for i, path in enumerate(paths):
            write_offset(path, i)
        write_offset(paths[0], 42)  # a later write of a path replaces its pending one
    assert not any(p.exists() for p in paths), "nothing written before the flush"
    assert len(batch) == len(paths)
    assert batch.flush() == []
    assert [read_entries(p, 1) for p in paths] == [[(42,)], [(1,)], [(2,)], [(3,)], [(4,)]]
    assert len(batch) == 0
    assert not list(tmp_path.glob("*/*.tmp"))


def test_outside_the_block_a_write_is_durable_at_once(tmp_path: Path) -> None:
    batch = CheckpointBatch()
    with batch.collecting():
        pass
    write_offset(tmp_path / "checkpoint", 7)
    assert read_entries(tmp_path / "checkpoint", 1) == [(7,)]
    assert len(batch) == 0


def test_a_read_in_the_block_sees_the_pending_content(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    write_entries(path, [(1, 0)])
    batch = CheckpointBatch()
    with batch.collecting():
        write_entries(path, [(1, 0), (2, 10)])
        assert read_entries(path, 2) == [(1, 0), (2, 10)]
    assert batch.flush() == []
    assert read_entries(path, 2) == [(1, 0), (2, 10)]


def test_a_failed_write_is_returned_and_the_others_are_written(tmp_path: Path) -> None:
    good = tmp_path / "good"
    missing = tmp_path / "gone" / "checkpoint"  # its directory does not exist
    batch = CheckpointBatch()
    with batch.collecting():
        write_offset(good, 1)
        write_offset(missing, 2)
    failed = batch.flush()
    assert [path for path, _ in failed] == [missing]
    assert isinstance(failed[0][1], FileNotFoundError)
    assert read_entries(good, 1) == [(1,)]


def test_a_leader_epoch_assigned_in_the_block_is_persisted_at_flush(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path, lambda: 100)
    batch = CheckpointBatch()
    with batch.collecting():
        assert cache.assign(3, 50)
    assert cache.latest_epoch == 3, "the cache itself changes at once"
    assert not path.exists()
    batch.flush()
    loaded = LeaderEpochCache.load(path, lambda: 100)
    assert loaded is not None and loaded.latest_epoch == 3
