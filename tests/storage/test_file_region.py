"""`SegmentedLog.read_region`: the batches `read` returns, as a region of their segment file that
outlives the segment's deletion, and never past what the read decided."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from storage import log_read
from storage.errors import OffsetOutOfRangeError
from storage.file_region import FileRegion, records_bytes
from storage.records import iter_batches
from storage.segment import segment_file_name
from tests.storage.test_log_builders import LogBuilder, make_batch


@pytest.fixture(autouse=True)
def _every_read_a_region(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regions of any size (`REGION_MIN_BYTES` is larger than these logs' reads)."""
    monkeypatch.setattr(log_read, "REGION_MIN_BYTES", 1)


@pytest.mark.parametrize(("interval", "grow"), [(200, 7), (40, 23), (4096, 3)])
def test_a_region_holds_exactly_the_bytes_of_the_read_for_every_offset_and_bound(
    tmp_path: Path, interval: int, grow: int
) -> None:
    builder = LogBuilder(tmp_path).with_config(segment_bytes=4000, index_interval_bytes=interval)
    log = builder.build()
    for i in range(60):
        log.append(make_batch(1 + i % 4, 20 + grow * (i % 30)))
    end = log.log_end_offset
    regions = 0
    for offset in range(end + 1):
        for max_bytes in (0, 1, 150, 700, 1 << 20):
            for max_offset in (None, offset + 1, offset + 6, end - 3, end):
                for min_one in (True, False):
                    expected = log.read(offset, max_bytes, max_offset=max_offset, min_one=min_one)
                    region = log.read_region(
                        offset, max_bytes, max_offset=max_offset, min_one=min_one
                    )
                    case = (offset, max_bytes, max_offset, min_one)
                    if isinstance(region, FileRegion):
                        regions += 1
                        # its batches end there (no compaction here: offsets are contiguous)
                        *_, (_, last) = iter_batches(expected)
                        assert region.next_offset == last.next_offset, case
                    assert records_bytes(region) == expected, case
    assert regions > 500  # the reads that found batches came as regions


def test_a_region_outlives_its_segment_deletion(tmp_path: Path) -> None:
    builder = LogBuilder(tmp_path).with_config(segment_bytes=600, index_interval_bytes=100)
    log = builder.build()
    for i in range(40):
        log.append(make_batch(2, 30, fill=0x41 + i % 26))
    expected = log.read(0, 1 << 20)
    region = log.read_region(0, 1 << 20)
    assert isinstance(region, FileRegion) and len(region) == len(expected)
    first = log.segments[0]
    assert log.advance_log_start_offset(first.next_offset)  # deletes the first segment
    assert not (tmp_path / segment_file_name(first.base_offset)).exists()
    assert region.read() == expected
    received = bytearray()
    reader, writer = os.pipe()
    try:
        sent = os.sendfile(writer, region.fd, region.position, region.size)
        received += os.read(reader, sent)
    finally:
        os.close(reader)
        os.close(writer)
        region.close()
    assert bytes(received) == expected


def test_a_region_read_out_of_range_raises_as_a_read_does(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_batches(3).build()
    with pytest.raises(OffsetOutOfRangeError):
        log.read_region(7, 100)
    assert log.read_region(3, 100) == b""


def test_a_read_under_region_min_bytes_comes_as_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = LogBuilder(tmp_path).with_batches(6, value_size=100).build()
    expected = log.read(0, 1 << 20)
    monkeypatch.setattr(log_read, "REGION_MIN_BYTES", len(expected) + 1)
    assert log.read_region(0, 1 << 20) == expected
    monkeypatch.setattr(log_read, "REGION_MIN_BYTES", len(expected))
    region = log.read_region(0, 1 << 20)
    assert isinstance(region, FileRegion) and records_bytes(region) == expected


def test_a_region_out_of_file_descriptors_comes_as_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No descriptor left for the region's dup (EMFILE) is no disk error: the read's bytes."""
    log = LogBuilder(tmp_path).with_batches(6, value_size=100).build()
    expected = log.read(0, 1 << 20)

    def no_descriptor_left(fd: int) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(os, "dup", no_descriptor_left)
    assert log.read_region(0, 1 << 20) == expected
    assert log.read(0, 1 << 20) == expected  # the log did not fail
