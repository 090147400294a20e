"""Real Kafka clients consuming megabytes through a kraft cluster's plaintext Kafka listener, whose
Fetch responses carry the records as regions of the segment files sent with ``sendfile``
(`replication.broker.kafka.frame_writer`): librdkafka and kafka-python (which checks every
batch's CRC) each get exactly the records produced, in order."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka
import kafka
import pytest

from kraft.cluster import LocalCluster
from replication.clients import AdminClient

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

RECORDS = 4000
"""600-byte records: 2.4 MB in one partition, fetched 1 MiB (max.partition.fetch.bytes) at a
time, well over `storage.log_read.REGION_MIN_BYTES` a fetch."""


Read = list[tuple[int, bytes]]
"""(offset, value) of each record polled."""


def _read_all(poll: Callable[[], Read], timeout_s: float = 60) -> Read:
    """``poll()`` until `RECORDS` records came (or the deadline passed)."""
    out: Read = []
    deadline = time.monotonic() + timeout_s
    while len(out) < RECORDS and time.monotonic() < deadline:
        out.extend(poll())
    return out


def _values() -> list[bytes]:
    rng = random.Random(27)
    return [f"{i:06d}-".encode() + rng.randbytes(593) for i in range(RECORDS)]


@pytest.fixture(scope="module")
def produced(cluster: LocalCluster) -> tuple[str, list[bytes]]:
    topic = "sendfile"
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(
            topic, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
        )
        admin.wait_for_leaders(topic, timeout=30)
    values = _values()
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.kafka_bootstrap, "acks": "all", "linger.ms": 20}
    )
    errors: list[Any] = []
    for value in values:
        producer.produce(
            topic, value=value, on_delivery=lambda e, _m: errors.append(e) if e else None
        )
        producer.poll(0)
    assert producer.flush(60) == 0 and errors == []
    return topic, values


def test_librdkafka_consumes_exactly_the_records_produced(
    cluster: LocalCluster, produced: tuple[str, list[bytes]]
) -> None:
    topic, values = produced
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": "sendfile-librdkafka",
            "enable.auto.commit": False,
            "check.crcs": True,
        }
    )
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)]
        )

        def poll() -> Read:
            messages = consumer.consume(1000, 1.0)
            assert all(m.error() is None for m in messages), [m.error() for m in messages]
            return [(m.offset() or 0, m.value() or b"") for m in messages]

        got = _read_all(poll)
    finally:
        consumer.close()
    assert got == list(enumerate(values))


def test_kafka_python_consumes_exactly_the_records_produced(
    cluster: LocalCluster, produced: tuple[str, list[bytes]]
) -> None:
    topic, values = produced
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.kafka_bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        check_crcs=True,
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek_to_beginning()

        def poll() -> Read:
            batches = consumer.poll(timeout_ms=1000, max_records=1000)
            return [(r.offset, r.value) for records in batches.values() for r in records]

        got = _read_all(poll)
    finally:
        consumer.close()
    assert got == list(enumerate(values))
