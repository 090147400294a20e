"""``poll``'s decoding of a Fetch's records (`FetchedPartition.take`): every record built in
bulk as a `ConsumerRecord`, handed out in slices, over every kind of batch a read_committed
or read_uncommitted Fetch can return."""

from __future__ import annotations

from typing import Any

import pytest

from kraft.types import TopicPartition
from replication.clients.fetched import ConsumerRecord, scan_partition_batches
from replication.clients.read_committed import drop_aborted
from replication.messages import AbortedTransaction
from storage.compression import Compression
from storage.control import build_marker_batch
from storage.records import SimpleRecord, TimestampType, build_batch

TP = TopicPartition("orders", 4)
NOW_MS = 1_700_000_000_000
ABORTED_PID, COMMITTED_PID = 7, 8

Row = tuple[int, bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]


def _log() -> tuple[bytes, list[Row], list[Row]]:
    """A Fetch's bytes, and the rows ``(offset, key, value, timestamp, headers)`` a
    read_uncommitted and a read_committed consumer must get from it."""
    batches: list[bytes] = []
    everything: list[Row] = []
    committed: list[Row] = []
    base = 0

    def add(records: list[SimpleRecord], *, aborted: bool = False, **kw: Any) -> None:
        nonlocal base
        ts = NOW_MS + base
        batches.append(build_batch(records, timestamp_ms=ts, base_offset=base, **kw))
        for i, r in enumerate(records):
            if kw.get("timestamp_type") is TimestampType.LOG_APPEND_TIME:
                stamp = ts  # the batch's max timestamp, whatever the record said
            else:
                stamp = ts if r.timestamp_ms is None else r.timestamp_ms
            row = (base + i, r.key, r.value, stamp, r.headers)
            everything.append(row)
            if not aborted:
                committed.append(row)
        base += len(records)

    def marker(pid: int, *, commit: bool) -> None:
        nonlocal base
        batch = bytearray(
            build_marker_batch(
                commit=commit,
                producer_id=pid,
                producer_epoch=0,
                coordinator_epoch=3,
                timestamp_ms=NOW_MS,
            )
        )
        batch[:8] = base.to_bytes(8, "big")
        batches.append(bytes(batch))
        base += 1  # a control record: an offset, never a ConsumerRecord

    add([SimpleRecord(value=b"plain-%d" % i) for i in range(4)])
    add([SimpleRecord(key=b"k%d" % i, value=None if i % 2 else b"") for i in range(4)])
    add([SimpleRecord(key=None, value=None)])
    add(
        [
            SimpleRecord(value=b"h", headers=(("trace", b"\x00\xff"), ("empty", None))),
            SimpleRecord(key=b"k", value=b"v", headers=(("é", b""),), timestamp_ms=NOW_MS - 5),
        ]
    )
    add(
        [SimpleRecord(key=b"z", value=b"zstd-%d" % i) for i in range(3)],
        compression=Compression.ZSTD,
    )
    txn: dict[str, Any] = {"is_transactional": True, "producer_epoch": 0, "base_sequence": 0}
    add(
        [SimpleRecord(value=b"doomed-%d" % i) for i in range(3)],
        aborted=True,
        producer_id=ABORTED_PID,
        **txn,
    )
    add([SimpleRecord(value=b"kept-%d" % i) for i in range(2)], producer_id=COMMITTED_PID, **txn)
    marker(ABORTED_PID, commit=False)
    marker(COMMITTED_PID, commit=True)
    add([SimpleRecord(value=b"lz4")], compression=Compression.LZ4)
    add(
        [SimpleRecord(value=b"appended-%d" % i) for i in range(2)],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
    )
    add([SimpleRecord(value=b"x" * 200) for _ in range(300)])  # two-byte varints
    return b"".join(batches), everything, committed


def _rows(records: list[ConsumerRecord]) -> list[Row]:
    assert all(
        type(r) is ConsumerRecord and (r.topic, r.partition) == ("orders", 4) for r in records
    )
    return [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in records]


def _take_all(data: bytes, position: int, budget: int) -> tuple[list[ConsumerRecord], int]:
    """Every record from ``position`` in takes of ``budget``, and the offset to fetch next."""
    fetched = scan_partition_batches(TP, data, position)
    assert fetched is not None and fetched.error is None
    out: list[ConsumerRecord] = []
    while fetched.left():
        taken = fetched.take(position, budget)
        assert 0 < len(taken) <= budget
        out += taken
        position = taken[-1].offset + 1
    assert fetched.take(position, budget) == []
    return out, fetched.next_offset


@pytest.mark.parametrize("budget", [1, 7, 500, 10_000])
def test_take_hands_out_every_record_once_in_order_from_the_position(budget: int) -> None:
    data, everything, _ = _log()
    records, next_offset = _take_all(data, 0, budget)
    assert _rows(records) == everything
    assert next_offset == everything[-1][0] + 1
    # from inside a batch (the second of four records of the first) and inside the zstd one
    assert _rows(_take_all(data, 1, budget)[0]) == everything[1:]
    zstd_second = next(i for i, row in enumerate(everything) if row[2] == b"zstd-1")
    records, _ = _take_all(data, everything[zstd_second][0], budget)
    assert _rows(records) == everything[zstd_second:]


def test_a_read_committed_fetch_without_the_aborted_batches_skips_them_and_the_markers() -> None:
    data, everything, committed = _log()
    kept = drop_aborted(data, [AbortedTransaction(producer_id=ABORTED_PID, first_offset=0)])
    records, next_offset = _take_all(kept, 0, 500)
    assert _rows(records) == committed
    assert len(committed) == len(everything) - 3
    assert next_offset == everything[-1][0] + 1  # past the markers too


def test_a_consumer_record_is_an_immutable_value_with_kafkas_fields() -> None:
    data, _, _ = _log()
    first = _take_all(data, 0, 500)[0][0]
    assert first == ConsumerRecord("orders", 4, 0, None, b"plain-0", NOW_MS)
    assert first.headers == () and hash(first) == hash(ConsumerRecord(*first))
    assert ConsumerRecord._fields == (
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "timestamp",
        "headers",
    )
    with pytest.raises(AttributeError):
        first.offset = 5  # type: ignore[misc]
