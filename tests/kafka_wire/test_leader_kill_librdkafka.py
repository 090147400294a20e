"""The kill test through librdkafka (issue 25 item 5): the leader of a partition is killed with
SIGKILL while confluent-kafka produces to it idempotently with acks=all; afterwards the log
holds every record the producer had acknowledged, none twice, in the order produced.

Its own small cluster (1 controller, 3 brokers: the shared one must not lose a broker), RF 3
with ``min.insync.replicas=2``, so the two survivors keep acknowledging.
"""

from __future__ import annotations

import collections
import time

import confluent_kafka
import pytest

from kraft.cluster import LocalCluster
from replication.clients import AdminClient

pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]

TOPIC = "kill-during-produce"
ACKED_BEFORE_KILL = 2_000
"""Records acknowledged before the kill (the rest of the first phase is in flight then)."""
AFTER_KILL = 3_000
"""Records produced after the kill, to the new leader."""
PRODUCE_S = 90.0
"""The bound on each phase (and on the final flush)."""


def test_a_leader_killed_mid_produce_loses_no_acked_record_and_duplicates_none() -> None:
    with LocalCluster(controllers=1, brokers=3) as cluster:
        cluster.wait_until_healthy(timeout=60)
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topic(
                TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
            )
            admin.wait_for_leaders(TOPIC, timeout=30)
        leader = cluster.describe_topic(TOPIC).partitions[0].leader

        acked: list[int] = []
        failed: list[tuple[int, str]] = []

        def on_delivery(error: confluent_kafka.KafkaError | None, message: object) -> None:
            value = int(message.value())  # type: ignore[attr-defined]
            if error is None:
                acked.append(value)
            else:
                failed.append((value, error.name()))

        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": int(PRODUCE_S * 1000),
                "retry.backoff.ms": 50,
            }
        )
        sent = 0

        def produce_one() -> None:
            nonlocal sent
            while True:
                try:
                    producer.produce(TOPIC, value=str(sent).encode(), on_delivery=on_delivery)
                    break
                except BufferError:  # the local queue is full: serve callbacks, then retry
                    producer.poll(0.05)
            sent += 1
            producer.poll(0)

        # Phase 1: produce until enough is acknowledged, then kill the leader with more in
        # flight (produce() only queues: the loop keeps the queue non-empty).
        deadline = time.monotonic() + PRODUCE_S
        while len(acked) < ACKED_BEFORE_KILL and time.monotonic() < deadline:
            produce_one()
        assert len(acked) >= ACKED_BEFORE_KILL, f"only {len(acked)} acknowledged before the kill"
        in_flight_at_kill = sent - len(acked) - len(failed)
        acked_at_kill = set(acked)
        cluster.kill_broker(leader)

        # Phase 2: the producer finds the new leader and goes on.
        for _ in range(AFTER_KILL):
            produce_one()
        remaining = producer.flush(PRODUCE_S)
        assert remaining == 0, f"{remaining} records neither acknowledged nor failed"
        assert failed == [], f"failed deliveries: {failed[:5]}"
        new_leader = cluster.describe_topic(TOPIC).partitions[0].leader
        assert new_leader not in (leader, -1)

        log = read_everything(cluster)

    counts = collections.Counter(log)
    duplicated = sorted(v for v, n in counts.items() if n > 1)
    lost = sorted(set(acked) - set(counts))
    assert acked_at_kill <= set(counts), "records acknowledged before the kill were lost"
    assert lost == [], f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    assert duplicated == [], f"{len(duplicated)} records written twice, e.g. {duplicated[:5]}"
    assert log == sorted(log), "the log is not in the order produced"
    assert len(log) == sent  # every record acknowledged (none failed), each once
    assert in_flight_at_kill > 0, "nothing was in flight at the kill"
    print(  # the figures, with -s
        f"kill test: {sent} records, {len(acked_at_kill)} acknowledged and {in_flight_at_kill} "
        f"in flight at the kill of leader {leader}; new leader {new_leader}"
    )


def read_everything(cluster: LocalCluster) -> list[int]:
    """Every value of the partition, from offset 0 to the high watermark (librdkafka)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": "kill-test-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        partition = confluent_kafka.TopicPartition(TOPIC, 0)
        _, high = consumer.get_watermark_offsets(partition, timeout=15)
        consumer.assign(
            [confluent_kafka.TopicPartition(TOPIC, 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        values: list[int] = []
        next_offset = 0
        deadline = time.monotonic() + PRODUCE_S
        while next_offset < high and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error() is not None:
                continue
            values.append(int(message.value() or b"-1"))
            next_offset = message.offset() + 1
        assert next_offset >= high, f"read to offset {next_offset} of {high}"
        return values
    finally:
        consumer.close()
