"""Fetch from the closest replica (KIP-392) on the shared cluster, whose brokers sit in racks
``rack-a``/``rack-b``/``rack-c`` with the rack-aware selector (`conftest`): librdkafka and
kraft's consumer with ``client.rack`` read from the follower in their rack, and so does the
Spark reader with its rack, which the brokers' ``bytesout`` metric shows; a follower answers a
consumer's fetch with Kafka's errors."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import confluent_kafka
import pytest

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import Consumer, Producer
from replication.clients.network import BrokerNetwork
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
    FetchPartition,
    FetchPartitionData,
    FetchTopic,
)
from spark.fetcher import RangeFetcher
from spark.offsets import OffsetRange
from storage.errors import ErrorCode
from tests.kraft_cluster import RACKS
from tests.metrics.test_metrics_cluster import scrape

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

RECORDS = 200
VALUES = [f"ffr-{i:04d}-".encode() + b"x" * 200 for i in range(RECORDS)]


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _bytes_out(cluster: LocalCluster, broker: int, topic: str) -> float:
    name = f"kafka_server_brokertopicmetrics_bytesout_total{{topic={topic}}}"
    return scrape(cluster.metrics_addresses[broker]).get(name, 0.0)


def _rack(cluster: LocalCluster, broker: int) -> str:
    return RACKS[list(cluster.broker_ids).index(broker)]


def _read_with_librdkafka(cluster: LocalCluster, topic: str, rack: str) -> list[bytes]:
    """Partition 0 of ``topic`` from its start, through librdkafka with ``client.rack``."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": f"ffr-librdkafka-{rack}",
            "client.rack": rack,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            for m in consumer.consume(RECORDS, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
        return got
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def layout(cluster: LocalCluster) -> tuple[str, int, int, int]:
    """One partition on all three racks, written and fully in sync: (topic, leader, and the
    two followers)."""
    topic = "fetch-from-follower"
    cluster.create_topic(topic, 1, 3, config={"min.insync.replicas": "2"})
    with Producer(cluster.bootstrap, acks="all", linger_ms=5) as producer:
        for future in [producer.send(topic, v, partition=0) for v in VALUES]:
            future.result(timeout=30)

    def in_sync() -> bool:
        (p,) = cluster.describe_topic(topic).partitions
        return len(p.isr) == 3

    _wait(in_sync, "all three replicas in the ISR")
    (p,) = cluster.describe_topic(topic).partitions
    first, second = sorted(b for b in p.replicas if b != p.leader)

    # NB: a follower learns the high watermark from its next fetch's answer, after the ISR
    # says it is in sync: until then it serves nothing (as Kafka's follower does), and a
    # test on another xdist worker can run first.
    def caught_up() -> bool:
        return all(
            _fetch(cluster, b, topic, 0, p.leader_epoch).high_watermark == RECORDS
            for b in (first, second)
        )

    _wait(caught_up, "both followers' high watermark at the log end")
    return topic, p.leader, first, second


def test_librdkafka_with_client_rack_reads_from_the_follower_in_its_rack(
    cluster: LocalCluster, layout: tuple[str, int, int, int]
) -> None:
    topic, leader, follower, _ = layout
    assert _read_with_librdkafka(cluster, topic, _rack(cluster, follower)) == VALUES
    # The follower sent them all; the leader only named it (no records).
    assert _bytes_out(cluster, follower, topic) >= sum(map(len, VALUES))
    assert _bytes_out(cluster, leader, topic) == 0


def test_krafts_consumer_with_client_rack_reads_from_the_follower_in_its_rack(
    cluster: LocalCluster, layout: tuple[str, int, int, int]
) -> None:
    topic, leader, _, follower = layout
    before = _bytes_out(cluster, follower, topic)
    tp = TopicPartition(topic, 0)
    with Consumer(cluster.bootstrap, client_rack=_rack(cluster, follower)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(0.5))
    assert got == VALUES
    assert _bytes_out(cluster, follower, topic) - before >= sum(map(len, VALUES))
    assert _bytes_out(cluster, leader, topic) == 0
    # Without client.rack the leader serves, as before KIP-392.
    with Consumer(cluster.bootstrap) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        _wait(lambda: bool(consumer.poll(0.2)), "a record from the leader")
    assert _bytes_out(cluster, leader, topic) > 0


def test_the_spark_reader_with_a_rack_reads_from_the_in_sync_replica_there(
    cluster: LocalCluster, layout: tuple[str, int, int, int]
) -> None:
    topic, leader, follower, _ = layout
    before = _bytes_out(cluster, follower, topic), _bytes_out(cluster, leader, topic)
    with RangeFetcher(cluster.bootstrap, client_rack=_rack(cluster, follower)) as fetcher:
        got = [r.value for r in fetcher.records(OffsetRange(topic, 0, 10, RECORDS))]
    assert got == VALUES[10:]
    assert _bytes_out(cluster, follower, topic) - before[0] >= sum(map(len, VALUES[10:]))
    assert _bytes_out(cluster, leader, topic) == before[1]


def _fetch(cluster: LocalCluster, broker: int, topic: str, offset: int, epoch: int = -1) -> Any:
    request = BrokerFetchRequest(
        max_wait_ms=0,
        rack_id="rack-x",
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(partition=0, fetch_offset=offset, current_leader_epoch=epoch),
                ),
            ),
        ),
    )
    network = BrokerNetwork(cluster.bootstrap, request_timeout_s=10)
    try:
        response = network.call(
            cluster.broker_addresses[broker], "Fetch", request, BrokerFetchResponse
        )
    finally:
        network.close()
    (part,) = response.responses[0].partitions
    return part


def test_a_follower_answers_consumers_with_kafkas_errors(
    cluster: LocalCluster, layout: tuple[str, int, int, int]
) -> None:
    topic, leader, follower, _ = layout
    (p,) = cluster.describe_topic(topic).partitions
    served: FetchPartitionData = _fetch(cluster, follower, topic, 0, p.leader_epoch)
    assert served.error_code is ErrorCode.NONE and served.records
    assert served.high_watermark == RECORDS
    past_end = _fetch(cluster, follower, topic, RECORDS + 100, p.leader_epoch)
    assert past_end.error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    # KIP-320 on the follower: a consumer ahead of its metadata (FENCED_LEADER_EPOCH, the
    # other way round, is the same check: replication/core/fetch_validation.py).
    assert _fetch(cluster, follower, topic, 0, p.leader_epoch + 1).error_code is (
        ErrorCode.UNKNOWN_LEADER_EPOCH
    )
    # A consumer in no replica's rack reads from the leader itself.
    assert _fetch(cluster, leader, topic, 0).preferred_read_replica == -1
    # A broker that holds no replica of the partition.
    small = "fetch-from-follower-rf2"
    cluster.create_topic(small, 1, 2)
    (q,) = cluster.describe_topic(small).partitions
    (outsider,) = set(cluster.broker_ids) - set(q.replicas)
    # NB: until the outsider's metadata has the new topic it answers UNKNOWN_TOPIC_OR_PARTITION
    # (as Kafka's broker does); then NOT_LEADER_OR_FOLLOWER, the code this checks.
    codes: list[ErrorCode] = []

    def known() -> bool:
        codes.append(_fetch(cluster, outsider, small, 0).error_code)
        return codes[-1] is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    _wait(known, "the outsider's metadata naming the new topic")
    assert codes[-1] is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_quorum_topic_is_read_from_the_raft_follower_in_the_consumers_rack(
    cluster: LocalCluster,
) -> None:
    """A quorum topic's Raft leader names the voter in the consumer's rack, as an ISR leader
    names an in-sync follower, and that voter serves up to the commit offset its leader told
    it (`replication.driver.select.follower_views`, `reads_as_follower`)."""
    topic = "fetch-from-follower-quorum"
    cluster.create_topic(topic, 1, 3, config={"replication.mode": "quorum"})
    with Producer(cluster.bootstrap, acks="all", linger_ms=5) as producer:
        for future in [producer.send(topic, v, partition=0) for v in VALUES]:
            future.result(timeout=30)
    (p,) = cluster.describe_topic(topic).partitions
    follower = min(b for b in p.replicas if b != p.leader)
    # NB: the Raft log opens with the leader's control batch, so the records end past RECORDS
    committed = _fetch(cluster, p.leader, topic, 0).high_watermark
    _wait(
        lambda: _fetch(cluster, follower, topic, 0).high_watermark == committed,
        "the follower's commit offset at the leader's",
    )
    before = _bytes_out(cluster, follower, topic), _bytes_out(cluster, p.leader, topic)
    tp = TopicPartition(topic, 0)
    with Consumer(cluster.bootstrap, client_rack=_rack(cluster, follower)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(0.5))
    assert got == VALUES
    assert _bytes_out(cluster, follower, topic) - before[0] >= sum(map(len, VALUES))
    # librdkafka, on the Kafka listener, from the other voter
    other = max(b for b in p.replicas if b != p.leader)
    _wait(
        lambda: _fetch(cluster, other, topic, 0).high_watermark == committed,
        "the other follower's commit offset at the leader's",
    )
    before_other = _bytes_out(cluster, other, topic)
    read = _read_with_librdkafka(cluster, topic, _rack(cluster, other))
    assert read == VALUES
    assert _bytes_out(cluster, other, topic) - before_other >= sum(map(len, VALUES))
    assert _bytes_out(cluster, p.leader, topic) == before[1]
