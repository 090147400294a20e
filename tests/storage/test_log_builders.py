"""Builders shared by the segmented-log tests (this module holds no tests)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from storage.config import LogConfig
from storage.log import SegmentedLog
from storage.records import BatchHeader, build_batch, iter_batches, validate_batch
from storage.segment import segment_file_name


@dataclass
class FakeClock:
    """An injected clock: tests move ``now_ms`` by hand."""

    now_ms: int = 1_000_000

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


def make_batch(
    records: int = 1,
    value_size: int = 10,
    *,
    timestamp_ms: int = 1_000_000,
    epoch: int = -1,
    base_offset: int = 0,
    fill: int = 0x61,
) -> bytes:
    return build_batch(
        [bytes([fill]) * value_size] * records,
        timestamp_ms=timestamp_ms,
        partition_leader_epoch=epoch,
        base_offset=base_offset,
    )


@dataclass
class LogBuilder:
    """``LogBuilder(tmp_path).with_config(segment_bytes=1000).with_batches(10).build()``."""

    directory: Path
    config: LogConfig = field(default_factory=LogConfig)
    clock: FakeClock = field(default_factory=FakeClock)
    batches: list[tuple[int, int, int | None]] = field(default_factory=list)

    def with_config(self, **changes: Any) -> LogBuilder:
        self.config = replace(self.config, **changes)
        return self

    def with_clock(self, clock: FakeClock) -> LogBuilder:
        self.clock = clock
        return self

    def with_batches(
        self, count: int, *, records: int = 1, value_size: int = 10, epoch: int | None = None
    ) -> LogBuilder:
        self.batches.extend([(records, value_size, epoch)] * count)
        return self

    def build(self) -> SegmentedLog:
        log = SegmentedLog.open(self.directory, self.config, self.clock)
        for records, value_size, epoch in self.batches:
            log.append(
                make_batch(records, value_size, timestamp_ms=self.clock.now_ms), leader_epoch=epoch
            )
        return log


def read_all(log: SegmentedLog, max_bytes: int = 1 << 20) -> list[tuple[BatchHeader, bytes]]:
    """Every batch from the log start offset to the end, via `SegmentedLog.read`, validated."""
    out: list[tuple[BatchHeader, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes)
        assert data, f"empty read at {offset} < {log.log_end_offset}"
        for pos, _ in iter_batches(data):
            header = validate_batch(data, pos)
            out.append((header, data[pos : pos + header.size_bytes]))
        offset = out[-1][0].next_offset
    return out


def scan_segment_file(path: Path) -> list[tuple[int, BatchHeader]]:
    """``(position, header)`` of every whole batch in a segment file (no CRC check)."""
    return list(iter_batches(path.read_bytes()))


def read_offset_index(directory: Path, base_offset: int) -> list[tuple[int, int]]:
    """The ``(absolute offset, position)`` entries of a segment's ``.index`` file."""
    path = directory / segment_file_name(base_offset, ".index")
    data = path.read_bytes() if path.exists() else b""
    return [
        (
            base_offset + int.from_bytes(data[i : i + 4], "big", signed=True),
            int.from_bytes(data[i + 4 : i + 8], "big", signed=True),
        )
        for i in range(0, len(data) - len(data) % 8, 8)
    ]


def assert_indexes_agree_with_scan(log: SegmentedLog) -> None:
    """Every offset-index entry on disk names the start of a batch with that base offset."""
    for info in log.segments:
        path = log.directory / segment_file_name(info.base_offset)
        starts = {pos: h.base_offset for pos, h in scan_segment_file(path)}
        assert os.path.getsize(path) == info.size_bytes
        for offset, position in read_offset_index(log.directory, info.base_offset):
            assert starts.get(position) == offset, (info, offset, position)


__all__ = [
    "FakeClock",
    "LogBuilder",
    "assert_indexes_agree_with_scan",
    "make_batch",
    "read_all",
    "read_offset_index",
    "scan_segment_file",
]
