"""`RaftLog`: the epoch cache, truncation, reads across storage and memory, snapshots."""

from __future__ import annotations

import pytest

from kraft.raft import RaftLog, Ready, SnapshotId
from kraft.sim import SimDisk
from kraft.types import Epoch, Offset
from storage.records import read_header
from tests.raft.builder import batch


def disk_with(*epochs: int) -> SimDisk:
    disk = SimDisk()
    disk.write_ready(Ready(entries=tuple(batch(e, i) for i, e in enumerate(epochs))))
    disk.sync()
    return disk


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (0, None),
        (1, (1, 2)),
        (2, (1, 2)),  # largest epoch <= 2 is 1, which ends where 3 starts
        (3, (3, 5)),
        (4, (3, 5)),
        (5, (5, 6)),
        (9, (5, 6)),
    ],
)
def test_end_offset_for_epoch(epoch: int, expected: tuple[int, int] | None) -> None:
    """KIP-101: the largest epoch <= the asked one, and where it ends (the next epoch's
    start, or the log end)."""
    log = RaftLog(disk_with(1, 1, 3, 3, 3, 5))
    assert log.epoch_start_offsets() == [(1, 0), (3, 2), (5, 5)]
    assert log.end_offset_for_epoch(epoch) == expected


def test_truncation_drops_batches_and_epochs_and_is_handed_to_the_shell() -> None:
    disk = disk_with(1, 1, 3, 3)
    log = RaftLog(disk)
    log.append(batch(4, 4))
    assert log.truncate_to(2) == 2
    assert log.last_epoch == 1 and log.log_end_offset == 2 and log.durable_end_offset == 2
    truncate, entries, end = log.take_unpersisted()
    assert (truncate, entries, end) == (2, (), 2)


def test_reads_span_storage_and_memory_in_whole_batches() -> None:
    log = RaftLog(disk_with(1, 1, 1))
    log.append(batch(2, 3, count=2))
    got = [read_header(b).base_offset for b in log.read(1, 1 << 20)]
    assert got == [1, 2, 3]
    assert [read_header(b).base_offset for b in log.read(4, 1 << 20)] == [3]
    assert len(log.read(0, 1)) == 1  # at least one batch, even over max_bytes


def test_batches_become_durable_only_when_marked_persisted() -> None:
    log = RaftLog(disk_with(1))
    log.append(batch(1, 1))
    _, entries, end = log.take_unpersisted()
    assert len(entries) == 1 and log.durable_end_offset == 1
    log.mark_persisted(end)
    assert log.durable_end_offset == 2


def test_truncation_after_handoff_limits_what_counts_as_durable() -> None:
    log = RaftLog(disk_with(1))
    log.append(batch(1, 1))
    log.append(batch(1, 2))
    _, _, end = log.take_unpersisted()
    log.truncate_to(2)  # before the shell confirmed the write
    log.mark_persisted(end)
    assert log.durable_end_offset == 2


def test_truncating_to_the_log_start_keeps_the_snapshot_epoch() -> None:
    """Regression (sim seed 1394): with every batch past a snapshot truncated, the log ends
    in the snapshot's epoch, not in epoch 0 (else vote requests compare logs wrongly)."""
    log = RaftLog(disk_with(1, 1, 2, 2))
    log.advance_log_start(SnapshotId(Offset(3), Epoch(2)))
    log.append(batch(3, 4))
    log.truncate_to(3)
    assert log.last_epoch == 2


def test_snapshot_install_replaces_the_log() -> None:
    log = RaftLog(disk_with(1, 1))
    log.install_snapshot(SnapshotId(Offset(10), Epoch(4)))
    assert (log.log_start_offset, log.log_end_offset, log.last_epoch) == (10, 10, 4)
    assert log.end_offset_for_epoch(4) == (4, 10)
