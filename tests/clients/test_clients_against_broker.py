"""Producer, consumer and admin client against real broker processes (`LocalCluster`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, ConsumerRecord, Producer, partition_for_key
from replication.clients.network import BrokerNetwork
from storage.errors import KraftError, NetworkError

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]

R = TypeVar("R")


@pytest.fixture
def bootstrap(kraft_cluster: LocalCluster) -> str:
    """The suite's shared kraft 3+3 (tests/kraft_cluster.py)."""
    return kraft_cluster.bootstrap


@pytest.fixture
def admin(bootstrap: str) -> Iterator[AdminClient]:
    with AdminClient(bootstrap) as client:
        yield client


def create_topic(admin: AdminClient, name: str, partitions: int = 3) -> None:
    admin.create_topic(
        name, partitions=partitions, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    admin.wait_for_leaders(name, timeout=30)


def consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(consumer.poll(timeout=1.0))
        out.extend(consumer.poll(timeout=0.5))  # nothing more may come
    return out


class LossyNetwork(BrokerNetwork):
    """Lets the first ``lose`` Produce calls reach the broker, then tells the producer they
    failed (as if the response was lost on the way back), forcing retries of applied data."""

    def __init__(self, bootstrap: str, lose: int) -> None:
        super().__init__(bootstrap)
        self.lose = lose

    def call_async(
        self,
        address: str,
        method: str,
        request: Any,
        response_cls: type[R],
        on_done: Callable[[R | None, KraftError | None], None],
        timeout_s: float | None = None,
    ) -> None:
        if method == "Produce" and self.lose > 0:
            self.lose -= 1

            def lost(response: R | None, error: KraftError | None) -> None:
                on_done(None, error or NetworkError("test: the response was lost"))

            super().call_async(address, method, request, response_cls, lost, timeout_s)
            return
        super().call_async(address, method, request, response_cls, on_done, timeout_s)


def test_admin_creates_and_describes_a_replicated_topic(admin: AdminClient) -> None:
    create_topic(admin, "described", partitions=4)
    topic = admin.describe_topic("described")
    assert [p.partition for p in topic.partitions] == [0, 1, 2, 3]
    for p in topic.partitions:
        assert len(p.replicas) == 3 and p.leader in p.replicas
        assert set(p.isr) <= set(p.replicas) and p.leader_epoch >= 0
    assert "described" in admin.list_topics()
    assert len(admin.describe_cluster().brokers) == 3


def test_keyed_records_with_acks_all_are_consumed_back_at_their_offsets(
    bootstrap: str, admin: AdminClient
) -> None:
    create_topic(admin, "keyed", partitions=3)
    n = 2000
    with Producer(bootstrap, acks="all", enable_idempotence=True, linger_ms=5) as producer:
        futures = [
            producer.send("keyed", value=b"v%d" % i, key=b"k%d" % (i % 50)) for i in range(n)
        ]
        producer.flush()
        sent = [f.result(timeout=30) for f in futures]
    for i, md in enumerate(sent):
        assert md.partition == partition_for_key(b"k%d" % (i % 50), 3)
    records = consume(bootstrap, "keyed", 3, n)
    got = {(r.partition, r.offset): (r.key, r.value) for r in records}
    want = {(md.partition, md.offset): (b"k%d" % (i % 50), b"v%d" % i) for i, md in enumerate(sent)}
    assert got == want
    assert len(records) == n


def test_idempotent_retries_of_applied_batches_produce_no_duplicates(
    bootstrap: str, admin: AdminClient
) -> None:
    create_topic(admin, "idempotent", partitions=1)
    n = 500
    network = LossyNetwork(bootstrap, lose=5)
    with Producer(bootstrap, network=network, acks="all", linger_ms=2) as producer:
        futures = [producer.send("idempotent", value=b"%d" % i, partition=0) for i in range(n)]
        producer.flush()
        offsets = [f.result(timeout=30).offset for f in futures]
    assert network.lose == 0  # the faults did happen
    assert offsets == list(range(n))
    records = consume(bootstrap, "idempotent", 1, n)
    assert [r.value for r in records] == [b"%d" % i for i in range(n)]


def test_the_same_faults_duplicate_records_without_idempotence(
    bootstrap: str, admin: AdminClient
) -> None:
    """Control experiment: proves the lossy network really forces re-sends of applied data."""
    create_topic(admin, "not-idempotent", partitions=1)
    network = LossyNetwork(bootstrap, lose=3)
    with Producer(
        bootstrap, network=network, acks="all", enable_idempotence=False, linger_ms=2
    ) as producer:
        futures = [producer.send("not-idempotent", value=b"%d" % i, partition=0) for i in range(50)]
        producer.flush()
        for f in futures:
            f.result(timeout=30)
    assert len(consume(bootstrap, "not-idempotent", 1, 51)) > 50


def test_a_latest_consumer_sees_only_records_produced_after_it_started(
    bootstrap: str, admin: AdminClient
) -> None:
    create_topic(admin, "latest", partitions=1)
    tp = TopicPartition("latest", 0)
    with Producer(bootstrap) as producer:
        producer.send("latest", value=b"old", partition=0).result(timeout=30)
        with Consumer(bootstrap, auto_offset_reset="latest") as consumer:
            consumer.assign([tp])
            assert consumer.position(tp) == 1
            producer.send("latest", value=b"new", partition=0).result(timeout=30)
            deadline = time.monotonic() + 30
            records: list[ConsumerRecord] = []
            while not records and time.monotonic() < deadline:
                records = consumer.poll(timeout=1.0)
            assert [(r.offset, r.value) for r in records] == [(1, b"new")]
