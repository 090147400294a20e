"""Unit tests of `SegmentedLog`: appends, reads, rolls, retention, truncation, time lookups."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from storage.errors import (
    CorruptRecordError,
    InvalidOffsetError,
    InvalidRecordError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, SegmentedLog
from storage.log_loader import RECOVERY_POINT_CHECKPOINT
from storage.log_read import EARLIEST_LOCAL_TIMESTAMP, MAX_TIMESTAMP
from storage.records import build_batch, iter_batches, read_header
from storage.segment import segment_file_name
from tests.storage.test_log_builders import (
    FakeClock,
    LogBuilder,
    assert_indexes_agree_with_scan,
    make_batch,
    read_all,
    read_offset_index,
)


def headers(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for _, h in iter_batches(data)]


# --- appends ------------------------------------------------------------------------------------


def test_append_assigns_contiguous_offsets_and_returns_each_base_offset(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).build()
    assert log.append(make_batch(3)) == 0
    assert log.append(make_batch(2, base_offset=999)) == 3
    assert log.log_end_offset == 5
    assert [(h.base_offset, h.last_offset) for h, _ in read_all(log)] == [(0, 2), (3, 4)]


def test_append_of_concatenated_batches_writes_them_all_and_returns_the_first_offset(
    tmp_path: Path,
) -> None:
    log = LogBuilder(tmp_path).with_batches(1, records=2).build()
    assert log.append(make_batch(1) + make_batch(4) + make_batch(2)) == 2
    assert headers(log.read(2, 1 << 20)) == [(2, 2), (3, 6), (7, 8)]


def test_append_rejects_a_batch_with_a_bad_crc_and_writes_nothing(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).build()
    bad = bytearray(make_batch(2))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(make_batch(1) + bytes(bad))
    assert log.log_end_offset == 0 and log.segments[0].size_bytes == 0


def test_append_rejects_a_truncated_batch(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).build()
    with pytest.raises(CorruptRecordError):
        log.append(make_batch(2)[:-3])
    with pytest.raises(InvalidRecordError):
        log.append(b"")


def test_append_rejects_a_batch_over_max_message_bytes(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_config(max_message_bytes=200).build()
    log.append(make_batch(1, 50))
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch(1, 300))
    assert log.log_end_offset == 1


def test_append_rejects_an_append_larger_than_a_segment(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_config(segment_bytes=500).build()
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch(1, 200) * 3)


def _damaged(batch: bytes, position: int, xor: int) -> bytes:
    out = bytearray(batch)
    out[position] ^= xor
    return bytes(out)


@pytest.mark.parametrize(
    ("damage", "error"),
    [
        (lambda b: _damaged(b, -1, 0xFF), CorruptRecordError),  # last record byte: CRC fails
        (lambda b: _damaged(b, 25, 0x01), CorruptRecordError),  # the attributes: CRC fails
        (lambda b: _damaged(b, 20, 0x01), CorruptRecordError),  # the CRC field itself
        (lambda b: _damaged(b, 16, 0x03), CorruptRecordError),  # magic 2 -> 1
        (lambda b: _damaged(b, 23, 0x80), CorruptRecordError),  # last offset delta < 0
        (lambda b: b[:-1], CorruptRecordError),  # length field past the end
        (lambda b: b + b"\0", CorruptRecordError),  # a trailing byte no batch holds
    ],
    ids=["record", "attributes", "crc", "magic", "offset-delta", "truncated", "trailing-byte"],
)
def test_a_lone_damaged_batch_is_refused_and_nothing_is_written(
    tmp_path: Path, damage: Callable[[bytes], bytes], error: type[Exception]
) -> None:
    """One batch per call takes the append's one-batch path (`checked_single_batch`; a length
    field that does not span the call sends it to the multi-batch path): it must refuse what
    the multi-batch path refuses, before a byte reaches the file."""
    log = LogBuilder(tmp_path).with_batches(1, records=2).build()
    size = log.segments[0].size_bytes
    with pytest.raises(error):
        log.append(damage(make_batch(3, 50)))
    assert log.log_end_offset == 2 and log.segments[0].size_bytes == size
    assert log.append(make_batch(1)) == 2


@pytest.mark.parametrize("leader_epoch", [None, 4])
def test_one_batch_appends_write_the_bytes_a_multi_batch_append_writes(
    tmp_path: Path, leader_epoch: int | None
) -> None:
    """The one-batch path writes a new head (base offset, leader epoch) before the rest of
    the batch: the file must hold the same bytes, and the epoch cache the same entries, as
    when the batches come in one call (which rewrites a copy of the whole)."""
    batches = [
        make_batch(3, base_offset=999, epoch=2, timestamp_ms=5),
        make_batch(1, base_offset=0, epoch=3, timestamp_ms=9),
        make_batch(2, base_offset=7, epoch=3, timestamp_ms=7),
    ]
    one_by_one = LogBuilder(tmp_path / "single").build()
    for batch in batches:
        one_by_one.append(batch, leader_epoch=leader_epoch)
    together = LogBuilder(tmp_path / "many").build()
    together.append(b"".join(batches), leader_epoch=leader_epoch)
    name = segment_file_name(0)
    assert (tmp_path / "single" / name).read_bytes() == (tmp_path / "many" / name).read_bytes()
    assert [h.base_offset for h, _ in read_all(one_by_one)] == [0, 3, 4]
    assert [h.partition_leader_epoch for h, _ in read_all(one_by_one)] == (
        [2, 3, 3] if leader_epoch is None else [4, 4, 4]
    )
    assert one_by_one.leader_epoch_cache.entries == together.leader_epoch_cache.entries
    assert one_by_one.read(0, 1 << 20) == together.read(0, 1 << 20)


def test_leader_append_stamps_the_leader_epoch_and_records_its_start(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).build()
    log.append(make_batch(2), leader_epoch=3)
    log.append(make_batch(2), leader_epoch=3)
    log.append(make_batch(1), leader_epoch=5)
    assert [h.partition_leader_epoch for h, _ in read_all(log)] == [3, 3, 5]
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(3, 0), (5, 4)]
    assert log.end_offset_for_epoch(3) == (3, 4)
    assert log.end_offset_for_epoch(5) == (5, 5)


def test_follower_append_keeps_offsets_and_epochs_from_the_batches(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).build()
    fetched = make_batch(2, epoch=1, base_offset=0) + make_batch(3, epoch=2, base_offset=2)
    assert log.append_as_follower(fetched) == 0
    assert log.log_end_offset == 5
    assert log.read(0, 1 << 20) == fetched
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(1, 0), (2, 2)]


def test_follower_append_rejects_batches_not_contiguous_with_the_log_end(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_batches(2).build()
    with pytest.raises(InvalidOffsetError):
        log.append_as_follower(make_batch(1, base_offset=3))
    with pytest.raises(InvalidOffsetError):
        log.append_as_follower(make_batch(1, base_offset=2) + make_batch(1, base_offset=4))
    assert log.log_end_offset == 2


# --- reads --------------------------------------------------------------------------------------


def test_read_from_the_middle_of_a_batch_returns_the_containing_batch(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_batches(5, records=10).build()
    assert headers(log.read(23, 1)) == [(20, 29)]
    assert headers(log.read(29, 1 << 20))[0] == (20, 29)


def test_read_returns_one_whole_batch_even_when_larger_than_max_bytes(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_batches(3, records=5, value_size=1000).build()
    data = log.read(5, 100)
    assert headers(data) == [(5, 9)]
    assert len(data) == read_header(data).size_bytes


def test_read_without_min_one_reads_no_batch_larger_than_max_bytes(tmp_path: Path) -> None:
    """Kafka's minOneMessage = false (a follower fetch's partitions after the first with
    records, KIP-74): a first batch past ``max_bytes`` is not read at all, whether it ends past
    the bytes read or inside them; what fits is read as with it."""
    log = LogBuilder(tmp_path).with_batches(3, records=5, value_size=1000).build()
    size = len(log.read(5, 1))
    assert log.read(5, 100, min_one=False) == b""
    assert log.read(5, size - 1, min_one=False) == b""
    assert headers(log.read(5, size, min_one=False)) == [(5, 9)]
    assert log.read(5, size * 2, min_one=False) == log.read(5, size * 2)


def test_read_returns_only_whole_batches_within_max_bytes(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_batches(20, value_size=100).build()
    size = len(log.read(0, 1))
    data = log.read(0, size * 3 + size // 2)
    assert headers(data) == [(0, 0), (1, 1), (2, 2)]


def test_read_stops_before_batches_at_or_above_max_offset(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_batches(4, records=5).build()
    assert headers(log.read(0, 1 << 20, max_offset=12)) == [(0, 4), (5, 9), (10, 14)]
    assert headers(log.read(0, 1 << 20, max_offset=10)) == [(0, 4), (5, 9)]
    assert log.read(10, 1 << 20, max_offset=10) == b""


def test_read_at_the_log_end_offset_returns_nothing(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_batches(2).build()
    assert log.read(2, 1 << 20) == b""


def test_read_outside_the_log_raises_offset_out_of_range_with_the_valid_range(
    tmp_path: Path,
) -> None:
    log = LogBuilder(tmp_path).with_batches(10).build()
    log.advance_log_start_offset(4)
    for offset in (3, 11):
        with pytest.raises(OffsetOutOfRangeError) as e:
            log.read(offset, 100)
        assert (e.value.log_start_offset, e.value.log_end_offset) == (4, 10)


def test_sequential_reads_return_every_batch_across_segments(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_config(segment_bytes=2000).with_batches(200, value_size=50)
    built = log.with_config(index_interval_bytes=300).build()
    assert len(built.segments) > 5
    batches = read_all(built, max_bytes=700)
    assert [h.base_offset for h, _ in batches] == list(range(200))


def test_reads_agree_with_a_full_scan_for_every_offset(tmp_path: Path) -> None:
    builder = LogBuilder(tmp_path).with_config(segment_bytes=3000, index_interval_bytes=200)
    log = builder.build()
    for i in range(60):
        log.append(make_batch(1 + i % 4, 20 + 7 * i))
    scanned = read_all(log)
    for offset in range(log.log_end_offset):
        expected = next(b for h, b in scanned if h.base_offset <= offset <= h.last_offset)
        assert log.read(offset, 1) == expected


# --- rolls --------------------------------------------------------------------------------------


def test_segment_rolls_when_an_append_would_exceed_segment_bytes(tmp_path: Path) -> None:
    size = len(make_batch(1, 100))
    log = LogBuilder(tmp_path).with_config(segment_bytes=size * 3).with_batches(7, value_size=100)
    built = log.build()
    assert [(s.base_offset, s.next_offset) for s in built.segments] == [(0, 3), (3, 6), (6, 7)]
    assert all(s.size_bytes <= size * 3 for s in built.segments)
    assert (tmp_path / segment_file_name(3)).exists()


def test_segment_rolls_when_older_than_segment_ms_by_the_injected_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    log = LogBuilder(tmp_path).with_clock(clock).with_config(segment_ms=1000).build()
    log.append(make_batch())
    clock.advance(1000)
    log.append(make_batch())
    assert len(log.segments) == 1
    clock.advance(1)
    log.append(make_batch())
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_segment_rolls_when_its_index_is_full(tmp_path: Path) -> None:
    builder = LogBuilder(tmp_path).with_config(index_interval_bytes=0, segment_index_bytes=24)
    # 3 offset-index entries fit: batches 1..3 get one each, so the 5th append rolls.
    log = builder.with_batches(9).build()
    assert [s.base_offset for s in log.segments] == [0, 4, 8]


# --- retention ----------------------------------------------------------------------------------


def test_retention_by_ms_deletes_old_segments_and_advances_the_log_start(tmp_path: Path) -> None:
    clock = FakeClock(now_ms=10_000)
    size = len(make_batch())
    log = (
        LogBuilder(tmp_path)
        .with_clock(clock)
        .with_config(segment_bytes=size * 2, retention_ms=5_000)
        .build()
    )
    for ts in (1_000, 2_000, 8_000, 9_000, 9_500):
        log.append(make_batch(timestamp_ms=ts))
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    assert log.apply_retention(now_ms=10_000) == 1
    assert log.log_start_offset == 2 and [s.base_offset for s in log.segments] == [2, 4]
    assert not (tmp_path / segment_file_name(0)).exists()
    assert log.apply_retention(now_ms=10_000) == 0


def test_retention_by_bytes_keeps_at_least_retention_bytes(tmp_path: Path) -> None:
    size = len(make_batch())
    log = (
        LogBuilder(tmp_path)
        .with_config(segment_bytes=size * 2, retention_bytes=size * 3, retention_ms=-1)
        .with_batches(7)
        .build()
    )
    assert log.apply_retention() == 2
    assert log.log_start_offset == 4 and log.size_bytes == size * 3


def test_retention_never_deletes_the_active_segment(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_config(retention_bytes=0, retention_ms=0).with_batches(5)
    built = log.build()
    assert built.apply_retention(now_ms=10**15) == 0
    assert built.log_start_offset == 0 and built.log_end_offset == 5


def test_retention_keeps_segments_at_or_above_the_high_watermark(tmp_path: Path) -> None:
    size = len(make_batch())
    log = LogBuilder(tmp_path).with_config(segment_bytes=size * 2, retention_bytes=0)
    built = log.with_batches(6).build()
    assert built.apply_retention(high_watermark=3) == 1
    assert built.log_start_offset == 2


def test_advancing_the_log_start_offset_deletes_whole_segments_below_and_trims_epochs(
    tmp_path: Path,
) -> None:
    size = len(make_batch())
    log = LogBuilder(tmp_path).with_config(segment_bytes=size * 2).build()
    for epoch in (1, 1, 2, 2, 3, 3):
        log.append(make_batch(), leader_epoch=epoch)
    assert log.delete_records_before(3)
    assert [s.base_offset for s in log.segments] == [2, 4]
    assert log.log_start_offset == 3
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(2, 3), (3, 4)]
    assert not log.advance_log_start_offset(2)
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_log_start_offset(7)
    log.close()
    assert SegmentedLog.open(tmp_path).log_start_offset == 3


# --- truncation ---------------------------------------------------------------------------------


def test_truncate_to_removes_later_segments_and_the_tail_of_the_containing_one(
    tmp_path: Path,
) -> None:
    size = len(make_batch())
    log = LogBuilder(tmp_path).with_config(segment_bytes=size * 2).build()
    for epoch in (1, 1, 2, 2, 3, 3, 4):
        log.append(make_batch(), leader_epoch=epoch)
    assert log.truncate_to(3)
    assert log.log_end_offset == 3
    assert [(s.base_offset, s.next_offset) for s in log.segments] == [(0, 2), (2, 3)]
    assert [e.epoch for e in log.leader_epoch_cache.entries] == [1, 2]
    assert not (tmp_path / segment_file_name(4)).exists()
    assert log.append(make_batch(), leader_epoch=5) == 3
    assert [h.base_offset for h, _ in read_all(log)] == [0, 1, 2, 3]
    assert_indexes_agree_with_scan(log)


def test_truncate_to_the_middle_of_a_batch_drops_the_whole_batch(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_batches(3, records=5).build()
    log.truncate_to(7)
    assert log.log_end_offset == 5


def test_truncate_to_at_or_beyond_the_log_end_is_a_no_op(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_batches(3).build()
    assert not log.truncate_to(3) and not log.truncate_to(10)
    with pytest.raises(InvalidOffsetError):
        log.truncate_to(-1)


def test_truncate_to_the_log_end_drops_an_epoch_entry_starting_there(tmp_path: Path) -> None:
    """A replica that led epoch 4 and appended nothing keeps the entry (4, LEO): a truncation
    to the log end removes it (Kafka's ``UnifiedLog.truncateTo``), else the follower keeps
    fetching with last epoch 4 and the leader keeps answering the same diverging epoch."""
    log = LogBuilder(tmp_path).with_batches(3, epoch=2).build()
    assert log.assign_leader_epoch(4, 3)
    assert not log.truncate_to(3)  # no offset removed
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(2, 0)]
    log.close()
    assert SegmentedLog.open(tmp_path).leader_epoch_cache.latest_epoch == 2


def test_truncate_fully_and_start_at_empties_the_log_at_that_offset(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_config(segment_bytes=200).with_batches(5, epoch=2).build()
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert [s.base_offset for s in log.segments] == [100]
    assert log.leader_epoch_cache.entries == []
    assert log.append(make_batch(), leader_epoch=3) == 100
    log.close()
    again = SegmentedLog.open(tmp_path)
    assert (again.log_start_offset, again.log_end_offset) == (100, 101)


# --- indexes and timestamps ---------------------------------------------------------------------


def test_index_entries_are_sparse_and_agree_with_a_scan(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_config(index_interval_bytes=500).with_batches(40, value_size=90)
    built = log.build()
    built.flush()
    entries = read_offset_index(tmp_path, 0)
    batch_size = len(make_batch(1, 90))
    assert 40 * batch_size // (500 + batch_size) <= len(entries) < 40
    assert_indexes_agree_with_scan(built)


def test_one_batch_appends_index_as_a_rebuild_from_the_file_does(tmp_path: Path) -> None:
    """The one-batch append path keeps its own index bookkeeping (no spans): its entries, and
    the roll when the time index fills first, must match what a recovery rebuilds."""
    builder = LogBuilder(tmp_path).with_config(index_interval_bytes=0, segment_index_bytes=36)
    log = builder.build()
    for ts in (5, 3, 7, 7, 9, 2, 11, 12, 13, 20, 1, 30, 31, 32):  # out of order, repeats
        log.append(make_batch(timestamp_ms=ts))
    # 36 bytes hold 4 offset-index entries but only 3 time-index entries: the time index
    # fills first and rolls the segment
    bases = [s.base_offset for s in log.segments]
    assert bases == [0, 5, 9, 13], bases

    def index_files() -> dict[int, tuple[list[tuple[int, int]], bytes]]:
        files = {}
        for base in bases:
            times = tmp_path / segment_file_name(base, ".timeindex")
            files[base] = (
                read_offset_index(tmp_path, base),
                times.read_bytes() if times.exists() else b"",
            )
            times.unlink(missing_ok=True)
            (tmp_path / segment_file_name(base, ".index")).unlink(missing_ok=True)
        return files

    log.flush()
    ours = index_files()
    log.abandon()
    (tmp_path / RECOVERY_POINT_CHECKPOINT).unlink()  # recover every segment from its start
    rebuilt = SegmentedLog.open(tmp_path, builder.config)
    rebuilt.flush()
    assert index_files() == ours
    assert sum(len(entries) for entries, _ in ours.values()) > 8
    rebuilt.abandon()


def test_offset_for_timestamp_finds_the_first_record_at_or_after_it(tmp_path: Path) -> None:
    builder = LogBuilder(tmp_path).with_config(segment_bytes=600, index_interval_bytes=100)
    log = builder.build()
    for i in range(20):  # records at 1000, 1010, ..., two per batch, five ms apart
        records = [b"v", b"w"]
        ts = 1000 + 10 * i
        log.append(build_batch(records, timestamp_ms=ts))
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == 0
    assert log.offset_for_timestamp(1000) == 0
    assert log.offset_for_timestamp(1001) == 2
    assert log.offset_for_timestamp(1100) == 20
    assert log.offset_for_timestamp(1190) == 38
    assert log.offset_for_timestamp(1191) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == 0
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == 40
    log.advance_log_start_offset(21)
    assert log.offset_for_timestamp(1000) == 21


def test_offset_for_timestamp_looks_inside_a_batch(tmp_path: Path) -> None:
    from storage.records import SimpleRecord

    log = LogBuilder(tmp_path).build()
    records = [SimpleRecord(value=b"x", timestamp_ms=ts) for ts in (100, 300, 200, 400)]
    log.append(build_batch(records, timestamp_ms=0))
    assert log.offset_for_timestamp(250) == 1
    assert log.offset_for_timestamp(301) == 3


def test_max_timestamp_finds_the_first_record_with_the_largest_timestamp(tmp_path: Path) -> None:
    from storage.records import SimpleRecord

    log = LogBuilder(tmp_path).with_config(segment_bytes=200).build()
    assert log.offset_for_timestamp(MAX_TIMESTAMP) is None  # an empty log
    for stamps in ((100, 500), (300, 200), (500, 400), (50,)):  # 500 at offsets 1 and 4
        records = [SimpleRecord(value=b"x" * 40, timestamp_ms=ts) for ts in stamps]
        log.append(build_batch(records, timestamp_ms=0))
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == 1  # the first of the two (KIP-734)
    log.advance_log_start_offset(2)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == 4
    assert log.offset_for_timestamp(EARLIEST_LOCAL_TIMESTAMP) == 2  # no remote tier


# --- flushing and lifecycle ---------------------------------------------------------------------


def test_flush_advances_the_recovery_point_and_checkpoints_it(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_batches(3).build()
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 3
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text().split() == ["0", "1", "3"]


def test_sync_every_append_makes_each_append_durable(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_config(sync_every_append=True).with_batches(2).build()
    assert log.recovery_point == 2


def test_sync_data_is_one_fdatasync_and_leaves_indexes_and_checkpoint_to_flush(
    tmp_path: Path,
) -> None:
    """A quorum replica's per-Ready sync: durable data, one fdatasync, no checkpoint write
    (a full `flush` on every Ready was most of a lone quorum write's latency, issue 12)."""
    from collections import Counter

    from storage.config import LogConfig
    from storage.file_io import FileIO

    class CountingIO(FileIO):
        def __init__(self) -> None:
            self.ops: Counter[str] = Counter()

        def check(self, op: str) -> None:
            self.ops[op] += 1

    io = CountingIO()
    log = SegmentedLog.open(tmp_path, LogConfig(), FakeClock(), file_io=io)
    log.append(make_batch(3))
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    before = checkpoint.read_text() if checkpoint.exists() else None
    io.ops.clear()
    log.sync_data()
    assert log.recovery_point == 3
    assert io.ops == Counter({"fdatasync": 1})
    assert (checkpoint.read_text() if checkpoint.exists() else None) == before
    log.abandon()  # a crash: nothing more is written
    reopened = SegmentedLog.open(tmp_path, LogConfig(), FakeClock())
    assert reopened.log_end_offset == 3


def test_flush_messages_flushes_after_that_many_records(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_config(flush_messages=5).build()
    log.append(make_batch(3))
    assert log.recovery_point == 0
    log.append(make_batch(2))
    assert log.recovery_point == 5


def test_flush_ms_flushes_when_the_last_flush_is_old_enough(tmp_path: Path) -> None:
    clock = FakeClock()
    log = LogBuilder(tmp_path).with_clock(clock).with_config(flush_ms=100).build()
    log.append(make_batch())
    assert not log.maybe_flush() and log.recovery_point == 0
    clock.advance(100)
    assert log.maybe_flush() and log.recovery_point == 1


def test_every_call_on_a_closed_log_raises_log_closed(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_batches(2).build()
    log.close()
    log.close()  # idempotent
    calls: list[Callable[[], object]] = [
        lambda: log.append(make_batch()),
        lambda: log.append_as_follower(make_batch(base_offset=2)),
        lambda: log.read(0, 100),
        log.flush,
        lambda: log.truncate_to(1),
        lambda: log.truncate_fully_and_start_at(5),
        lambda: log.advance_log_start_offset(1),
        log.apply_retention,
        lambda: log.offset_for_timestamp(0),
        lambda: log.end_offset_for_epoch(1),
    ]
    for call in calls:
        with pytest.raises(LogClosedError):
            call()


def test_clean_reopen_keeps_offsets_epochs_and_recovery_point(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path).with_config(segment_bytes=300).build()
    for epoch in (1, 1, 4, 4, 4, 6):
        log.append(make_batch(2), leader_epoch=epoch)
    before = read_all(log)
    log.close()
    again = SegmentedLog.open(tmp_path, log.config)
    assert again.had_clean_shutdown
    assert read_all(again) == before
    assert again.recovery_point == again.log_end_offset == 12
    assert [(e.epoch, e.start_offset) for e in again.leader_epoch_cache.entries] == [
        (1, 0),
        (4, 4),
        (6, 10),
    ]
    assert again.end_offset_for_epoch(2) == (1, 4)
    assert again.end_offset_for_epoch(0) == (0, 0)  # below the earliest epoch (1): KIP-279
    assert not (tmp_path / ".kafka_cleanshutdown").exists()


def test_read_of_a_batch_whose_length_was_corrupted_on_disk_is_an_error_not_a_huge_read(
    tmp_path: Path,
) -> None:
    """Issue 10: the broker's fetch path serves bytes and must not crash (or allocate 2 GiB)
    on a corrupt batch; the consumer gets CORRUPT_MESSAGE for that partition."""
    log = SegmentedLog.open(tmp_path)
    log.append(build_batch([b"a"], timestamp_ms=1))
    second = log.append(build_batch([b"b"], timestamp_ms=1))
    position = log.segments[-1].size_bytes - len(build_batch([b"b"], timestamp_ms=1))
    # The disk corrupts the batch length while the log is open (recovery would cut it).
    with (tmp_path / segment_file_name(0, ".log")).open("r+b") as f:
        f.seek(position + 8)
        f.write((2**31 - 1).to_bytes(4, "big"))
    try:
        assert log.read(0, 10)  # the good batch still reads
        with pytest.raises(CorruptRecordError):
            log.read(second, 1 << 20)
    finally:
        log.close()
