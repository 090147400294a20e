"""A quorum-mode topic (``replication.mode=quorum``: each partition a Raft group) is served on
the Kafka listener by the same APIs as an ISR topic (issue 25 item 3): librdkafka creates it
through CreateTopics with the config, produces idempotently with acks=all and reads it back, and
kraft's own Consumer reads the same records."""

from __future__ import annotations

import time

import confluent_kafka
import confluent_kafka.admin as ck
import pytest

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]


def test_librdkafka_creates_writes_and_reads_a_quorum_topic(cluster: LocalCluster) -> None:
    topic, count = "kafka-quorum", 300
    admin = ck.AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    new = ck.NewTopic(topic, 2, 3, config={"replication.mode": "quorum"})
    admin.create_topics([new])[topic].result(timeout=60)
    with AdminClient(cluster.bootstrap) as kraft_admin:
        kraft_admin.wait_for_leaders(topic, timeout=60)
        described = {e.name: e.value for e in kraft_admin.describe_configs("topic", topic)}
    assert described["replication.mode"] == "quorum"

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.kafka_bootstrap, "enable.idempotence": True, "acks": "all"}
    )
    for i in range(count):
        producer.produce(topic, value=b"q-%d" % i, partition=i % 2)
    assert producer.flush(60) == 0

    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "kafka-quorum-reader",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(2)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
        if len(seen) >= count:
            break
    consumer.close()
    assert sorted(seen) == sorted(b"q-%d" % i for i in range(count))

    mine: list[bytes] = []
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as kraft_consumer:
        kraft_consumer.assign([TopicPartition(topic, p) for p in range(2)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            mine.extend(r.value or b"" for r in kraft_consumer.poll(timeout=0.5))
            if len(mine) >= count:
                break
    assert sorted(mine) == sorted(seen)
