"""Producer and consumer shells end to end against the in-memory `FakeCluster`.

The fake answers like a broker where the clients can tell (see fake_cluster.py); faults are
injected: lost responses, moved leaders, reordering delays, partition errors.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kraft.types import TopicPartition
from replication.clients import Consumer, ConsumerRecord, Producer, partition_for_key
from storage.errors import (
    ErrorCode,
    NotEnoughReplicasError,
    RecordTooLargeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from tests.clients.fake_cluster import FakeCluster, FakeNetwork

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster(brokers=3, topics={"t": 6})


@pytest.fixture
def producer(cluster: FakeCluster) -> Iterator[Producer]:
    p = make_producer(cluster)
    yield p
    p.close(timeout=5)


def make_producer(cluster: FakeCluster, **options: Any) -> Producer:
    settings: dict[str, Any] = {"linger_ms": 5, "retry_backoff_ms": 10}
    settings.update(options)
    return Producer(
        cluster.bootstrap, network=FakeNetwork(cluster), rng=random.Random(1), **settings
    )


def make_consumer(cluster: FakeCluster, **options: Any) -> Consumer:
    settings: dict[str, Any] = {"auto_offset_reset": "earliest", "fetch_max_wait_ms": 50}
    settings.update(options)
    return Consumer(cluster.bootstrap, network=FakeNetwork(cluster), **settings)


def consume_all(consumer: Consumer, expected: int, timeout: float = 10) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        out.extend(consumer.poll(timeout=0.5))
    return out


def all_tps(cluster: FakeCluster, topic: str = "t") -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(cluster.partitions[topic])]


def test_keyed_records_are_acknowledged_at_their_offsets_and_consumed_back(
    cluster: FakeCluster, producer: Producer
) -> None:
    futures = [producer.send("t", value=b"v%d" % i, key=b"k%d" % (i % 17)) for i in range(300)]
    producer.flush()
    metadata = [f.result(timeout=5) for f in futures]
    for i, md in enumerate(metadata):
        assert md.partition == partition_for_key(b"k%d" % (i % 17), 6)
    by_partition: dict[int, list[int]] = {}
    for md in metadata:
        by_partition.setdefault(md.partition, []).append(md.offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))  # in send order, no gaps
    with make_consumer(cluster) as consumer:
        consumer.assign(all_tps(cluster))
        records = consume_all(consumer, 300)
    got = {(r.partition, r.offset): (r.key, r.value) for r in records}
    want = {
        (md.partition, md.offset): (b"k%d" % (i % 17), b"v%d" % i) for i, md in enumerate(metadata)
    }
    assert got == want


def test_one_produce_request_per_broker_carries_many_partitions_and_records(
    cluster: FakeCluster,
) -> None:
    with make_producer(cluster, linger_ms=50) as producer:
        futures = [producer.send("t", value=b"x", key=b"%d" % i) for i in range(3000)]
        producer.flush()
        assert all(f.result(5).offset >= 0 for f in futures)
    stats = cluster.stats
    assert stats.produce_requests <= 60, stats.produce_requests  # 3000 records
    assert max(stats.produce_partitions) >= 2  # a broker leads 2 of the 6 partitions


def test_keyless_records_stick_to_a_partition_per_batch(cluster: FakeCluster) -> None:
    with make_producer(cluster, batch_size=1024, linger_ms=1000) as producer:
        futures = [producer.send("t", value=b"x" * 100) for _ in range(100)]
        producer.flush()
        partitions = [f.result(5).partition for f in futures]
    runs = 1 + sum(a != b for a, b in itertools.pairwise(partitions))
    assert runs <= 100 * 110 // 1024 + 2  # one switch per full batch, not per record
    assert len(set(partitions)) > 1


def test_full_batches_go_out_before_linger_and_each_record_keeps_its_timestamp_and_offset(
    cluster: FakeCluster,
) -> None:
    """``send``'s common case appends to the open batch without the accumulator's call; a
    batch that fills up must still wake the sender (it does not wait for ``linger.ms``), and
    every record's metadata is its own: offset in send order, the timestamp it was sent with."""
    # the sender's idle sleep is long: only a wake-up sends a full batch within the deadline
    slow = {"linger_ms": 60_000, "retry_backoff_max_ms": 60_000, "metadata_max_age_ms": 600_000}
    with make_producer(cluster, batch_size=1024, **slow) as producer:
        producer.send("t", b"first")
        producer.flush(5)  # metadata and the producer id; then nothing is in flight
        keyless = [producer.send("t", b"x" * 100, timestamp_ms=1_000 + i) for i in range(40)]
        keyed = [
            producer.send("t", b"y" * 100, key=b"k", timestamp_ms=5_000 + i) for i in range(40)
        ]
        full = keyless[:9] + keyed[:9]  # ~110-byte records: 9 fill a 1024-byte batch
        deadline = time.monotonic() + 10
        while not all(f.done() for f in full) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(f.done() for f in full), "a full batch waited for linger.ms"
        producer.flush()
        for futures, base in ((keyless, 1_000), (keyed, 5_000)):
            metadata = [f.result(5) for f in futures]
            assert [m.timestamp for m in metadata] == [base + i for i in range(40)]
            by_partition: dict[int, list[int]] = {}
            for m in metadata:
                by_partition.setdefault(m.partition, []).append(m.offset)
            for offsets in by_partition.values():
                assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        assert {m.partition for m in (f.result(0) for f in keyed)} == {partition_for_key(b"k", 6)}


def test_lost_responses_are_retried_without_duplicates_when_idempotent(
    cluster: FakeCluster,
) -> None:
    cluster.lose_produce_responses = 5
    with make_producer(cluster) as producer:
        futures = [producer.send("t", value=b"%d" % i, key=b"k") for i in range(200)]
        producer.flush()
        offsets = [f.result(5).offset for f in futures]
    tp = TopicPartition("t", partition_for_key(b"k", 6))
    assert [v for _, _, v in cluster.records(tp)] == [b"%d" % i for i in range(200)]
    assert offsets == list(range(200))


def test_lost_responses_duplicate_records_without_idempotence(cluster: FakeCluster) -> None:
    """The control experiment: the same faults do duplicate when idempotence is off."""
    cluster.lose_produce_responses = 3
    with make_producer(cluster, enable_idempotence=False, acks=1) as producer:
        futures = [producer.send("t", value=b"%d" % i, key=b"k") for i in range(50)]
        producer.flush()
        for f in futures:
            f.result(5)
    tp = TopicPartition("t", partition_for_key(b"k", 6))
    assert len(cluster.records(tp)) > 50


def test_reordered_in_flight_requests_keep_per_partition_order_and_no_duplicates(
    cluster: FakeCluster,
) -> None:
    cluster.max_delay_s = 0.01
    cluster.lose_produce_responses = 4
    with make_producer(cluster, linger_ms=0, batch_size=200) as producer:
        futures = [producer.send("t", value=b"%d" % i, key=b"k%d" % (i % 3)) for i in range(600)]
        producer.flush()
        for f in futures:
            f.result(10)
    for k in range(3):
        tp = TopicPartition("t", partition_for_key(b"k%d" % k, 6))
        values = [int(v or b"-1") for _, key, v in cluster.records(tp) if key == b"k%d" % k]
        assert values == list(range(k, 600, 3))


def test_a_moved_leader_is_found_from_the_hint_and_metadata(cluster: FakeCluster) -> None:
    with make_producer(cluster) as producer:
        producer.send("t", value=b"before", partition=0).result(5)
        cluster.move_leader(TopicPartition("t", 0), leader=3)
        md = producer.send("t", value=b"after", partition=0).result(5)
    assert md.offset == 1
    assert [v for _, _, v in cluster.records(TopicPartition("t", 0))] == [b"before", b"after"]


def test_a_retriable_error_that_persists_fails_at_the_delivery_timeout(
    cluster: FakeCluster,
) -> None:
    cluster.partition_errors[TopicPartition("t", 1)] = ErrorCode.NOT_ENOUGH_REPLICAS
    with make_producer(cluster, delivery_timeout_ms=300, request_timeout_ms=200) as producer:
        started = time.monotonic()
        future = producer.send("t", value=b"v", partition=1)
        with pytest.raises((NotEnoughReplicasError, RequestTimedOutError)):
            future.result(5)
        assert time.monotonic() - started < 3
        assert producer.send("t", value=b"ok", partition=2).result(5).offset == 0


def test_a_non_retriable_error_fails_the_future_with_its_typed_exception(
    cluster: FakeCluster,
) -> None:
    cluster.max_batch_bytes = 500
    with make_producer(cluster) as producer:
        big = producer.send("t", value=b"x" * 1000, partition=0)
        with pytest.raises(RecordTooLargeError):
            big.result(5)
        # the epoch bump after the failed batch lets the partition carry on
        assert producer.send("t", value=b"small", partition=0).result(5).offset == 0
    assert cluster.stats.init_producer_id_requests == 2


def test_an_unknown_topic_fails_the_future_after_max_block_ms(cluster: FakeCluster) -> None:
    with make_producer(cluster, max_block_ms=200) as producer:
        future = producer.send("nope", value=b"v")
        with pytest.raises(UnknownTopicOrPartitionError):
            future.result(1)


def test_acks_zero_completes_without_offsets(cluster: FakeCluster) -> None:
    with make_producer(cluster, acks=0, enable_idempotence=False) as producer:
        md = producer.send("t", value=b"v", partition=0).result(5)
    assert md.offset == -1
    assert len(cluster.records(TopicPartition("t", 0))) == 1


def test_consumer_positions_seek_and_reset_policies(cluster: FakeCluster) -> None:
    tp = TopicPartition("t", 0)
    with make_producer(cluster) as producer:
        for i in range(10):
            producer.send("t", value=b"%d" % i, partition=0)
        producer.flush()
    with make_consumer(cluster, auto_offset_reset="latest") as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 10
        consumer.seek(tp, 4)
        records = consume_all(consumer, 6)
        assert [r.offset for r in records] == list(range(4, 10))
        assert consumer.position(tp) == 10
        consumer.seek_to_beginning()
        assert consumer.position(tp) == 0
        consumer.seek_to_end([tp])
        assert consumer.position(tp) == 10
        assert consumer.highwater(tp) == 10


def test_consumer_resets_an_out_of_range_position_by_its_policy(cluster: FakeCluster) -> None:
    tp = TopicPartition("t", 1)
    with make_producer(cluster) as producer:
        for i in range(5):
            producer.send("t", value=b"%d" % i, partition=1)
        producer.flush()
    with make_consumer(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        records = consume_all(consumer, 5)
        assert [r.offset for r in records] == list(range(5))


def test_consumer_follows_a_leader_change_with_fenced_epochs(cluster: FakeCluster) -> None:
    tp = TopicPartition("t", 2)
    with make_producer(cluster) as producer, make_consumer(cluster) as consumer:
        producer.send("t", value=b"a", partition=2).result(5)
        consumer.assign([tp])
        assert [r.value for r in consume_all(consumer, 1)] == [b"a"]
        cluster.move_leader(tp, leader=1)
        producer.send("t", value=b"b", partition=2).result(5)
        assert [r.value for r in consume_all(consumer, 1)] == [b"b"]


def test_a_stale_leader_heard_after_a_failover_does_not_reset_the_consumer_position(
    cluster: FakeCluster,
) -> None:
    """The nemesis's stale-leader run (docs/guarantees.md): broker 2 led partition 1 at epoch
    0, was cut off before any write and still believes it leads with an empty log; broker 3
    took over at epoch 1 and the consumer read 5 records from it. Broker 3 dies; the only
    broker answering Metadata is broker 2, from its old image (leader 2, epoch 0). The
    consumer must keep its epoch-1 leader (KIP-320) instead of fetching offset 5 from broker
    2 at epoch 0, which broker 2 accepts and answers OFFSET_OUT_OF_RANGE, and then re-reading
    the partition from offset 0 by auto.offset.reset=earliest."""
    tp = TopicPartition("t", 1)
    assert cluster.leaders[tp] == (2, 0)
    cluster.make_stale(2)
    cluster.move_leader(tp, leader=3)
    with make_producer(cluster) as producer:
        for i in range(5):
            producer.send("t", value=b"%d" % i, partition=1)
        producer.flush()
    with make_consumer(cluster) as consumer:
        consumer.assign([tp])
        assert [r.offset for r in consume_all(consumer, 5)] == [0, 1, 2, 3, 4]
        cluster.dead |= {1, 3}  # the new leader, and a broker that would answer truthfully
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # rounds of failed fetches and stale metadata
            assert consumer.poll(timeout=0.1) == []
        assert consumer.position(tp) == 5
        cluster.move_leader(tp, leader=3)  # it comes back and is elected at epoch 2
        cluster.refresh(2)
        cluster.dead.clear()
        with make_producer(cluster) as producer:
            producer.send("t", value=b"5", partition=1).result(5)
        assert [r.offset for r in consume_all(consumer, 1)] == [5]


def test_consumer_sends_one_fetch_per_broker_for_all_its_partitions(cluster: FakeCluster) -> None:
    with make_producer(cluster) as producer:
        for i in range(60):
            producer.send("t", value=b"%d" % i, key=b"%d" % i)
        producer.flush()
    with make_consumer(cluster, max_poll_records=1000) as consumer:
        consumer.assign(all_tps(cluster))
        records = consume_all(consumer, 60)
    assert len(records) == 60
    assert max(cluster.stats.fetch_partitions) == 2  # 6 partitions over 3 brokers
    assert cluster.stats.list_offsets_requests <= 3 * 2


def test_max_poll_records_bounds_one_poll_and_positions_follow(cluster: FakeCluster) -> None:
    tp = TopicPartition("t", 0)
    with make_producer(cluster) as producer:
        for i in range(25):
            producer.send("t", value=b"%d" % i, partition=0)
        producer.flush()
    with make_consumer(cluster, max_poll_records=10) as consumer:
        consumer.assign([tp])
        first = consumer.poll(timeout=2)
        assert len(first) == 10 and consumer.position(tp) == 10
        rest = consume_all(consumer, 15)
        assert [r.offset for r in rest] == list(range(10, 25))


def test_send_delivers_every_record_of_a_tight_loop_keyed_or_not(cluster: FakeCluster) -> None:
    """50,000 back-to-back ``send`` calls per key pattern all reach the log, each key on its
    partition, every future resolved. The loop also prints µs/record of ``send`` (partition
    choice + append + future) for a quick look; speed is measured by ``kraft bench produce``,
    never asserted here. The budget at 250k records/s is 4 µs per record."""
    n = 50_000
    value = b"x" * 100
    with make_producer(cluster, linger_ms=5, batch_size=16384) as producer:
        producer.send("t", value=value).result(5)  # metadata and producer id first
        cases: list[tuple[str, list[bytes | None]]] = [
            ("keyless", [None] * n),
            ("keyed, all keys distinct", [b"key-%06d" % i for i in range(n)]),
            ("keyed, 1000 hot keys", [b"hot-%04d" % (i % 1000) for i in range(n)]),
        ]
        sent = 1
        for label, keys in cases:
            started = time.perf_counter()
            futures = [producer.send("t", value=value, key=key) for key in keys]
            elapsed = time.perf_counter() - started
            print(f"\nsend() {label}: {elapsed / n * 1e6:.2f} µs/record ({n / elapsed:,.0f}/s)")
            producer.flush()
            sent += n
            results = [f.result(timeout=5) for f in futures]
            for key, result in zip(keys, results, strict=True):
                if key is not None:
                    assert result.partition == partition_for_key(key, 6)
        stored = [cluster.records(TopicPartition("t", p)) for p in range(6)]
        assert sum(len(records) for records in stored) == sent
        assert all(value_ == value for records in stored for _, _, value_ in records)
