"""Log compaction: the planner's table (pure), the record rule, the cleaner on a real log (latest
record per key, offsets kept with their gaps, tombstones until ``delete.retention.ms``, nothing
at or past the high watermark), readers across the gaps, and a crash in the middle of a swap."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords

from kraft.cli.dump_log import _line as dump_line
from kraft.types import TopicPartition
from replication.clients.consumer import decode_partition_records
from storage.checkpoint import read_offset
from storage.compaction import (
    CLEANER_OFFSET_CHECKPOINT,
    OffsetMap,
    clean_batches,
    keeps,
    map_keys,
    plan_compaction,
    scan_transactions,
)
from storage.compression import Compression
from storage.config import LogConfig
from storage.control import build_marker_batch
from storage.dump import describe_segment
from storage.log import SegmentedLog
from storage.log_cleaner import CLEANED_SUFFIX, SWAP_SUFFIX, clean_log, write_swap_file
from storage.records import (
    SimpleRecord,
    build_batch,
    iter_batches,
    record_tuples,
    set_base_offset,
    validate_batch,
)
from storage.retention import SegmentInfo
from storage.segment import segment_file_name

NOW_MS = 1_000_000_000
DAY_MS = 86_400_000


def _segments(*specs: tuple[int, int, int]) -> list[SegmentInfo]:
    """Contiguous segments from (record count, size in bytes, newest timestamp) triples."""
    out, base = [], 0
    for count, size, max_ts in specs:
        out.append(
            SegmentInfo(
                base_offset=base, next_offset=base + count, size_bytes=size, max_timestamp_ms=max_ts
            )
        )
        base += count
    return out


SEGMENTS = _segments((10, 100, 1_000), (10, 100, 2_000), (10, 100, 3_000), (5, 50, 4_000))
COMPACT = LogConfig.from_properties({"cleanup.policy": "compact"})


@pytest.mark.parametrize(
    ("props", "first_dirty", "high_watermark", "now_ms", "expected"),
    [
        ({}, None, 35, 10_000, (3, 30)),  # never the active segment
        ({"cleanup.policy": "delete"}, None, 35, 10_000, None),  # not a compacted log
        ({"cleanup.policy": "compact,delete"}, None, 35, 10_000, (3, 30)),
        ({}, None, 20, 10_000, (2, 20)),  # the high watermark bounds it ...
        ({}, None, 19, 10_000, (1, 10)),  # ... to whole segments below it
        ({}, None, 9, 10_000, None),
        ({"min.compaction.lag.ms": "8000"}, None, 35, 10_000, (2, 20)),  # 3_000 is too young
        ({"min.compaction.lag.ms": "8001"}, None, 35, 10_000, (1, 10)),  # 2_000 too
        ({"min.compaction.lag.ms": "9000"}, None, 35, 10_000, (1, 10)),
        ({"min.compaction.lag.ms": "9001"}, None, 35, 10_000, None),
        ({}, 30, 35, 10_000, None),  # all cleanable bytes were cleaned
        ({}, 20, 35, 10_000, None),  # dirty 100 of 300: below the default ratio 0.5
        ({"min.cleanable.dirty.ratio": "0.3"}, 20, 35, 10_000, (3, 30)),
        ({}, 10, 35, 10_000, (3, 30)),  # dirty 200 of 300
    ],
)
def test_the_planner_cleans_the_prefix_its_rules_allow(
    props: dict[str, str],
    first_dirty: int | None,
    high_watermark: int,
    now_ms: int,
    expected: tuple[int, int] | None,
) -> None:
    config = LogConfig.from_properties({"cleanup.policy": "compact", **props})
    plan = plan_compaction(
        SEGMENTS,
        config,
        first_dirty_offset=first_dirty,
        log_start_offset=0,
        high_watermark=high_watermark,
        now_ms=now_ms,
    )
    assert (None if plan is None else (plan.segment_count, plan.end_offset)) == expected


def test_a_record_is_kept_if_latest_and_a_tombstone_until_its_batchs_delete_horizon() -> None:
    offsets = OffsetMap()
    for offset, key in enumerate([b"a", b"b", b"a", b"c"]):
        offsets.put(key, offset)

    def kept(offset: int, key: bytes | None, value: bytes | None, horizon: int | None) -> bool:
        return keeps(offset, key, value, offsets, delete_horizon_ms=horizon, now_ms=1_000)

    assert not kept(0, b"a", b"v", None)  # a newer "a" follows
    assert kept(2, b"a", b"v", None)
    assert kept(1, b"b", None, None)  # a tombstone no pass has seen yet: kept (KIP-534)
    assert kept(1, b"b", None, 1_001)  # before its batch's horizon: kept
    assert not kept(1, b"b", None, 1_000)  # at it: gone
    assert not kept(0, b"a", None, None)  # a superseded tombstone goes at once
    assert kept(7, b"a", b"v", None)  # past the mapped range: not touched
    assert kept(5, None, b"v", None)  # no key: kept


# --- the cleaner on a real log ------------------------------------------------------------------


def _open(path: Path, **props: str) -> SegmentedLog:
    config = LogConfig.from_properties(
        {
            "cleanup.policy": "compact",
            "segment.bytes": "400",
            "min.cleanable.dirty.ratio": "0.01",
            **props,
        }
    )
    return SegmentedLog.open(path, config, clock_ms=lambda: NOW_MS)


def _put(log: SegmentedLog, key: bytes, value: bytes | None, ts: int = NOW_MS, **kw: int) -> int:
    batch = build_batch(
        [SimpleRecord(key=key, value=value, timestamp_ms=ts)], timestamp_ms=ts, **kw
    )  # type: ignore[arg-type]
    return log.append(batch)


def _all(log: SegmentedLog, start: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    out, offset = [], start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for pos, header in iter_batches(data):
            validate_batch(data, pos)
            out += [(o, k, v) for o, _, k, v, _ in record_tuples(data, pos) if o >= start]
            offset = header.next_offset
    return out


def test_the_cleaner_keeps_the_latest_record_per_key_and_every_offset(tmp_path: Path) -> None:
    log = _open(tmp_path)
    for i in range(60):
        _put(log, b"k%d" % (i % 5), b"v%d" % i)
    before_segments = len(log.segments)
    result = log.compact(NOW_MS, high_watermark=log.log_end_offset)
    assert result is not None and result.records_removed > 0
    # small cleaned segments were merged (Kafka's groupSegmentsBySize), offsets contiguous
    segments = log.segments
    assert len(segments) < before_segments and segments[0].base_offset == 0
    assert all(a.next_offset == b.base_offset for a, b in itertools.pairwise(segments))
    assert result.end_offset in {s.next_offset for s in segments}
    assert log.log_end_offset == 60
    records = _all(log)
    end = result.end_offset
    cleaned = [r for r in records if r[0] < end]
    # below the first uncleanable offset, one record per key: its latest there
    latest = {b"k%d" % (i % 5): i for i in range(end)}
    assert sorted(o for o, _, _ in cleaned) == sorted(latest.values())
    assert [r for r in records if r[0] >= end] == [
        (i, b"k%d" % (i % 5), b"v%d" % i) for i in range(end, 60)
    ]
    # a consumer reads across the gaps from any offset, and its position passes emptied batches
    data = log.read(0, 1 << 20)
    got, next_offset, error = decode_partition_records(TopicPartition("t", 0), data, 0)
    assert error is None and next_offset > 0
    assert [r.offset for r in got] == [o for o, _, _ in records if o < next_offset]
    assert log.compact(NOW_MS, high_watermark=log.log_end_offset) is None  # nothing dirty now
    log.close()
    reopened = _open(tmp_path)
    assert _all(reopened) == records
    reopened.close()


def test_the_cleaner_never_touches_offsets_at_or_past_the_high_watermark(tmp_path: Path) -> None:
    log = _open(tmp_path)
    for i in range(60):
        _put(log, b"same", b"v%d" % i)
    high_watermark = 25
    result = log.compact(NOW_MS, high_watermark=high_watermark)
    assert result is not None and result.end_offset <= high_watermark
    records = _all(log)
    assert [o for o, _, _ in records if o >= result.end_offset] == list(
        range(result.end_offset, 60)
    )
    assert [o for o, _, _ in records if o < result.end_offset] == [result.end_offset - 1]
    log.close()


def _tombstone_batches(log: SegmentedLog, keys: tuple[bytes, ...]) -> list[tuple[int, int | None]]:
    """(offset, its batch's delete horizon) of each record of ``keys`` left in the log."""
    out, offset = [], 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for pos, header in iter_batches(data):
            for o, _ts, key, _value, _headers in record_tuples(data, pos):
                if key in keys and o >= offset:
                    out.append((o, header.delete_horizon_ms))
            offset = header.next_offset
    return out


def test_tombstones_stay_until_delete_retention_ms_after_the_first_pass_then_go(
    tmp_path: Path,
) -> None:
    """KIP-534: the first pass keeps every latest tombstone, however old its timestamp, and
    stamps its batch with the horizon (now + ``delete.retention.ms``: attributes bit 6, base
    timestamp); a later pass at or past the horizon removes it."""
    log = _open(tmp_path, **{"delete.retention.ms": str(DAY_MS)})
    old = NOW_MS - 2 * DAY_MS
    _put(log, b"gone", b"x", ts=old)
    _put(log, b"gone", None, ts=old)  # stamped two retention periods ago: kept all the same
    _put(log, b"fresh", b"x")
    _put(log, b"fresh", None)
    for i in range(30):
        _put(log, b"filler%d" % i, b"v")
    first = log.compact(NOW_MS, high_watermark=log.log_end_offset)
    assert first is not None
    keys = (b"gone", b"fresh")
    assert [r for r in _all(log) if r[1] in keys] == [(1, b"gone", None), (3, b"fresh", None)]
    horizon = NOW_MS + DAY_MS
    assert _tombstone_batches(log, keys) == [(1, horizon), (3, horizon)]
    # the records keep their own timestamps: readers add the deltas to the horizon
    data = log.read(1, 1 << 20)
    assert [r[1] for r in record_tuples(data, 0)] == [old]
    got, _, error = decode_partition_records(TopicPartition("t", 0), data, 1)
    assert error is None and got[0].timestamp == old
    # kraft dump-log shows the horizon as Kafka's kafka-dump-log does, and the record's time
    dumped = [
        b
        for b in describe_segment(tmp_path / segment_file_name(0), records=True)
        if isinstance(b, dict) and b["base_offset"] == 1
    ]
    assert dumped[0]["delete_horizon_ms"] == horizon
    assert [r["timestamp_ms"] for r in dumped[0]["records"]] == [old]
    assert f"deleteHorizonMs: OptionalLong[{horizon}] " in dump_line(dumped[0])
    # a pass before the horizon (the log dirty again) keeps them and rewrites nothing of them
    for i in range(30):
        _put(log, b"filler%d" % i, b"w")
    assert log.compact(horizon - 1, high_watermark=log.log_end_offset) is not None
    assert _tombstone_batches(log, keys) == [(1, horizon), (3, horizon)]
    for i in range(30):
        _put(log, b"filler%d" % i, b"x")
    assert log.compact(horizon, high_watermark=log.log_end_offset) is not None
    assert _tombstone_batches(log, keys) == []
    log.close()


def _batch_at(offset: int, records: list[SimpleRecord], **kw: int) -> bytes:
    batch = bytearray(build_batch(records, timestamp_ms=records[0].timestamp_ms, **kw))  # type: ignore[arg-type]
    set_base_offset(batch, offset)
    return bytes(batch)


def test_the_first_pass_stamps_a_delete_horizon_only_where_a_tombstone_stays() -> None:
    """The pure rule (Kafka's ``MemoryRecords.filterTo`` with the cleaner's filter): a batch
    that keeps a tombstone and has no horizon is rewritten with one (bit 6, base timestamp =
    now + ``delete.retention.ms``, deltas relative to it); a batch without tombstones is copied
    as it is; a batch that has its horizon and loses nothing is not rewritten; a batch that
    loses records keeps its horizon."""
    config = LogConfig.from_properties({"cleanup.policy": "compact", "delete.retention.ms": "500"})
    stamped = 1_000  # long before now: still kept on the first pass
    data = _batch_at(
        0,
        [
            SimpleRecord(key=b"a", value=b"1", timestamp_ms=stamped),
            SimpleRecord(key=b"b", value=None, timestamp_ms=stamped + 7),
        ],
    ) + _batch_at(2, [SimpleRecord(key=b"c", value=b"2", timestamp_ms=stamped)])
    offsets = OffsetMap()
    assert map_keys(data, offsets, end_offset=3) is None
    offsets.end_offset = 3
    cleaned = clean_batches(data, offsets, config, now_ms=NOW_MS)
    assert cleaned is not None
    out, removed = cleaned
    assert removed == 0
    (p0, h0), (p1, h1) = iter_batches(out)
    assert h0.delete_horizon_ms == h0.base_timestamp_ms == NOW_MS + 500
    assert h0.attributes & 0x40 and h0.max_timestamp_ms == stamped + 7
    assert [(r[0], r[1], r[2], r[3]) for r in record_tuples(out, p0)] == [
        (0, stamped, b"a", b"1"),
        (1, stamped + 7, b"b", None),
    ]
    validate_batch(out, p0)
    # a real client's decoder (kafka-python's) reads each record's own timestamp too
    client_batch = MemoryRecords(out).next_batch()
    assert [(r.offset, r.timestamp) for r in client_batch] == [(0, stamped), (1, stamped + 7)]
    second = next(pos for pos, h in iter_batches(data) if h.base_offset == 2)
    assert h1.delete_horizon_ms is None and out[p1:] == data[second:]  # no tombstone: as it was
    # before the horizon nothing changes: the stamped batch is not rewritten again
    assert clean_batches(out, offsets, config, now_ms=NOW_MS + 499) is None
    # a newer "a" supersedes a record: the batch is rewritten and keeps its horizon
    offsets.put(b"a", 5)
    offsets.end_offset = 6
    again = clean_batches(out, offsets, config, now_ms=NOW_MS + 499)
    assert again is not None and again[1] == 1
    ((p, h), _) = iter_batches(again[0])
    assert h.delete_horizon_ms == NOW_MS + 500
    assert [r[:4] for r in record_tuples(again[0], p)] == [(1, stamped + 7, b"b", None)]
    # at the horizon the tombstone goes: the batch empties (no horizon on an empty batch)
    gone = clean_batches(again[0], offsets, config, now_ms=NOW_MS + 500)
    assert gone is not None and gone[1] == 1
    ((_, empty), _) = iter_batches(gone[0])
    assert (empty.record_count, empty.delete_horizon_ms, empty.next_offset) == (0, None, 2)


def test_emptied_batches_keep_their_offsets_and_a_producers_last_sequence(tmp_path: Path) -> None:
    """Kafka keeps a producer's last batch even when the cleaner empties it (its sequence is
    the producer state a replica rebuilds from the log); other emptied batches of one leader
    epoch merge into one empty batch, so what an emptied batch costs stays bounded."""
    log = _open(tmp_path)
    _put(log, b"a", b"0", producer_id=7, producer_epoch=0, base_sequence=0)
    _put(log, b"a", b"1", producer_id=7, producer_epoch=0, base_sequence=1)  # 7's last batch
    _put(log, b"a", b"2")
    _put(log, b"a", b"3", producer_id=8, producer_epoch=0, base_sequence=5)
    _put(log, b"a", b"4", producer_id=8, producer_epoch=0, base_sequence=6)
    compressed = build_batch(
        [SimpleRecord(key=b"b", value=b"x"), SimpleRecord(key=b"a", value=b"5")],
        timestamp_ms=NOW_MS,
        compression=Compression.ZSTD,
    )
    log.append(compressed)
    _put(log, b"c", b"6", producer_id=8, producer_epoch=0, base_sequence=7)  # 8's last batch
    for i in range(30):
        _put(log, b"z%d" % i, b"v")
    log.compact(NOW_MS, high_watermark=log.log_end_offset)
    data, offset = b"", 0
    while offset < 8:  # reads stay within a segment: read on until offset 8
        data += log.read(offset, 1 << 20)
        headers = [h for _, h in iter_batches(data)]
        offset = headers[-1].next_offset
    spans = [(h.base_offset, h.next_offset, h.record_count, h.producer_id) for h in headers[:5]]
    assert spans == [
        (0, 1, 0, -1),  # producer 7's first batch: merged (alone here)
        (1, 2, 0, 7),  # 7's last batch keeps its header ...
        (2, 5, 0, -1),  # ... and the next three emptied batches merge into one
        (5, 7, 2, -1),
        (7, 8, 1, 8),
    ]
    assert (headers[1].producer_epoch, headers[1].base_sequence) == (0, 1)
    assert headers[3].compression is Compression.ZSTD
    position = sum(h.size_bytes for h in headers[:3])
    assert [r[:3] for r in record_tuples(data, position)] == [(5, NOW_MS, b"b"), (6, NOW_MS, b"a")]
    log.close()


@pytest.mark.parametrize("leftover", [CLEANED_SUFFIX, SWAP_SUFFIX, "step 3"])
def test_a_crash_in_the_middle_of_a_swap_leaves_the_old_or_the_new_segment(
    tmp_path: Path, leftover: str
) -> None:
    """The swap is Kafka's: ``.cleaned`` written and synced, renamed ``.swap``, then renamed
    over the segment. Recovery deletes a ``.cleaned`` (the old segment stays) and finishes a
    ``.swap`` (the new one replaces the old, its indexes rebuilt)."""
    log = _open(tmp_path)
    for i in range(60):
        _put(log, b"k%d" % (i % 3), b"v%d" % i)
    original = _all(log)
    twin = tmp_path / "twin"
    twin_log = _open(twin)
    for i in range(60):
        _put(twin_log, b"k%d" % (i % 3), b"v%d" % i)
    twin_log.compact(NOW_MS, high_watermark=60)
    cleaned_first = (twin / segment_file_name(0)).read_bytes()
    twin_log.close()
    log.flush()
    original_first_end = log.segments[0].next_offset
    swap = write_swap_file(tmp_path, 0, cleaned_first)  # steps 1-2, then a crash
    if leftover == CLEANED_SUFFIX:
        swap.rename(swap.with_name(swap.name.replace(SWAP_SUFFIX, CLEANED_SUFFIX)))
    log.abandon()
    if leftover == "step 3":  # the crash came after deleting one later member of the group
        for suffix in (".log", ".index", ".timeindex"):
            (tmp_path / segment_file_name(original_first_end, suffix)).unlink(missing_ok=True)
    recovered = _open(tmp_path)
    assert not list(tmp_path.glob("*.cleaned")) and not list(tmp_path.glob("*.swap"))
    assert recovered.log_end_offset == 60
    first_segment_end = recovered.segments[0].next_offset
    records = _all(recovered)
    if leftover == CLEANED_SUFFIX:
        assert records == original
    else:
        assert [r for r in records if r[0] >= first_segment_end] == [
            r for r in original if r[0] >= first_segment_end
        ]
        assert len([r for r in records if r[0] < first_segment_end]) < first_segment_end
        assert (tmp_path / segment_file_name(0, ".index")).exists()  # rebuilt
        # the swap was a merged group: the later segments it covers were deleted
        assert first_segment_end > original_first_end
        assert not (tmp_path / segment_file_name(original_first_end)).exists()
    recovered.compact(NOW_MS, high_watermark=60)  # and cleaning goes on from there
    assert len({k for _, k, _ in _all(recovered)}) == 3
    recovered.close()


def test_clean_log_resumes_from_its_checkpoint_and_a_truncated_log_restarts_it(
    tmp_path: Path,
) -> None:
    log = _open(tmp_path, **{"min.cleanable.dirty.ratio": "0.5"})
    for i in range(40):
        _put(log, b"k", b"v%d" % i)
    first = log.compact(NOW_MS, high_watermark=log.log_end_offset)
    assert first is not None and first.first_dirty_offset == 0
    assert (tmp_path / "cleaner-offset-checkpoint").exists()
    for i in range(40):
        _put(log, b"k", b"w%d" % i)
    second = log.compact(NOW_MS, high_watermark=log.log_end_offset)
    assert second is not None and second.first_dirty_offset == first.end_offset
    log.truncate_fully_and_start_at(0)
    for i in range(20):
        _put(log, b"k", b"x%d" % i)
    third = clean_log(
        tmp_path,
        log._segments,  # the cleaner's own entry point, below the log's method
        log.config,
        log_start_offset=0,
        high_watermark=log.log_end_offset,
        now_ms=NOW_MS,
    )
    assert third is not None and third.first_dirty_offset == 0
    log.close()


def test_a_compact_only_log_is_not_deleted_by_retention(tmp_path: Path) -> None:
    log = _open(tmp_path, **{"retention.ms": "0"})
    for i in range(40):
        _put(log, b"k%d" % i, b"v", ts=1)
    assert log.apply_retention(NOW_MS, high_watermark=40) == 0
    log.close()
    both = _open(tmp_path, **{"retention.ms": "0", "cleanup.policy": "compact,delete"})
    assert both.apply_retention(NOW_MS, high_watermark=40) > 0
    both.close()


def _txn_at(offset: int, key: bytes, value: bytes, pid: int = 7) -> bytes:
    return _batch_at(
        offset,
        [SimpleRecord(key=key, value=value, timestamp_ms=NOW_MS)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=offset,
        is_transactional=True,
    )


def _marker_at(offset: int, *, commit: bool, pid: int = 7) -> bytes:
    batch = bytearray(
        build_marker_batch(
            commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp_ms=1
        )
    )
    set_base_offset(batch, offset)
    return bytes(batch)


def _pass(data: bytes, end: int) -> tuple[bytes, int, OffsetMap]:
    """One pure pass over ``data`` as `storage.log_cleaner.run_clean` makes it."""
    offsets = OffsetMap()
    scan_transactions(data, offsets)
    unresolved = offsets.first_unresolved(0)
    end = end if unresolved is None else min(end, unresolved)
    assert map_keys(data, offsets, end_offset=end) is None
    offsets.end_offset = end
    cleaned = clean_batches(data, offsets, COMPACT, now_ms=NOW_MS)
    return (data, 0, offsets) if cleaned is None else (*cleaned, offsets)


def _survivors(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    return [
        r[0:1] + r[2:4]
        for pos, h in iter_batches(data)
        if not h.is_control
        for r in record_tuples(data, pos)
    ]


def test_an_aborted_transaction_neither_shadows_a_committed_value_nor_survives() -> None:
    """Kafka's cleaner maps no record of an aborted transaction and removes them: kraft mapped
    them, so an aborted ``k`` was kept as the latest and the committed ``k`` removed (a
    read_committed reader then had no value for ``k``). A committed transaction's record still
    supersedes an older plain one; markers stay; offsets stay contiguous."""
    data = b"".join(
        [
            _batch_at(0, [SimpleRecord(key=b"k", value=b"plain", timestamp_ms=NOW_MS)]),
            _txn_at(1, b"k", b"committed"),
            _marker_at(2, commit=True),
            _txn_at(3, b"k", b"aborted"),
            _txn_at(4, b"j", b"aborted too"),
            _marker_at(5, commit=False),
        ]
    )
    out, removed, offsets = _pass(data, end=6)
    assert offsets.aborted_batches == {3, 4}
    assert (removed, _survivors(out)) == (3, [(1, b"k", b"committed")])
    headers = [h for _, h in iter_batches(out)]
    assert [h.base_offset for h in headers if h.is_control] == [2, 5]
    assert [(h.base_offset, h.next_offset) for h in headers] == [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 5),  # the aborted batches' offsets, as one empty batch
        (5, 6),
    ]


def test_a_transaction_whose_marker_is_past_the_range_ends_the_pass_before_it() -> None:
    """An open transaction (or one whose marker is not in the range, e.g. above the high
    watermark) may still abort: the pass maps and removes nothing from its first batch on."""
    data = b"".join(
        [
            _batch_at(0, [SimpleRecord(key=b"k", value=b"old", timestamp_ms=NOW_MS)]),
            _batch_at(1, [SimpleRecord(key=b"k", value=b"plain", timestamp_ms=NOW_MS)]),
            _txn_at(2, b"k", b"open"),
            _batch_at(3, [SimpleRecord(key=b"k", value=b"after", timestamp_ms=NOW_MS)]),
        ]
    )
    out, removed, offsets = _pass(data, end=4)
    assert offsets.end_offset == 2 and offsets.aborted_batches == set()
    assert (removed, _survivors(out)) == (
        1,
        [(1, b"k", b"plain"), (2, b"k", b"open"), (3, b"k", b"after")],
    )


def test_the_cleaner_stops_at_an_open_transaction_on_a_real_log(tmp_path: Path) -> None:
    """`clean_log` on a log whose transaction has no marker yet: the open transaction's record
    and everything after it stay, and the checkpointed end is its first offset (the broker
    passes the last stable offset as the bound: `PartitionReplica.prepare_compaction`)."""
    log = _open(tmp_path, **{"segment.bytes": "200"})
    for i in range(3):
        _put(log, b"k", b"plain%d" % i)
    log.append(_txn_at(log.log_end_offset, b"k", b"open"))
    for i in range(4):
        _put(log, b"k", b"after%d" % i)
    assert log.compact(NOW_MS, high_watermark=log.log_end_offset) is not None
    values = [v for _, k, v in _all(log) if k == b"k"]
    assert values[:2] == [b"plain2", b"open"] and values[-1] == b"after3"
    assert read_offset(tmp_path / CLEANER_OFFSET_CHECKPOINT) == 3
    log.close()
