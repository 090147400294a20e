"""Recovery of a `SegmentedLog` after an unclean shutdown: torn tails, corrupt bytes, bad
indexes, missing checkpoints. A crash is `SegmentedLog.abandon` plus file surgery."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from storage.log import SegmentedLog
from storage.segment import segment_file_name
from tests.storage.test_log_builders import (
    LogBuilder,
    assert_indexes_agree_with_scan,
    make_batch,
    read_all,
    scan_segment_file,
)


def active_path(log: SegmentedLog) -> Path:
    return log.directory / segment_file_name(log.segments[-1].base_offset)


def position_of(path: Path, offset: int) -> int:
    """Position of the first batch at or after ``offset`` in a segment file (or its size)."""
    for pos, h in scan_segment_file(path):
        if h.base_offset >= offset:
            return pos
    return path.stat().st_size


@pytest.mark.parametrize("seed", range(12))
def test_a_torn_tail_is_cut_at_the_last_whole_batch_and_flushed_batches_survive(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    log = LogBuilder(tmp_path).with_config(segment_bytes=4000, index_interval_bytes=300).build()
    for _ in range(30):
        log.append(make_batch(rng.randint(1, 4), rng.randint(1, 200)))
    log.flush()
    flushed = log.log_end_offset
    for _ in range(12):
        log.append(make_batch(rng.randint(1, 4), rng.randint(1, 200)))
    before = read_all(log)
    path = active_path(log)
    log.abandon()
    floor = position_of(path, flushed) if log.segments[-1].base_offset <= flushed else 0
    os.truncate(path, rng.randint(floor, path.stat().st_size))

    again = SegmentedLog.open(tmp_path, log.config)
    after = read_all(again)
    assert again.log_end_offset >= flushed
    assert after == before[: len(after)]
    assert again.log_end_offset == (after[-1][0].next_offset if after else 0)
    assert again.recovery_point == flushed
    assert_indexes_agree_with_scan(again)
    assert again.append(make_batch()) == again.log_end_offset - 1


def test_a_corrupt_byte_cuts_the_log_there_and_deletes_later_segments(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_config(segment_bytes=1000).with_batches(40, value_size=60)
    built = log.build()
    assert len(built.segments) > 3
    victim = built.segments[1]
    path = tmp_path / segment_file_name(victim.base_offset)
    batches = scan_segment_file(path)
    pos, header = batches[2]
    built.abandon()
    with open(path, "r+b") as f:  # flip one byte in the records of the 3rd batch
        f.seek(pos + header.size_bytes - 5)
        byte = f.read(1)[0]
        f.seek(pos + header.size_bytes - 5)
        f.write(bytes([byte ^ 0x40]))

    again = SegmentedLog.open(tmp_path, built.config)
    assert again.log_end_offset == header.base_offset
    assert [s.base_offset for s in again.segments] == [0, victim.base_offset]
    assert not (tmp_path / segment_file_name(victim.next_offset)).exists()
    assert [h.base_offset for h, _ in read_all(again)] == list(range(header.base_offset))


def test_garbage_in_an_index_file_is_detected_and_the_index_rebuilt(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_config(index_interval_bytes=100).with_batches(30, value_size=50)
    built = log.build()
    before = read_all(built)
    built.close()
    index = tmp_path / segment_file_name(0, ".index")
    data = bytearray(index.read_bytes())
    data[8:16] = b"\x00\x00\x00\x07\x00\x00\x00\x03"  # offset 7 at position 3: not a batch start
    index.write_bytes(bytes(data) + b"\x01\x02\x03")  # and a torn trailing entry
    again = SegmentedLog.open(tmp_path, built.config)
    assert read_all(again) == before
    for offset in range(30):
        assert again.read(offset, 1) == before[offset][1]
    again.flush()
    assert_indexes_agree_with_scan(again)


def test_a_missing_index_is_rebuilt(tmp_path: Path) -> None:
    built = LogBuilder(tmp_path).with_config(index_interval_bytes=100).with_batches(20).build()
    built.close()
    (tmp_path / segment_file_name(0, ".index")).unlink()
    (tmp_path / segment_file_name(0, ".timeindex")).unlink()
    again = SegmentedLog.open(tmp_path, built.config)
    assert [h.base_offset for h, _ in read_all(again)] == list(range(20))
    again.flush()
    assert_indexes_agree_with_scan(again)


def test_a_missing_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_config(segment_bytes=400).build()
    for epoch in (1, 1, 2, 5, 5, 5, 7):
        log.append(make_batch(), leader_epoch=epoch)
    log.close()
    (tmp_path / "leader-epoch-checkpoint").unlink()
    again = SegmentedLog.open(tmp_path, log.config)
    assert [(e.epoch, e.start_offset) for e in again.leader_epoch_cache.entries] == [
        (1, 0),
        (2, 2),
        (5, 3),
        (7, 6),
    ]
    assert (tmp_path / "leader-epoch-checkpoint").exists()


def test_epoch_entries_past_the_recovered_end_are_dropped(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).build()
    log.append(make_batch(), leader_epoch=1)
    log.flush()
    log.append(make_batch(), leader_epoch=2)
    path = active_path(log)
    log.abandon()
    os.truncate(path, position_of(path, 1))
    again = SegmentedLog.open(tmp_path)
    assert again.log_end_offset == 1
    assert [e.epoch for e in again.leader_epoch_cache.entries] == [1]


def test_a_crash_after_a_roll_leaves_a_usable_empty_active_segment(tmp_path: Path) -> None:
    size = len(make_batch())
    log = LogBuilder(tmp_path).with_config(segment_bytes=size).with_batches(2).build()
    log.flush()
    log.abandon()
    again = SegmentedLog.open(tmp_path, log.config)
    assert [s.base_offset for s in again.segments] == [0, 1]
    assert again.append(make_batch()) == 2


def test_reopening_after_a_clean_open_and_a_crash_recovers(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_batches(3).build()
    log.close()
    again = SegmentedLog.open(tmp_path)
    assert again.had_clean_shutdown
    again.append(make_batch())
    again.abandon()
    third = SegmentedLog.open(tmp_path)
    assert not third.had_clean_shutdown
    assert third.log_end_offset == 4  # the process died, the page cache kept the append
    assert third.recovery_point == 3


def test_a_log_start_checkpoint_past_the_recovered_end_restarts_the_log_there(
    tmp_path: Path,
) -> None:
    log = LogBuilder(tmp_path).with_batches(5).build()
    log.flush()
    log.advance_log_start_offset(4)
    path = active_path(log)
    log.abandon()
    os.truncate(path, 0)  # (cannot happen to flushed data; models a lost disk)
    again = SegmentedLog.open(tmp_path)
    assert (again.log_start_offset, again.log_end_offset) == (4, 4)
