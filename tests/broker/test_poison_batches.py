"""Issue 10, finding 3, on real broker processes: forged batches with a recomputed CRC sent
through the real Produce RPC are refused with Kafka's codes and leave nothing behind, so
consumers read every good record before and after; and a poison batch already in a segment
(one an older broker accepted) stops only its partition for a consumer, which skips it with
``seek``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraft.cluster import LocalCluster
from kraft.cluster.process import wait_for
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, ConsumerRecord, Producer
from replication.clients.network import BrokerNetwork
from replication.messages import (
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from storage.errors import CorruptRecordError, ErrorCode
from storage.records import set_base_offset
from tests.broker.clusters import running_cluster
from tests.storage.forged_batches import MALFORMED, good_batch

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

# The kinds the issue found acknowledged, by the name `MALFORMED` gives them.
_ISSUE_KINDS = (
    "record count 0",
    "record count 1000, 3 records",
    "last offset delta 1000",
    "garbage records",
    "gzip flag on plain records",
    "codec id 7",
    "control bit",
    "transactional bit",
    "negative base timestamp",
)
_FORGED = {kind: (batch, error) for kind, batch, error in MALFORMED if kind in _ISSUE_KINDS}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with running_cluster() as c:
        yield c


def _produce(
    network: BrokerNetwork, address: str, topic: str, batches: dict[int, bytes]
) -> dict[int, ErrorCode]:
    request = ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topic_data=(
            ProduceTopicData(
                name=topic,
                partition_data=tuple(
                    ProducePartitionData(index=p, records=b) for p, b in batches.items()
                ),
            ),
        ),
    )
    response = network.call(address, "Produce", request, ProduceResponse, timeout_s=30)
    return {p.index: p.error_code for t in response.responses for p in t.partition_responses}


def _consume(
    bootstrap: str, tps: list[TopicPartition], expected: int
) -> tuple[list[ConsumerRecord], list[CorruptRecordError], Consumer]:
    consumer = Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100)
    consumer.assign(tps)
    out: list[ConsumerRecord] = []
    errors: list[CorruptRecordError] = []
    deadline = time.monotonic() + 60
    while len(out) < expected and time.monotonic() < deadline:
        try:
            out.extend(consumer.poll(timeout=1.0))
        except CorruptRecordError as e:
            errors.append(e)
    return out, errors, consumer


def test_forged_batches_are_refused_and_consumers_read_every_good_record(
    cluster: LocalCluster,
) -> None:
    topic = "poison"
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(
            topic, partitions=6, replication_factor=3, config={"min.insync.replicas": "2"}
        )
        described = admin.wait_for_leaders(topic, timeout=30)
    leaders = {p.partition: p.leader for p in described.partitions}
    # Two partitions on one leader: a bad batch in one must not fail the other.
    bad, good = next((a, b) for a in leaders for b in leaders if a < b and leaders[a] == leaders[b])
    address = cluster.broker_addresses[leaders[bad]]
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i in range(10):
            producer.send(topic, value=b"before-%d" % i, partition=bad)
        producer.flush()
    network = BrokerNetwork(cluster.bootstrap, request_timeout_s=30)
    try:
        for kind, (batch, error) in _FORGED.items():
            codes = _produce(network, address, topic, {bad: batch, good: good_batch(2)})
            assert codes == {bad: error.code, good: ErrorCode.NONE}, kind
    finally:
        network.close()
    with Producer(cluster.bootstrap, acks="all") as producer:
        futures = [producer.send(topic, value=b"after-%d" % i, partition=bad) for i in range(10)]
        producer.flush()
        assert [f.result(timeout=30).offset for f in futures] == list(range(10, 20))
    records, errors, consumer = _consume(cluster.bootstrap, [TopicPartition(topic, bad)], 20)
    consumer.close()
    assert not errors
    assert [(r.offset, r.value) for r in records] == [
        *((i, b"before-%d" % i) for i in range(10)),
        *((10 + i, b"after-%d" % i) for i in range(10)),
    ]


def test_a_poison_batch_in_a_segment_stops_only_its_partition_until_seek(
    cluster: LocalCluster,
) -> None:
    topic = "planted"
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(topic, partitions=3, replication_factor=1)
        described = admin.wait_for_leaders(topic, timeout=30)
    with Producer(cluster.bootstrap, acks="all") as producer:
        for p in range(3):
            for i in range(5):
                producer.send(topic, value=b"%d-%d" % (p, i), partition=p)
        producer.flush()
    # As an older broker would have: a CRC-valid batch of garbage records at offsets 5..7.
    leader = described.partitions[0].leader
    poison = bytearray(next(b for kind, b, _ in MALFORMED if kind == "garbage records"))
    set_base_offset(poison, 5)
    cluster.kill_broker(leader)
    segment = Path(cluster.broker_data_dir(leader)) / f"{topic}-0" / f"{0:020d}.log"
    with segment.open("ab") as f:
        f.write(poison)
    cluster.start_broker(leader)
    with AdminClient(cluster.bootstrap) as admin:

        def led_again() -> bool:
            return admin.describe_topic(topic).partitions[0].leader == leader

        wait_for(led_again, 60, "the restarted broker leading the planted partition")
    with Producer(cluster.bootstrap, acks="all") as producer:
        futures = [producer.send(topic, value=b"0-after-%d" % i, partition=0) for i in range(3)]
        producer.flush()
        assert [f.result(timeout=30).offset for f in futures] == [8, 9, 10]

    tps = [TopicPartition(topic, p) for p in range(3)]
    records, errors, consumer = _consume(cluster.bootstrap, tps, 15)
    try:
        got = sorted((r.partition, r.offset) for r in records)
        assert got == [(0, o) for o in range(5)] + [(p, o) for p in (1, 2) for o in range(5)]
        deadline = time.monotonic() + 30
        while not errors and time.monotonic() < deadline:
            try:
                assert not consumer.poll(timeout=1.0)
            except CorruptRecordError as e:
                errors.append(e)
        error = errors[0]
        assert (error.topic, error.partition, error.offset, error.next_offset) == (topic, 0, 5, 8)
        consumer.seek(tps[0], error.next_offset)
        rest: list[ConsumerRecord] = []
        while len(rest) < 3 and time.monotonic() < deadline:
            rest.extend(consumer.poll(timeout=1.0))
        assert [(r.offset, r.value) for r in rest] == [(8 + i, b"0-after-%d" % i) for i in range(3)]
    finally:
        consumer.close()
