"""`Producer.send_batch`: many records, one future, with `send`'s guarantees (acks,
idempotence, per-partition order, keys' partitions, sticky batches), against the FakeCluster."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pyarrow as pa
import pytest

from kraft.types import TopicPartition
from replication.clients import Producer, partition_for_key
from replication.clients.batch import ProducerBatch
from storage.compression import Compression
from storage.errors import NotEnoughReplicasError, RecordTooLargeError
from storage.records import iter_records
from tests.clients.fake_cluster import FakeCluster
from tests.clients.test_clients_with_fake_cluster import make_producer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster(brokers=3, topics={"t": 6})


def values_of(cluster: FakeCluster, partition: int) -> list[bytes | None]:
    return [v for _, _, v in cluster.records(TopicPartition("t", partition))]


def test_a_batch_to_one_partition_lands_in_order_at_the_offsets_its_parts_report(
    cluster: FakeCluster,
) -> None:
    values = [b"%d" % i for i in range(5000)]
    with make_producer(cluster, batch_size=4096) as producer:
        producer.send("t", value=b"before", partition=2).result(5)
        future = producer.send_batch("t", values, partition=2)
        parts = future.result(10)
    assert future.done() and future.record_count == 5000
    assert values_of(cluster, 2) == [b"before", *values]
    assert len(parts) > 1  # 5000 records do not fit one 4 KiB producer batch
    assert all(p.partition == 2 for p in parts)
    offset = 1
    for part in parts:  # contiguous, in call order
        assert part.base_offset == offset
        offset += part.record_count
    assert offset == 5001


def test_keyed_records_go_to_their_keys_partitions_in_call_order(cluster: FakeCluster) -> None:
    keys = [b"k%d" % (i % 13) for i in range(3000)]
    values = [b"v%d" % i for i in range(3000)]
    with make_producer(cluster) as producer:
        parts = producer.send_batch("t", values, keys=keys).result(10)
    assert sum(p.record_count for p in parts) == 3000
    for p in range(6):
        got = [(k, v) for _, k, v in cluster.records(TopicPartition("t", p))]
        want = [(k, v) for k, v in zip(keys, values, strict=True) if partition_for_key(k, 6) == p]
        assert got == want


def test_keyless_records_stick_to_one_partition_per_producer_batch(cluster: FakeCluster) -> None:
    with make_producer(cluster, batch_size=1024, linger_ms=1000) as producer:
        parts = producer.send_batch("t", [b"x" * 100] * 100).result(10)
    assert sum(p.record_count for p in parts) == 100
    runs = 1 + sum(a.partition != b.partition for a, b in itertools.pairwise(parts))
    assert runs == len(parts) > 1  # KIP-480: a new partition for each new batch
    assert sum(len(values_of(cluster, p)) for p in range(6)) == 100


def test_send_batch_writes_the_same_records_as_send_would(cluster: FakeCluster) -> None:
    # the bulk encoder must produce exactly the record bytes of `try_append`
    values: list[bytes | None] = [b"a", None, b"", b"x" * 5000, b"y" * 70]
    keys: list[bytes | None] = [None, b"k", b"k" * 5000, None, b""]
    bulk = ProducerBatch(TopicPartition("t", 0), created_ms=0, batch_size=1 << 20)
    one = ProducerBatch(TopicPartition("t", 0), created_ms=0, batch_size=1 << 20)
    assert bulk.try_append_many(7, keys, values, range(5), 0) == 5
    for k, v in zip(keys, values, strict=True):
        assert one.try_append(7, k, v, None) is not None
    assert bulk.encode(Compression.NONE) == one.encode(Compression.NONE)
    decoded = [(r.key, r.value) for r in iter_records(bulk.encode(Compression.NONE))]
    assert decoded == list(zip(keys, values, strict=True))


def test_lost_responses_are_retried_without_duplicates(cluster: FakeCluster) -> None:
    cluster.lose_produce_responses = 4
    cluster.max_delay_s = 0.005
    values = [b"%d" % i for i in range(2000)]
    with make_producer(cluster, batch_size=1024, linger_ms=0) as producer:
        futures = [
            producer.send_batch("t", values[i : i + 500], partition=1) for i in range(0, 2000, 500)
        ]
        for f in futures:
            f.result(10)
    assert values_of(cluster, 1) == values  # idempotence: order kept, nothing twice


def test_a_failed_part_fails_the_future_with_its_typed_error(cluster: FakeCluster) -> None:
    from storage.errors import ErrorCode

    cluster.partition_errors[TopicPartition("t", 4)] = ErrorCode.NOT_ENOUGH_REPLICAS
    with make_producer(cluster, delivery_timeout_ms=300, request_timeout_ms=200) as producer:
        future = producer.send_batch("t", [b"x"] * 10, partition=4)
        with pytest.raises(NotEnoughReplicasError):
            future.result(10)
        assert future.parts()[0].base_offset == -1


def test_an_oversized_record_fails_the_call_before_anything_is_queued(
    cluster: FakeCluster,
) -> None:
    with make_producer(cluster, max_request_size=1000) as producer:
        future = producer.send_batch("t", [b"a", b"b" * 2000, b"c"], partition=0)
        with pytest.raises(RecordTooLargeError, match="record 1"):
            future.result(5)
        producer.flush()
    assert values_of(cluster, 0) == []


def test_bad_arguments_raise_before_anything_is_queued(cluster: FakeCluster) -> None:
    with make_producer(cluster) as producer:
        with pytest.raises(TypeError, match="str"):
            producer.send_batch("t", [b"a", "b"], partition=0)  # type: ignore[list-item]
        with pytest.raises(ValueError, match="keys"):
            producer.send_batch("t", [b"a"], keys=[b"k", b"l"])
        with pytest.raises(ValueError, match="partitions"):
            producer.send_batch("t", [b"a"], partition=6)
        producer.flush()
    assert all(values_of(cluster, p) == [] for p in range(6))


def test_arrow_binary_and_string_arrays_are_sent_with_their_nulls(cluster: FakeCluster) -> None:
    with make_producer(cluster) as producer:
        producer.send_batch("t", pa.array([b"a", None, b"c"], pa.binary()), partition=0).result(5)
        producer.send_batch(
            "t",
            pa.chunked_array([pa.array(["d", "e"]), pa.array([None], pa.string())]),
            keys=pa.array([b"k", b"k", b"k"]),
        ).result(5)
    assert values_of(cluster, 0) == [b"a", None, b"c"]
    keyed = [(k, v) for _, k, v in cluster.records(TopicPartition("t", partition_for_key(b"k", 6)))]
    assert keyed[-3:] == [(b"k", b"d"), (b"k", b"e"), (b"k", None)]


def test_the_callback_runs_once_after_every_part_completed(cluster: FakeCluster) -> None:
    seen: list[Any] = []
    done = threading.Event()
    with make_producer(cluster, batch_size=512) as producer:
        future = producer.send_batch("t", [b"x" * 50] * 200, partition=3)

        def callback(f: Any) -> None:
            seen.append(f.record_count)
            done.set()

        future.add_done_callback(callback)
        assert done.wait(10)
        future.add_done_callback(lambda f: seen.append("late"))  # completed: runs at once
    assert seen == [200, "late"]


def test_an_empty_call_completes_at_once(cluster: FakeCluster) -> None:
    with make_producer(cluster) as producer:
        assert producer.send_batch("t", [], partition=0).result(1) == []


def test_send_batch_after_close_raises(cluster: FakeCluster) -> None:
    producer: Producer = make_producer(cluster)
    producer.close(timeout=5)
    with pytest.raises(RuntimeError):
        producer.send_batch("t", [b"a"])
