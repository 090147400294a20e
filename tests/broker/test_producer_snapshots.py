"""Producer-state snapshots on the broker (Kafka's ``<offset>.snapshot`` files): the file store,
loading (latest valid snapshot + replay), corrupt files, truncation, and a replica that
reopens from its snapshot instead of rescanning its log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kraft.metadata.image import PartitionRegistration
from kraft.raft_shell.clock import clock_ms
from replication.broker.replicas.partition import PartitionReplica
from replication.broker.replicas.producer_snapshots import (
    ProducerSnapshotStore,
    load_producer_state,
    scan_headers,
    snapshot_file_name,
)
from replication.core import (
    BrokerStatus,
    FollowerFetchRequest,
    FollowerFetchResponse,
    ProducerStateManager,
    ReplicationConfig,
)
from storage.config import LogConfig
from storage.errors import ErrorCode
from storage.log import SegmentedLog
from storage.records import read_header
from tests.replication.harness import TP, batch

PID = 7
SMALL_SEGMENTS = LogConfig(segment_bytes=400)
"""About four 5-record batches per segment: a roll every few appends."""


def idempotent(seq: int, *, count: int = 5, epoch: int = 0, pid: int = PID) -> bytes:
    return batch(b"v", producer_id=pid, producer_epoch=epoch, base_sequence=seq, count=count)


def fill_log(
    log: SegmentedLog, state: ProducerStateManager, batches: int, *, start: int = 0
) -> list[int]:
    """Append batches ``start .. start + batches - 1`` of two idempotent producers as a leader
    would; the state follows. Returns the log end offset after each append."""
    ends = []
    for i in range(start, start + batches):
        data = idempotent((i // 2) * 5, pid=PID + i % 2)
        base = log.append(data, leader_epoch=0)
        state.update(read_header(data), base)
        ends.append(log.log_end_offset)
    return ends


def full_rescan(log: SegmentedLog) -> ProducerStateManager:
    state = ProducerStateManager(map_end_offset=log.log_start_offset)
    state.load_from_batches(scan_headers(log, log.log_start_offset))
    return state


# --- the store ---------------------------------------------------------------------------------


def test_snapshot_files_are_named_by_offset_and_listed_in_order(tmp_path: Path) -> None:
    store = ProducerSnapshotStore(tmp_path)
    for offset in (30, 5, 120):
        store.write(offset, b"x%d" % offset)
    assert snapshot_file_name(5) == "00000000000000000005.snapshot"
    assert (tmp_path / "00000000000000000120.snapshot").read_bytes() == b"x120"
    again = ProducerSnapshotStore(tmp_path)
    assert again.offsets == [5, 30, 120]
    assert again.latest_at_or_below(29) == 5 and again.latest_at_or_below(4) is None
    assert again.delete_below(30) == 1 and again.delete_above(30) == 1
    assert again.offsets == [30] and ProducerSnapshotStore(tmp_path).offsets == [30]
    assert not list(tmp_path.glob("*.tmp"))


def test_a_torn_snapshot_temp_file_is_removed_when_the_log_opens(tmp_path: Path) -> None:
    (tmp_path / (snapshot_file_name(10) + ".tmp")).write_bytes(b"half")
    SegmentedLog.open(tmp_path).close()
    assert ProducerSnapshotStore(tmp_path).offsets == []
    assert not list(tmp_path.glob("*.tmp"))


# --- loading -----------------------------------------------------------------------------------


def test_loading_starts_at_the_latest_snapshot_and_replays_only_the_batches_after_it(
    tmp_path: Path,
) -> None:
    log = SegmentedLog.open(tmp_path, SMALL_SEGMENTS)
    state = ProducerStateManager()
    store = ProducerSnapshotStore(tmp_path)
    fill_log(log, state, 12)
    store.write(state.map_end_offset, state.snapshot())
    fill_log_more = [idempotent(30 + 5 * i) for i in range(3)]
    for data in fill_log_more:
        state.update(read_header(data), log.append(data, leader_epoch=0))
    loaded = ProducerStateManager()
    load = load_producer_state(loaded, log, store)
    assert load.snapshot_offset == 60
    assert load.batches_replayed == 3
    assert loaded.entries == state.entries == full_rescan(log).entries
    assert loaded.map_end_offset == log.log_end_offset


def test_a_corrupt_snapshot_is_deleted_and_an_older_one_used(tmp_path: Path) -> None:
    log = SegmentedLog.open(tmp_path, SMALL_SEGMENTS)
    state = ProducerStateManager()
    store = ProducerSnapshotStore(tmp_path)
    fill_log(log, state, 4)
    store.write(state.map_end_offset, state.snapshot())
    fill_log(log, state, 4, start=4)
    store.write(state.map_end_offset, state.snapshot())
    damaged = bytearray(store.path(40).read_bytes())
    damaged[-3] ^= 0xFF
    store.path(40).write_bytes(bytes(damaged))

    loaded = ProducerStateManager()
    load = load_producer_state(loaded, log, store)

    assert (load.snapshot_offset, load.corrupt_snapshots, load.batches_replayed) == (20, 1, 4)
    assert store.offsets == [20] and not store.path(40).exists()
    assert loaded.entries == full_rescan(log).entries


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage", "wrong_name"])
def test_with_no_usable_snapshot_the_state_is_rebuilt_from_the_whole_log(
    tmp_path: Path, damage: str
) -> None:
    log = SegmentedLog.open(tmp_path, SMALL_SEGMENTS)
    state = ProducerStateManager()
    store = ProducerSnapshotStore(tmp_path)
    fill_log(log, state, 6)
    good = state.snapshot()
    contents = {
        "empty": b"",
        "truncated": good[: len(good) // 2],
        "garbage": b"\x00\x01" * 40,
        "wrong_name": good,  # a valid snapshot of offset 30 under another offset's name
    }[damage]
    store.write(20 if damage == "wrong_name" else 30, contents)

    loaded = ProducerStateManager()
    load = load_producer_state(loaded, log, store)

    assert (load.snapshot_offset, load.corrupt_snapshots, load.batches_replayed) == (None, 1, 6)
    assert store.offsets == []
    assert loaded.entries == state.entries


def test_snapshots_beyond_the_log_end_or_below_its_start_are_not_used(tmp_path: Path) -> None:
    log = SegmentedLog.open(tmp_path, SMALL_SEGMENTS)
    state = ProducerStateManager()
    store = ProducerSnapshotStore(tmp_path)
    for i in range(4):
        fill_log(log, state, 3, start=3 * i)
        store.write(state.map_end_offset, state.snapshot())
    assert store.offsets == [15, 30, 45, 60]
    # Truncation, as the follower shell does it: snapshots above the point go first.
    store.delete_above(40)
    log.truncate_to(40)
    store.delete_above(log.log_end_offset)
    log.advance_log_start_offset(20)
    loaded = ProducerStateManager()
    load = load_producer_state(loaded, log, store)
    assert load.snapshot_offset == 30 and load.batches_replayed == 2
    assert store.offsets == [30]
    truncated = ProducerStateManager()
    fill_log(SegmentedLog.open(tmp_path / "reference", SMALL_SEGMENTS), truncated, 8)
    assert loaded.entries == truncated.entries


# --- a replica -----------------------------------------------------------------------------------

BROKERS = {1: BrokerStatus(broker_epoch=10), 2: BrokerStatus(broker_epoch=20)}


async def _no_fetch(request: FollowerFetchRequest) -> FollowerFetchResponse:
    raise AssertionError("a sole leader does not fetch")


def open_leader(directory: Path, config: LogConfig = SMALL_SEGMENTS) -> PartitionReplica:
    replica = PartitionReplica(
        topic_partition=TP,
        topic_id="tid",
        directory=directory,
        log_config=config,
        local_id=1,
        broker_epoch=10,
        fetch_from_leader=_no_fetch,
        send_alter_partition=lambda _replica, _send: None,
    )
    replica.apply_registration(
        PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=0),
        BROKERS,
        ReplicationConfig(),
    )
    return replica


async def produce_batches(replica: PartitionReplica, first_seq: int, batches: int) -> None:
    for i in range(batches):
        active = replica.log.active_segment_base_offset
        done = await replica.produce(1, 5_000, idempotent(first_seq + 5 * i))
        assert done.error_code is ErrorCode.NONE, done
        if replica.log.active_segment_base_offset != active:
            # A roll makes the replica due (the broker's tick task then snapshots)...
            deadline = replica.next_deadline_ms()
            assert deadline is not None and deadline <= clock_ms()
        replica.tick()  # ...which the tick does
        deadline = replica.next_deadline_ms()
        assert deadline is None or deadline > clock_ms()  # and then it is not due again


def test_a_replica_snapshots_when_its_log_rolls(tmp_path: Path) -> None:
    async def run() -> None:
        replica = open_leader(tmp_path)
        await produce_batches(replica, 0, 12)
        rolls = [s.base_offset for s in replica.log.segments[1:]]
        assert len(rolls) >= 2
        # One snapshot per roll, taken at the first tick after it (the offset it covers).
        assert len(replica.producer_snapshot_offsets) == len(rolls)
        for roll, snapshot in zip(rolls, replica.producer_snapshot_offsets, strict=True):
            assert roll <= snapshot <= roll + 5
        replica.stop()

    asyncio.run(run())


def test_a_cleanly_stopped_replica_reopens_from_its_snapshot_and_still_dedups(
    tmp_path: Path,
) -> None:
    """KIP-98: producer state survives a restart. A clean shutdown snapshots at the log end,
    so the reopened replica replays no batch, and a retry of a batch written before the
    restart is still answered as a duplicate with its original offset."""

    async def run() -> None:
        replica = open_leader(tmp_path)
        await produce_batches(replica, 0, 20)
        before = replica.producer_state.entries
        end = replica.log.log_end_offset
        replica.stop()

        reopened = open_leader(tmp_path)
        try:
            assert reopened.producer_state_load.snapshot_offset == end
            assert reopened.producer_state_load.batches_replayed == 0
            assert reopened.producer_state.entries == before
            retry = await reopened.produce(1, 5_000, idempotent(95))
            assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 95)
            assert reopened.log.log_end_offset == end
            gap = await reopened.produce(1, 100, idempotent(105))
            assert gap.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            follows = await reopened.produce(1, 5_000, idempotent(100))
            assert (follows.error_code, follows.base_offset) == (ErrorCode.NONE, 100)
        finally:
            reopened.stop()

    asyncio.run(run())


def test_after_a_crash_a_replica_replays_only_the_log_after_its_last_roll_snapshot(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        replica = open_leader(tmp_path)
        await produce_batches(replica, 0, 20)
        last_snapshot = replica.producer_snapshot_offsets[-1]
        before = replica.producer_state.entries
        replica.log.flush()  # what the page cache would keep across a process crash
        replica.log.abandon()  # no clean-shutdown snapshot, no marker

        reopened = open_leader(tmp_path)
        try:
            load = reopened.producer_state_load
            assert load.snapshot_offset == last_snapshot
            assert load.batches_replayed == (reopened.log.log_end_offset - last_snapshot) // 5
            assert 0 < load.batches_replayed < 20 // 2
            assert reopened.producer_state.entries == before
        finally:
            reopened.stop()

    asyncio.run(run())
