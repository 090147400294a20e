"""Disk errors in a `SegmentedLog`: every OSError becomes KafkaStorageError, a failed append
leaves nothing behind, anything else fails the log, and a corrupt batch is never served."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from storage.errors import CorruptRecordError, KafkaStorageError
from storage.file_io import FailingFileIO
from storage.log import SegmentedLog
from storage.segment import segment_file_name
from tests.storage.test_log_builders import FakeClock, make_batch, read_all, scan_segment_file


def open_log(directory: Path, io: FailingFileIO) -> SegmentedLog:
    return SegmentedLog.open(directory, clock_ms=FakeClock(), file_io=io)


def values(log: SegmentedLog) -> list[int]:
    return [h.base_offset for h, _ in read_all(log)]


@pytest.mark.parametrize("follower", [False, True], ids=["leader", "follower"])
def test_an_append_that_hits_enospc_raises_a_storage_error_and_leaves_the_log_as_it_was(
    tmp_path: Path, follower: bool
) -> None:
    io = FailingFileIO()
    log = open_log(tmp_path, io)
    for _ in range(5):
        log.append(make_batch(2, 50, epoch=1), leader_epoch=1)
    end, size = log.log_end_offset, log.size_bytes
    epochs = log.leader_epoch_cache.entries

    io.fail = errno.ENOSPC
    with pytest.raises(KafkaStorageError, match="No space left"):
        if follower:  # a fetched batch of a newer epoch, at the log end
            log.append_as_follower(make_batch(3, 50, epoch=2, base_offset=end))
        else:
            log.append(make_batch(3, 50), leader_epoch=1)

    assert log.failed is None  # undone: the log still works
    assert (log.log_end_offset, log.size_bytes) == (end, size)
    assert log.leader_epoch_cache.entries == epochs
    assert (tmp_path / segment_file_name(0)).stat().st_size == size
    assert values(log) == [0, 2, 4, 6, 8]

    io.fail = None  # the disk has room again
    assert log.append(make_batch(3, 50), leader_epoch=1) == end
    log.close()
    again = SegmentedLog.open(tmp_path)
    assert values(again) == [0, 2, 4, 6, 8, 10]
    assert [h.record_count for _, h in scan_segment_file(tmp_path / segment_file_name(0))] == [
        2,
        2,
        2,
        2,
        2,
        3,
    ]


def test_a_short_write_before_enospc_is_cut_off(tmp_path: Path) -> None:
    class ShortThenFull(FailingFileIO):
        def writev(self, fd: int, buffers: object) -> int:
            import os

            os.write(fd, b"torn bytes")  # part of the batch reached the file
            raise OSError(errno.ENOSPC, "No space left on device")

    io = ShortThenFull()
    log = open_log(tmp_path, io)
    io.fail = None
    log.append_as_follower(make_batch(1, 10, base_offset=0))
    size = log.size_bytes
    with pytest.raises(KafkaStorageError):
        log.append(make_batch(1, 10))
    assert (tmp_path / segment_file_name(0)).stat().st_size == size
    assert log.log_end_offset == 1


def test_a_failed_fsync_fails_the_log_until_it_is_reopened(tmp_path: Path) -> None:
    io = FailingFileIO()
    log = open_log(tmp_path, io)
    log.append(make_batch(2))
    log.flush()
    log.append(make_batch(2))
    io.fail, io.ops = errno.EIO, frozenset({"fdatasync", "fsync"})
    with pytest.raises(KafkaStorageError, match="Input/output error"):
        log.flush()
    assert log.failed is not None
    io.fail = None
    for call in (lambda: log.append(make_batch()), lambda: log.read(0, 1000), log.flush):
        with pytest.raises(KafkaStorageError):
            call()
    log.close()  # a failed log is abandoned, never trusted: the next open recovers it
    again = SegmentedLog.open(tmp_path)
    assert again.log_end_offset == 4
    assert not again.had_clean_shutdown


def test_a_corrupt_batch_is_never_served_and_once_failed_the_next_open_cuts_the_log_there(
    tmp_path: Path,
) -> None:
    log = SegmentedLog.open(tmp_path)
    for i in range(20):
        log.append(make_batch(1, 40, fill=0x41 + i))
    log.flush()  # NB: below the recovery point, so only the read path can notice
    path = tmp_path / segment_file_name(0)
    pos, header = scan_segment_file(path)[7]
    with open(path, "r+b") as f:  # flip one byte in the records of offset 7
        f.seek(pos + header.size_bytes - 5)
        byte = f.read(1)[0]
        f.seek(pos + header.size_bytes - 5)
        f.write(bytes([byte ^ 0x40]))

    assert log.read(0, 100)  # the first batches are fine
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        log.read(0, 1 << 20)
    assert log.failed is None and log.read(0, 100)  # the caller decides
    log.fail_corrupt(0, "CRC mismatch")  # a replica with another copy gives it up
    with pytest.raises(KafkaStorageError):
        log.read(0, 100)
    log.close()

    again = SegmentedLog.open(tmp_path)
    assert again.log_end_offset == 7
    assert values(again) == list(range(7))


def test_a_log_in_an_unusable_directory_raises_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(KafkaStorageError, match="open failed"):
        SegmentedLog.open(tmp_path / "file" / "log")


def test_a_corrupt_base_offset_which_the_crc_does_not_cover_is_never_served(
    tmp_path: Path,
) -> None:
    log = SegmentedLog.open(tmp_path)
    for _ in range(10):
        log.append(make_batch(1, 40))
    log.flush()
    path = tmp_path / segment_file_name(0)
    pos, _ = scan_segment_file(path)[4]
    with open(path, "r+b") as f:
        f.seek(pos + 7)  # the low byte of offset 4's base offset: now 5
        f.write(b"\x05")
    with pytest.raises(CorruptRecordError, match="does not continue"):
        log.read(0, 1 << 20)


@pytest.mark.parametrize("sync_every_append", [False, True], ids=["page-cache", "synced"])
def test_an_append_whose_undo_fails_too_fails_the_log_with_a_storage_error(
    tmp_path: Path, sync_every_append: bool
) -> None:
    # the one-batch append path maps OSError itself (not through `maps_storage_errors`)
    from storage.config import LogConfig

    io = FailingFileIO()
    log = SegmentedLog.open(
        tmp_path, LogConfig(sync_every_append=sync_every_append), FakeClock(), file_io=io
    )
    log.append(make_batch(2))
    io.fail, io.ops = errno.EIO, frozenset({"writev", "ftruncate"})
    with pytest.raises(KafkaStorageError, match="Input/output error"):
        log.append(make_batch(2))
    assert log.failed is not None
    io.fail = None
    with pytest.raises(KafkaStorageError):
        log.append(make_batch(2))


def test_a_failed_fdatasync_after_a_synced_append_fails_the_log(tmp_path: Path) -> None:
    from storage.config import LogConfig

    io = FailingFileIO()
    log = SegmentedLog.open(tmp_path, LogConfig(sync_every_append=True), FakeClock(), file_io=io)
    io.fail, io.ops = errno.EIO, frozenset({"fdatasync", "fsync"})
    with pytest.raises(KafkaStorageError, match="Input/output error"):
        log.append(make_batch(2))
    assert log.failed is not None
