"""Apache Kafka's own transactional Java program against kraft (issue 28): Kafka's
``TransactionalMessageCopier`` (the exactly-once copier of Kafka's system tests) copies a kraft
topic's partition into another kraft topic through ``kraft peer kafka tool``, in transactions
that commit the consumed offsets with the output (``sendOffsetsToTransaction`` with the group's
metadata, KIP-447) and abort at random; a read_committed consumer then finds every input record
in the output exactly once. ``kafka-transactions`` (``TransactionsCommand``) lists and describes
the copier's transactional id.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import confluent_kafka
import pytest

from kraft.cluster import LocalCluster
from replication.clients import Producer
from tests.kafka_java.conftest import TOOL_TIMEOUT_S, create_topic, run_tool

pytestmark = [pytest.mark.java, pytest.mark.process, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
RECORDS = 300


def read_committed(cluster: LocalCluster, topic: str, partitions: int, want: int) -> list[bytes]:
    """Every value of ``topic`` at read_committed, once ``want`` arrived and every partition
    reached its end (a deadline bounds the wait)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 3,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (len(got) < want or len(at_end) < partitions):
            m = consumer.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                continue
            at_end.discard(m.partition())
            got.append(m.value())
        return got
    finally:
        consumer.close()


def test_kafkas_transactional_copier_copies_every_record_exactly_once(
    cluster: LocalCluster,
) -> None:
    source = create_topic(cluster, "eos-in", partitions=1)
    sink = create_topic(cluster, "eos-out", partitions=3)
    values = [f"record-{i}".encode() for i in range(RECORDS)]
    with Producer(cluster.bootstrap, acks="all") as producer:
        for f in [producer.send(source, value=v, partition=0) for v in values]:
            f.result(timeout=30)
    tid = f"copier-{uuid.uuid4().hex[:8]}"
    copier = subprocess.run(
        [
            *(sys.executable, "-m", "kraft.cli", "peer", "kafka", "tool"),
            "transactional-message-copier",
            *("--broker-list", cluster.kafka_bootstrap),
            *("--input-topic", source, "--input-partition", "0", "--output-topic", sink),
            *("--transactional-id", tid, "--consumer-group", f"{tid}-group"),
            *("--transaction-size", "40", "--transaction-timeout", "30000"),
            "--enable-random-aborts",
            "--use-group-metadata",
        ],
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert copier.returncode == 0, copier.stderr[-3000:]
    statuses = [json.loads(line) for line in copier.stdout.splitlines() if line.startswith("{")]
    assert statuses and statuses[-1]["remaining"] == 0, copier.stdout[-2000:]
    assert statuses[-1]["transactionalId"] == tid

    copied = read_committed(cluster, sink, 3, RECORDS)
    assert sorted(copied) == sorted(values)  # every record, once: none aborted, none twice

    listed = run_tool("kafka-transactions", "--bootstrap-server", cluster.kafka_bootstrap, "list")
    rows = [line.split() for line in listed.splitlines()]
    assert rows[0][:4] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    (row,) = [r for r in rows if r[0] == tid]
    assert row[3] in ("CompleteCommit", "CompleteAbort", "Empty")
    described = run_tool(
        "kafka-transactions",
        *("--bootstrap-server", cluster.kafka_bootstrap),
        *("describe", "--transactional-id", tid),
    )
    header, line = [r for r in described.splitlines() if r.strip()][:2]
    assert header.split()[:3] == ["CoordinatorId", "TransactionalId", "ProducerId"]
    assert line.split()[1] == tid and line.split()[2] == row[2]
