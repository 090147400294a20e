"""The Apache Kafka peer cluster serves real clients: kafka-python, and Kafka's own console
producer and consumer (``java -cp``), against the suite's one 3+3 cluster (`kafka_peer`)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from kraft.peer import KafkaCluster
from kraft.peer.kafka import CLUSTER_FILE
from kraft.peer.probe import listed_brokers
from kraft.peer.tools import tool_command
from storage.config_registry import TOPIC_KEYS

pytestmark = [pytest.mark.kafka, pytest.mark.process]

TOOL_TIMEOUT_S = 120.0
"""A JVM tool on two busy cores: seconds to start, more to join a group."""


def _topic() -> str:
    return f"peer-{uuid.uuid4().hex[:8]}"


def _create_topic(kafka: KafkaCluster, name: str, partitions: int = 3) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics(
            [NewTopic(name, partitions, 3, topic_configs={"min.insync.replicas": "2"})]
        )
    finally:
        admin.close()


def test_cluster_json_names_the_bootstrap_and_the_running_nodes(kafka_peer: KafkaCluster) -> None:
    info = json.loads((kafka_peer.data_dir / CLUSTER_FILE).read_text())
    assert info["bootstrap"] == kafka_peer.bootstrap
    assert info["kafka_version"] == kafka_peer.version
    assert [n["id"] for n in info["controllers"]] == [1, 2, 3]
    assert [n["id"] for n in info["brokers"]] == [101, 102, 103]
    for node in [*info["controllers"], *info["brokers"]]:
        cmdline = Path(f"/proc/{node['pid']}/cmdline").read_bytes()
        assert b"kafka.Kafka" in cmdline, node  # the JVM itself, not a wrapper


def test_kafka_python_produces_with_acks_all_and_reads_everything_back(
    kafka_peer: KafkaCluster,
) -> None:
    topic = _topic()
    _create_topic(kafka_peer, topic)
    producer = KafkaProducer(bootstrap_servers=kafka_peer.bootstrap, acks="all", retries=5)
    sent = {}
    try:
        futures = [
            (
                f"k{i}".encode(),
                f"v{i}".encode(),
                producer.send(topic, f"v{i}".encode(), key=f"k{i}".encode()),
            )
            for i in range(300)
        ]
        producer.flush(timeout=60)
        for key, value, future in futures:
            meta = future.get(timeout=30)
            sent[(meta.partition, meta.offset)] = (key, value)
    finally:
        producer.close()
    assert len(sent) == 300

    consumer = KafkaConsumer(
        bootstrap_servers=kafka_peer.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got = {}
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        deadline = time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                for r in records:
                    got[(r.partition, r.offset)] = (r.key, r.value)
    finally:
        consumer.close()
    assert got == sent


def test_topics_get_kraft_s_defaults(kafka_peer: KafkaCluster) -> None:
    topic = _topic()
    admin = KafkaAdminClient(bootstrap_servers=kafka_peer.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, 1, -1)])  # the cluster's default replication
        deadline = time.monotonic() + 30
        while True:  # the broker asked may learn of the topic a moment after the controller
            [described] = admin.describe_topics([topic])
            if described["partitions"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        described_configs = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
        )
    finally:
        admin.close()
    assert len(described["partitions"][0]["replica_nodes"]) == 3
    configs = {k: v["value"] for k, v in described_configs["topic"][topic].items()}
    assert configs["segment.bytes"] == TOPIC_KEYS["segment.bytes"].default  # 64 MiB, not 1 GiB
    assert configs["min.insync.replicas"] == "2"
    assert configs["flush.messages"] == TOPIC_KEYS["flush.messages"].default


def test_kafka_console_producer_and_consumer_round_trip(kafka_peer: KafkaCluster) -> None:
    topic = _topic()
    _create_topic(kafka_peer, topic)
    lines = [f"line-{i}" for i in range(50)]
    produced = subprocess.run(
        tool_command(
            "kafka-console-producer",
            "--bootstrap-server",
            kafka_peer.bootstrap,
            "--topic",
            topic,
            "--command-property",
            "acks=all",
        ),
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        check=False,
    )
    assert produced.returncode == 0, produced.stderr[-2000:]
    consumed = subprocess.run(
        tool_command(
            "kafka-console-consumer",
            "--bootstrap-server",
            kafka_peer.bootstrap,
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            str(len(lines)),
            "--timeout-ms",
            "60000",
        ),
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        check=False,
    )
    assert consumed.returncode == 0, consumed.stderr[-2000:]
    assert sorted(consumed.stdout.splitlines()) == sorted(lines)


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by init, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.long
def test_kraft_peer_kafka_up_and_down(tmp_path: Path) -> None:
    """The command line: ``up`` returns once the brokers serve, with cluster.json written;
    ``down`` stops every JVM and the supervisor and keeps the data. In ``make test-long``: it
    starts a second Kafka cluster beside the suite's one (about 20 s of JVMs); ``make test``
    runs the same peer code through the suite's shared cluster."""
    from tests.kafka_peer import kafka_peer_unavailable

    reason = kafka_peer_unavailable()
    if reason is not None:
        pytest.skip(f"no Apache Kafka peer: {reason}")
    data_dir = tmp_path / "kafka"

    def kraft(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "kraft.cli",
                "peer",
                "kafka",
                *args,
                "--data-dir",
                str(data_dir),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    up = kraft("up", "--controllers", "1", "--brokers", "1", "--json")
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        info = json.loads(up.stdout)
        assert info == json.loads((data_dir / CLUSTER_FILE).read_text())
        [broker] = info["brokers"]
        assert listed_brokers(info["bootstrap"].split(",")[0]) == {101: broker["address"]}
        again = kraft("up")
        assert again.returncode == 1 and "already running" in again.stderr
    finally:
        down = kraft("down")
    assert down.returncode == 0, down.stderr
    pids = [info["supervisor_pid"], info["controllers"][0]["pid"], broker["pid"]]
    assert not [p for p in pids if _running(p)]
    assert not (data_dir / CLUSTER_FILE).exists()
    assert (data_dir / "broker-101" / "meta.properties").exists()  # the data stays
