"""A leader that stops answering (SIGSTOP, a VM stall) while the clients talk to it.

The fake's paused broker holds every call, as a stopped process does: no error, no answer.
Once the metadata names a new leader, the clients must move there after the stall is noticed
(``retry.backoff.max.ms``), not after ``request.timeout.ms`` (30 s here), and the producer
must keep its records' order and write each once.
"""

from __future__ import annotations

import random
import time

import pytest

from kraft.cluster.process import wait_for
from kraft.types import TopicPartition
from replication.clients import Consumer, Producer
from tests.clients.fake_cluster import FakeCluster, FakeNetwork

pytestmark = pytest.mark.timeout(60)

REQUEST_TIMEOUT_MS = 30_000
STALL_MS = 300  # retry.backoff.max.ms: how long a request waits before it counts as stalled


def test_a_batch_stalled_on_a_paused_leader_goes_to_the_new_leader_before_the_request_timeout() -> (
    None
):
    cluster = FakeCluster(brokers=3, topics={"t": 3})
    tp = TopicPartition("t", 0)  # led by broker 1
    producer = Producer(
        cluster.bootstrap,
        network=FakeNetwork(cluster, request_timeout_s=REQUEST_TIMEOUT_MS / 1000),
        rng=random.Random(1),
        linger_ms=5,
        retry_backoff_ms=10,
        retry_backoff_max_ms=STALL_MS,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    try:
        before = [producer.send("t", b"a%d" % i, partition=0) for i in range(20)]
        producer.flush(timeout=10)
        assert all(f.result(0).offset >= 0 for f in before)
        cluster.pause(1)
        paused_at = time.monotonic()
        during = [producer.send("t", b"b%d" % i, partition=0) for i in range(50)]
        wait_for(
            lambda: cluster.stats.held.get("Produce", 0) > 0, 10, "a produce to the paused leader"
        )
        cluster.move_leader(tp, 2)  # the controller elected broker 2
        for future in during:
            future.result(timeout=10)
        waited = time.monotonic() - paused_at
        assert waited < 3.0, f"the records waited {waited:.1f}s for the new leader"
        cluster.resume(1)
        after = [producer.send("t", b"c%d" % i, partition=0) for i in range(10)]
        producer.flush(timeout=10)
        assert all(f.result(0).offset >= 0 for f in after)
    finally:
        cluster.resume(1)
        producer.close(timeout=5)
    values = [value for _, _, value in cluster.records(tp)]
    expected = [b"a%d" % i for i in range(20)] + [b"b%d" % i for i in range(50)]
    expected += [b"c%d" % i for i in range(10)]
    assert values == expected  # each once, in order


def test_a_fetch_stalled_on_a_paused_leader_goes_to_the_new_leader_before_the_request_timeout() -> (
    None
):
    cluster = FakeCluster(brokers=3, topics={"t": 3})
    tp = TopicPartition("t", 0)
    with Producer(cluster.bootstrap, network=FakeNetwork(cluster), retry_backoff_ms=10) as p:
        for i in range(10):
            p.send("t", b"v%d" % i, partition=0)
        p.flush(timeout=10)
    consumer = Consumer(
        cluster.bootstrap,
        network=FakeNetwork(cluster, request_timeout_s=REQUEST_TIMEOUT_MS / 1000),
        auto_offset_reset="earliest",
        fetch_max_wait_ms=50,
        retry_backoff_ms=10,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    try:
        consumer.assign([tp])
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 5 and time.monotonic() < deadline:
            got.extend(consumer.poll(timeout=0.2)[: 5 - len(got)])
        consumer.seek(tp, 5)
        cluster.pause(1)
        paused_at = time.monotonic()
        polled = consumer.poll(timeout=0.2)  # its fetch goes to the paused leader
        assert time.monotonic() - paused_at < 2.0, "poll outlived its timeout"
        cluster.move_leader(tp, 2)
        while len(polled) < 5 and time.monotonic() - paused_at < 10:
            polled.extend(consumer.poll(timeout=0.2))
        waited = time.monotonic() - paused_at
        assert [r.offset for r in polled] == [5, 6, 7, 8, 9]
        assert waited < 3.0, f"the consumer waited {waited:.1f}s for the new leader"
    finally:
        cluster.resume(1)
        consumer.close()


def test_a_retry_backing_off_from_a_dead_leader_goes_to_its_successor_at_once() -> None:
    """KIP-951: the backoff is for the broker that failed; a new leader gets the batch now."""
    cluster = FakeCluster(brokers=3, topics={"t": 3})
    tp = TopicPartition("t", 0)
    producer = Producer(
        cluster.bootstrap,
        network=FakeNetwork(cluster),
        linger_ms=5,
        retry_backoff_ms=100,
        retry_backoff_max_ms=1000,
    )
    try:
        producer.send("t", b"a", partition=0).result(timeout=10)
        cluster.dead.add(1)
        future = producer.send("t", b"b", partition=0)
        # backoffs 100, 200, 400, 800 ms: the fifth refusal leaves a retry 1 s away
        wait_for(lambda: cluster.stats.refused.get("Produce", 0) >= 5, 10, "five refusals")
        moved_at = time.monotonic()
        cluster.move_leader(tp, 2)
        future.result(timeout=10)
        waited = time.monotonic() - moved_at
        assert waited < 0.6, f"the retry waited {waited:.2f}s after the new leader was known"
    finally:
        producer.close(timeout=5)
    assert [value for _, _, value in cluster.records(tp)] == [b"a", b"b"]


def test_a_dead_leader_is_asked_again_after_retry_backoff_not_on_every_loop_of_poll() -> None:
    """A killed leader refuses at once; the consumer used to ask it again on every pass of
    ``poll``'s loop (thousands of failed Fetches a second, each a warning line). Kafka's
    consumer waits out a backoff per node."""
    cluster = FakeCluster(brokers=3, topics={"t": 3})
    tp = TopicPartition("t", 0)  # led by broker 1
    consumer = Consumer(
        cluster.bootstrap,
        network=FakeNetwork(cluster, request_timeout_s=5),
        auto_offset_reset="earliest",
        retry_backoff_ms=100,
    )
    try:
        consumer.assign([tp])
        consumer.poll(timeout=0.3)  # a position and a first Fetch
        cluster.dead.add(1)
        consumer.poll(timeout=1.0)
        refused = cluster.stats.refused.get("Fetch", 0) + cluster.stats.refused.get(
            "ListOffsets", 0
        )
        assert 1 <= refused <= 15, f"{refused} calls to the dead leader in 1 s"
    finally:
        cluster.dead.discard(1)
        consumer.close()
