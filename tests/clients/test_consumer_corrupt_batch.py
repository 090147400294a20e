"""A corrupt batch already in a log (a disk fault, or a batch an older broker accepted) stops
only its partition: the consumer returns the records before it and the other partitions'
records, raises `CorruptRecordError` with the offset, and continues after ``seek`` (as Kafka's
consumer does with ``check.crcs``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kraft.types import TopicPartition
from replication.clients.consumer import Consumer, ConsumerRecord, decode_partition_records
from replication.messages import FetchPartitionData
from storage.errors import CorruptRecordError, ErrorCode
from storage.records import build_batch, set_base_offset
from tests.clients.fake_cluster import FakeCluster, FakeNetwork
from tests.storage.forged_batches import MALFORMED, NOW_MS

TP0, TP1, TP2 = (TopicPartition("t", p) for p in range(3))


def _good(tp: TopicPartition, base: int, count: int) -> bytes:
    return build_batch(
        [f"{tp.partition}-{base + i}".encode() for i in range(count)],
        timestamp_ms=NOW_MS,
        base_offset=base,
    )


def _corrupt_crc(base: int, count: int) -> bytes:
    batch = bytearray(_good(TP0, base, count))
    batch[-2] ^= 0x01  # a flipped bit in a value on disk: only the CRC notices
    return bytes(batch)


def _plant(cluster: FakeCluster, tp: TopicPartition, *batches: bytes) -> None:
    with cluster.lock:
        cluster.logs[tp].extend(batches)
        cluster.log_end[tp] = max(
            cluster.log_end[tp],
            *(int.from_bytes(b[:8]) + int.from_bytes(b[23:27]) + 1 for b in batches),
        )


def _consumer(cluster: FakeCluster) -> Consumer:
    consumer = Consumer(
        cluster.bootstrap,
        network=FakeNetwork(cluster),
        auto_offset_reset="earliest",
        fetch_max_wait_ms=20,
    )
    consumer.assign([TP0, TP1, TP2])
    return consumer


def _poll_until(
    consumer: Consumer, done: Any, seen: list[ConsumerRecord], errors: list[CorruptRecordError]
) -> None:
    deadline = time.monotonic() + 10
    while not done():
        assert time.monotonic() < deadline, f"stuck: {len(seen)} records, {errors[:2]}"
        try:
            seen.extend(consumer.poll(0.2))
        except CorruptRecordError as e:
            errors.append(e)


def test_corrupt_batch_stops_only_its_partition_and_seek_skips_it() -> None:
    cluster = FakeCluster(brokers=2, topics={"t": 3})
    _plant(cluster, TP0, _good(TP0, 0, 5), _good(TP0, 5, 5), _corrupt_crc(10, 3), _good(TP0, 13, 4))
    _plant(cluster, TP1, _good(TP1, 0, 8))
    _plant(cluster, TP2, _good(TP2, 0, 8))
    seen: list[ConsumerRecord] = []
    errors: list[CorruptRecordError] = []
    with _consumer(cluster) as consumer:
        _poll_until(consumer, lambda: len(seen) == 26 and errors, seen, errors)
        by_tp = {
            tp: [r.offset for r in seen if r.partition == tp.partition] for tp in (TP0, TP1, TP2)
        }
        assert by_tp == {TP0: list(range(10)), TP1: list(range(8)), TP2: list(range(8))}
        error = errors[0]
        assert (error.topic, error.partition, error.offset, error.next_offset) == ("t", 0, 10, 13)
        assert "CRC" in error.message
        assert consumer.position(TP0) == 10

        # Unhandled, the error comes back, but other partitions keep flowing meanwhile.
        _plant(cluster, TP1, _good(TP1, 8, 2))
        more: list[ConsumerRecord] = []
        _poll_until(consumer, lambda: len(more) == 2 and len(errors) >= 2, more, errors)
        assert [(r.partition, r.offset) for r in more] == [(1, 8), (1, 9)]
        assert {e.offset for e in errors} == {10}

        consumer.seek(TP0, error.next_offset)
        rest: list[ConsumerRecord] = []
        _poll_until(consumer, lambda: len(rest) == 4, rest, errors)
        assert [(r.partition, r.offset, r.value) for r in rest] == [
            (0, o, f"0-{o}".encode()) for o in range(13, 17)
        ]


def test_records_of_the_same_fetch_before_the_bad_batch_come_first() -> None:
    data = _good(TP0, 0, 3) + _corrupt_crc(3, 2) + _good(TP0, 5, 1)
    records, next_offset, error = decode_partition_records(TP0, data, position=1)
    assert [r.offset for r in records] == [1, 2]
    assert next_offset == 3
    assert error is not None and (error.offset, error.next_offset) == (3, 5)
    _, _, unchecked = decode_partition_records(TP0, data, position=1, check_crcs=False)
    assert unchecked is None


@pytest.mark.parametrize(
    ("kind", "batch"),
    [(k, b) for k, b, _ in MALFORMED if "bomb" not in k],
    ids=[k for k, _, _ in MALFORMED if "bomb" not in k],
)
def test_a_poison_batch_an_older_broker_accepted_is_a_typed_error_not_a_crash(
    kind: str, batch: bytes
) -> None:
    """Issue 10: consumers got ValueError('7 is not a valid Compression') or lost the good
    records before the bad batch."""
    poison = bytearray(batch)
    set_base_offset(poison, 2)
    data = _good(TP0, 0, 2) + bytes(poison)
    records, next_offset, error = decode_partition_records(TP0, data, position=0)
    assert [r.offset for r in records][:2] == [0, 1]
    if error is not None:
        assert [r.offset for r in records] == [0, 1] and next_offset == 2
        assert error.offset == 2 and error.partition == 0
    # else: a kind whose records decode (the broker refuses it for another reason)


def test_corrupt_message_from_the_broker_is_raised_for_that_partition_only() -> None:
    class CorruptOnDisk(FakeCluster):
        def _fetch_partition(self, node: int, tp: TopicPartition, offset: int, epoch: int) -> Any:
            if tp == TP0 and offset >= 4:
                return FetchPartitionData(
                    partition_index=0,
                    error_code=ErrorCode.CORRUPT_MESSAGE,
                    error_message="bad batch header in 000.log at 4096",
                )
            return super()._fetch_partition(node, tp, offset, epoch)

    cluster = CorruptOnDisk(brokers=2, topics={"t": 3})
    _plant(cluster, TP0, _good(TP0, 0, 4))  # offsets 4.. "are on disk" but unreadable
    _plant(cluster, TP1, _good(TP1, 0, 3))
    seen: list[ConsumerRecord] = []
    errors: list[CorruptRecordError] = []
    with _consumer(cluster) as consumer:
        _poll_until(consumer, lambda: len(seen) == 7 and errors, seen, errors)
        assert sorted((r.partition, r.offset) for r in seen) == [(0, o) for o in range(4)] + [
            (1, o) for o in range(3)
        ]
        assert (errors[0].partition, errors[0].offset) == (0, 4)
        assert "bad batch header" in errors[0].message
