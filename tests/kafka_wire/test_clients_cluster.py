"""Real Kafka clients against a real kraft cluster's Kafka listeners (issue 25): kafka-python,
aiokafka and confluent-kafka (librdkafka) each produce idempotently with acks=all, read it back
by manual assignment, and commit and fetch offsets; kraft's own clients and librdkafka read each
other's records; Metadata on the Kafka listener advertises the Kafka listeners; a KIP-848
consumer group (``group.protocol=consumer``) runs through librdkafka.

One cluster (`conftest.cluster`) serves the whole package (the suite's time is tight); each test
has its own topic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiokafka
import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, Producer
from storage.records import iter_batches

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

PARTITIONS = 3
RECORDS = 20


def new_topic(cluster: LocalCluster, name: str) -> str:
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(
            name,
            partitions=PARTITIONS,
            replication_factor=3,
            config={"min.insync.replicas": "2"},
        )
        admin.wait_for_leaders(name, timeout=30)
    return name


def expected_values(prefix: str) -> list[bytes]:
    return sorted(f"{prefix}-{i}".encode() for i in range(RECORDS))


def eventually(read: Callable[[], list[bytes]], want: int, timeout_s: float = 30) -> list[bytes]:
    """Accumulate ``read()`` until ``want`` values came (or the deadline passes)."""
    out: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < want and time.monotonic() < deadline:
        out.extend(read())
    return sorted(out)


def producer_ids(cluster: LocalCluster, topic: str) -> set[int]:
    """The producer id of every batch of ``topic`` on disk (each partition from its leader)."""
    description = cluster.describe_topic(topic)
    ids = set()
    for partition in description.partitions:
        directory = cluster.broker_data_dir(partition.leader) / f"{topic}-{partition.partition}"
        for segment in sorted(Path(directory).glob("*.log")):
            ids |= {header.producer_id for _, header in iter_batches(segment.read_bytes())}
    return ids


def kraft_read(cluster: LocalCluster, topic: str) -> list[bytes]:
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        return eventually(lambda: [r.value or b"" for r in consumer.poll(timeout=1.0)], RECORDS)


# -- kafka-python -------------------------------------------------------------------------------


def test_kafka_python_produces_idempotently_reads_back_and_commits(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "kafka-python")
    producer = kafka.KafkaProducer(
        bootstrap_servers=cluster.kafka_bootstrap, acks="all", enable_idempotence=True
    )
    try:
        futures = [
            producer.send(topic, key=f"k{i}".encode(), value=f"kp-{i}".encode())
            for i in range(RECORDS)
        ]
        offsets = [f.get(timeout=30) for f in futures]
    finally:
        producer.close()
    assert all(o.offset >= 0 for o in offsets)
    assert -1 not in producer_ids(cluster, topic), "a batch without a producer id"

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.kafka_bootstrap,
        group_id="kafka-python-group",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        tps = [kafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        got = eventually(
            lambda: [r.value for rs in consumer.poll(1000).values() for r in rs], RECORDS
        )
        assert got == expected_values("kp")
        # ListOffsets: earliest, latest, and by timestamp (the first record at or after it).
        begins, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        assert set(begins.values()) == {0} and sum(ends.values()) == RECORDS
        by_time = consumer.offsets_for_times({tp: 0 for tp in tps})
        assert {tp: t.offset for tp, t in by_time.items() if t is not None} == {
            tp: 0 for tp in tps if ends[tp] > 0
        }
        assert consumer.offsets_for_times({tps[0]: 2**42})[tps[0]] is None  # none that late
        consumer.commit({tps[1]: kafka.OffsetAndMetadata(3, "meta", -1)})
        assert consumer.committed(tps[1]) == 3
        assert consumer.committed(tps[2]) is None
    finally:
        consumer.close()


def test_metadata_on_the_kafka_listener_advertises_every_brokers_kafka_listener(
    cluster: LocalCluster,
) -> None:
    consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        assert consumer.topics() is not None  # a Metadata round trip
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in consumer._client.cluster.brokers()}
    finally:
        consumer.close()
    assert brokers == cluster.kafka_addresses
    assert not set(brokers.values()) & set(cluster.broker_addresses.values())
    # DescribeCluster (librdkafka's admin) gives the same endpoints, and as the controller a
    # broker (KRaft: clients cannot reach the controllers; brokers forward, KIP-590).
    admin = ConfluentAdmin({"bootstrap.servers": cluster.kafka_bootstrap})
    described = admin.describe_cluster(request_timeout=15).result(timeout=20)
    assert {n.id: f"{n.host}:{n.port}" for n in described.nodes} == cluster.kafka_addresses
    assert described.controller is not None
    assert described.controller.id in cluster.broker_ids
    # Both listeners are registered with the controller, the inter-broker (gRPC) one first.
    registered = cluster.controller_client().describe_cluster(topic_names=()).brokers
    assert {b.broker_id: [(e.name, e.address) for e in b.listeners] for b in registered} == {
        i: [("PLAINTEXT", cluster.broker_addresses[i]), ("KAFKA", cluster.kafka_addresses[i])]
        for i in cluster.broker_ids
    }


# -- aiokafka -----------------------------------------------------------------------------------


def test_aiokafka_produces_idempotently_reads_back_and_commits(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "aiokafka")

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=cluster.kafka_bootstrap, acks="all", enable_idempotence=True
        )
        await producer.start()
        try:
            for i in range(RECORDS):
                await producer.send_and_wait(topic, f"ak-{i}".encode(), key=f"k{i}".encode())
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=cluster.kafka_bootstrap,
            group_id="aiokafka-group",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            tps = [aiokafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(tps)
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < RECORDS and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000)
                got.extend(r.value for rs in batches.values() for r in rs if r.value)
            assert sorted(got) == expected_values("ak")
            await consumer.commit({tps[0]: 2})
            assert await consumer.committed(tps[0]) == 2
        finally:
            await consumer.stop()

    asyncio.run(run())
    assert -1 not in producer_ids(cluster, topic), "a batch without a producer id"


# -- confluent-kafka (librdkafka) ---------------------------------------------------------------


def confluent_produce(bootstrap: str, topic: str, prefix: str) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}
    )
    errors: list[Any] = []
    for i in range(RECORDS):
        producer.produce(
            topic,
            key=f"k{i}".encode(),
            value=f"{prefix}-{i}".encode(),
            on_delivery=lambda error, _message: errors.append(error) if error else None,
        )
    assert producer.flush(30) == 0 and errors == []


def confluent_read(bootstrap: str, topic: str, group: str) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.assign(
            [
                confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                for p in range(PARTITIONS)
            ]
        )

        def poll() -> list[bytes]:
            message = consumer.poll(1.0)
            if message is None or message.error() is not None:
                return []
            return [message.value() or b""]

        return eventually(poll, RECORDS)
    finally:
        consumer.close()


def test_confluent_kafka_produces_idempotently_reads_back_and_commits(
    cluster: LocalCluster,
) -> None:
    topic = new_topic(cluster, "confluent")
    confluent_produce(cluster.kafka_bootstrap, topic, "ck")
    assert -1 not in producer_ids(cluster, topic), "a batch without a producer id"
    assert confluent_read(cluster.kafka_bootstrap, topic, "ck-group") == expected_values("ck")

    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "ck-commits"}
    )
    try:
        committed = consumer.commit(
            offsets=[confluent_kafka.TopicPartition(topic, 1, 4)], asynchronous=False
        )
        assert committed is not None and committed[0].error is None
        (fetched,) = consumer.committed([confluent_kafka.TopicPartition(topic, 1)], timeout=15)
        assert fetched.offset == 4 and fetched.error is None
    finally:
        consumer.close()


def test_kraft_reads_what_librdkafka_wrote_and_librdkafka_what_kraft_wrote(
    cluster: LocalCluster,
) -> None:
    from_librdkafka = new_topic(cluster, "from-librdkafka")
    confluent_produce(cluster.kafka_bootstrap, from_librdkafka, "rd")
    assert kraft_read(cluster, from_librdkafka) == expected_values("rd")

    from_kraft = new_topic(cluster, "from-kraft")
    with Producer(cluster.bootstrap, acks="all", enable_idempotence=True) as producer:
        for i in range(RECORDS):
            producer.send(from_kraft, key=f"k{i}".encode(), value=f"kr-{i}".encode())
        producer.flush(timeout=30)
    got = confluent_read(cluster.kafka_bootstrap, from_kraft, "from-kraft-group")
    assert got == expected_values("kr")


def test_a_kip_848_group_consumes_through_librdkafka_and_admin_sees_it(
    cluster: LocalCluster,
) -> None:
    topic = new_topic(cluster, "kip848")
    confluent_produce(cluster.kafka_bootstrap, topic, "g")
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": "kip848-group",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    admin = ConfluentAdmin({"bootstrap.servers": cluster.kafka_bootstrap})
    try:
        consumer.subscribe([topic])

        def poll() -> list[bytes]:
            message = consumer.poll(1.0)
            if message is None or message.error() is not None:
                return []
            return [message.value() or b""]

        assert eventually(poll, RECORDS) == expected_values("g")
        assert {tp.partition for tp in consumer.assignment()} == set(range(PARTITIONS))
        consumer.commit(asynchronous=False)
        listed = admin.list_consumer_groups().result(timeout=15)
        assert "kip848-group" in {g.group_id for g in listed.valid}
        description = admin.describe_consumer_groups(["kip848-group"])["kip848-group"].result(
            timeout=15
        )
        assert len(description.members) == 1
        assert {tp.partition for tp in description.members[0].assignment.topic_partitions} == set(
            range(PARTITIONS)
        )
    finally:
        consumer.close()
    # The member left with close(): the empty group can be deleted (DeleteGroups).
    admin.delete_consumer_groups(["kip848-group"])["kip848-group"].result(timeout=15)
    listed = admin.list_consumer_groups().result(timeout=15)
    assert "kip848-group" not in {g.group_id for g in listed.valid}
