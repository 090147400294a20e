"""A consumer's Fetch that only waits for new records of caught-up partitions does not hold
back a partition of the same broker that has records (`InflightFetches.take_over`), against
the suite's shared brokers."""

from __future__ import annotations

import time
import uuid

import pytest

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, ConsumerRecord, Producer

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

LONG_POLL_MS = 120_000
"""Far beyond the test's deadline: a poll that waited for this long poll fails the test."""


def _poll_until(consumer: Consumer, want: int, deadline_s: float) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    while len(out) < want and time.monotonic() < deadline_s:
        out.extend(consumer.poll(timeout=0.5))
    return out


def test_a_drained_partition_is_fetched_without_waiting_for_its_brokers_long_poll(
    kraft_cluster: LocalCluster,
) -> None:
    """Partitions p and q on one broker; p caught up, its Fetch long-polling. q's buffered
    records run out, and q has more on the broker: the next polls return them, rather than
    wait for p's long poll (``fetch.max.wait.ms``) to end."""
    topic = f"caught-up-{uuid.uuid4().hex[:8]}"
    with AdminClient(kraft_cluster.bootstrap) as admin:
        broker = min(b.broker_id for b in admin.describe_cluster().brokers)
        admin.create_topic(topic, config={}, assignments=[[broker], [broker]])
        admin.wait_for_leaders(topic, timeout=30)
    p, q = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with (
        Producer(kraft_cluster.bootstrap, linger_ms=0) as producer,
        Consumer(
            kraft_cluster.bootstrap,
            auto_offset_reset="earliest",
            max_poll_records=1,
            fetch_max_wait_ms=LONG_POLL_MS,
        ) as consumer,
    ):
        for tp, value in ((p, b"p0"), (q, b"q0"), (q, b"q1")):
            producer.send(topic, value, partition=tp.partition).result(timeout=30)
        consumer.assign([p, q])
        deadline = time.monotonic() + 20
        # One Fetch brings p0, q0 and q1; with one record per poll, handing out q0 sends p's
        # next Fetch (p drained, caught up: it long-polls) while q1 is still buffered.
        first = _poll_until(consumer, 3, deadline)
        assert sorted(r.value for r in first) == [b"p0", b"q0", b"q1"]
        producer.send(topic, b"q2", partition=q.partition).result(timeout=30)
        later = _poll_until(consumer, 1, deadline)
        assert [(r.partition, r.offset, r.value) for r in later] == [(1, 2, b"q2")]
