"""The cleaner's key map is bounded (``log.cleaner.dedupe.buffer.size``, Kafka's
``SkimpyOffsetMap``): a pass whose dirty part does not fit maps and cleans a prefix of it,
checkpoints where it stopped, and the next passes go on until the log is what one unbounded
pass makes of it."""

from __future__ import annotations

from pathlib import Path

from storage.compaction import OFFSET_MAP_ENTRY_BYTES, OffsetMap, map_keys
from storage.config import LogConfig
from storage.log import SegmentedLog
from storage.records import SimpleRecord, build_batch, iter_batches, record_tuples

NOW_MS = 1_000_000_000
DAY_MS = 86_400_000


def _log(path: Path) -> SegmentedLog:
    config = LogConfig.from_properties(
        {
            "cleanup.policy": "compact",
            "segment.bytes": "600",
            "min.cleanable.dirty.ratio": "0",
            "delete.retention.ms": str(DAY_MS),
        }
    )
    log = SegmentedLog.open(path, config, clock_ms=lambda: NOW_MS)
    old = NOW_MS - 2 * DAY_MS
    for i in range(240):
        key = b"k%d" % (i * 7 % 40)
        if i % 37 == 5:
            value, ts = None, (old if i < 120 else NOW_MS)  # old and recent tombstones
        else:
            value, ts = b"v%d" % i, NOW_MS
        log.append(
            build_batch([SimpleRecord(key=key, value=value, timestamp_ms=ts)], timestamp_ms=ts)
        )
    return log


def _records(log: SegmentedLog) -> list[tuple[int, int, bytes | None, bytes | None]]:
    out: list[tuple[int, int, bytes | None, bytes | None]] = []
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for pos, header in iter_batches(data):
            out += [(o, ts, k, v) for o, ts, k, v, _ in record_tuples(data, pos)]
            offset = header.next_offset
    return out


def test_a_pass_with_a_tiny_key_map_cleans_a_prefix_and_later_passes_finish_the_job(
    tmp_path: Path,
) -> None:
    whole = _log(tmp_path / "whole")
    unbounded = whole.compact(NOW_MS, high_watermark=whole.log_end_offset)
    assert unbounded is not None and unbounded.keys_mapped == 40
    expected = _records(whole)

    bounded = _log(tmp_path / "bounded")
    budget = 12 * OFFSET_MAP_ENTRY_BYTES  # 12 keys of the 40
    first = bounded.compact(NOW_MS, high_watermark=bounded.log_end_offset, offset_map_bytes=budget)
    assert first is not None
    assert first.keys_mapped <= 12
    assert first.first_dirty_offset == 0 and first.end_offset < unbounded.end_offset  # a prefix
    passes = [first]
    while (
        result := bounded.compact(
            NOW_MS, high_watermark=bounded.log_end_offset, offset_map_bytes=budget
        )
    ) is not None:
        assert result.first_dirty_offset == passes[-1].end_offset  # goes on where it stopped
        assert result.keys_mapped <= 12
        passes.append(result)
        assert len(passes) < 100
    assert len(passes) > 2
    assert passes[-1].end_offset == unbounded.end_offset
    assert _records(bounded) == expected
    whole.close()
    bounded.close()
    reopened = SegmentedLog.open(tmp_path / "bounded", bounded.config, clock_ms=lambda: NOW_MS)
    assert _records(reopened) == expected
    reopened.close()


def test_the_map_always_takes_one_batch_so_every_pass_moves_on() -> None:
    batch = build_batch(
        [SimpleRecord(key=b"k%d" % i, value=b"v", timestamp_ms=NOW_MS) for i in range(5)],
        timestamp_ms=NOW_MS,
    )
    offsets = OffsetMap(capacity=1)
    assert map_keys(batch, offsets, end_offset=100) is None  # 5 keys over a capacity of 1
    assert len(offsets) == 5
    assert map_keys(batch, offsets, end_offset=100) == 0  # full: the next batch waits
