"""Real Kafka admin clients against a real kraft cluster's Kafka listeners (issue 25 item 5):
kafka-python's KafkaAdminClient, aiokafka's AIOKafkaAdminClient and confluent-kafka's
AdminClient (librdkafka) each create a topic, describe it and its configs, alter a config,
add partitions and delete it; the errors come back as each client's own exception type. Kafka's
own ``kafka-topics`` and ``kafka-configs`` (Java, from the jar cache) do the same.

On the package's one cluster (`conftest.cluster`), whose authorizer is off: every ACL request
is answered SECURITY_DISABLED, as Kafka's are (nothing would enforce a stored ACL).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka
import kafka.errors
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewPartitions as AioNewPartitions
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioConfigResourceType
from confluent_kafka import admin as ck
from kafka.admin import (
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewPartitions,
    NewTopic,
)

from kraft.cluster import LocalCluster

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

DYNAMIC_TOPIC_CONFIG = 1
DEFAULT_CONFIG = 5
RETENTION_DEFAULT = str(7 * 24 * 3600 * 1000)


def until(condition: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def topic_names(cluster: LocalCluster) -> set[str]:
    return {t.name for t in cluster.controller_client().describe_cluster().topics}


# -- kafka-python -------------------------------------------------------------------------------


def test_kafka_python_admin_creates_describes_alters_grows_and_deletes(
    cluster: LocalCluster,
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    topic = "kp-admin"
    try:
        admin.create_topics(
            [NewTopic(topic, 2, 3, topic_configs={"retention.ms": "100000"})], timeout_ms=30000
        )
        with pytest.raises(kafka.errors.TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic, 2, 3)], timeout_ms=30000)
        # Described at once: the answer waited for the broker's metadata.
        (described,) = admin.describe_topics([topic])
        assert described["error_code"] == 0 and len(described["partitions"]) == 2
        assert all(len(p["replica_nodes"]) == 3 for p in described["partitions"])

        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        configs = admin.describe_configs([resource], config_filter="all")["topic"][topic]
        assert configs["retention.ms"]["value"] == "100000"
        assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert configs["segment.ms"]["config_source"] == "DEFAULT_CONFIG"

        # IncrementalAlterConfigs (the client's choice when the broker offers it) ...
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"segment.ms": "3600000"})]
        )
        configs = admin.describe_configs([resource], config_filter="all")["topic"][topic]
        assert configs["segment.ms"]["value"] == "3600000"
        assert configs["retention.ms"]["value"] == "100000"  # untouched
        # ... and the legacy AlterConfigs (which replaces the whole dynamic config: kafka-python
        # sends the other dynamic keys along).
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"segment.ms": "7200000"})],
            incremental=False,
        )
        configs = admin.describe_configs([resource], config_filter="all")["topic"][topic]
        assert configs["segment.ms"]["value"] == "7200000"
        assert configs["retention.ms"]["value"] == "100000"

        admin.create_partitions({topic: NewPartitions(4)})
        (described,) = admin.describe_topics([topic])
        assert len(described["partitions"]) == 4
        # AlterPartitionReassignments to the same replicas in another order (nothing to copy),
        # then a preferred ElectLeaders moves the leader to the new first replica.
        replicas = next(
            p["replica_nodes"] for p in described["partitions"] if p["partition_index"] == 0
        )
        wanted = [*replicas[1:], replicas[0]]
        partition = kafka.TopicPartition(topic, 0)
        assert admin.alter_partition_reassignments({partition: wanted}) == {partition: None}
        until(lambda: admin.list_partition_reassignments({topic: [0]}) == {})

        def leader_is_preferred() -> bool:
            admin.elect_leaders(0, {topic: [0]})  # ELECTION_NOT_NEEDED once it is
            (d,) = admin.describe_topics([topic])
            return any(
                p["partition_index"] == 0 and p["leader_id"] == wanted[0] for p in d["partitions"]
            )

        until(leader_is_preferred)
        # DescribeTopicPartitions (KIP-966) pages with a cursor.
        first = admin.describe_topic_partitions([topic], response_partition_limit=3)
        assert [p["partition_index"] for p in first["topics"][0]["partitions"]] == [0, 1, 2]
        assert first["next_cursor"] == {"topic_name": topic, "partition_index": 3}
        rest = admin.describe_topic_partitions(
            [topic], response_partition_limit=3, cursor=first["next_cursor"]
        )
        assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [3]
        assert rest["next_cursor"] is None

        admin.delete_topics([topic], timeout_ms=30000)
        assert topic not in admin.list_topics()
        with pytest.raises(kafka.errors.UnknownTopicOrPartitionError):
            admin.delete_topics([topic], timeout_ms=30000)
    finally:
        admin.close()
    assert topic not in topic_names(cluster)


def test_kafka_python_describes_producers_and_log_dirs(cluster: LocalCluster) -> None:
    topic = "kp-producers"
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    producer = kafka.KafkaProducer(
        bootstrap_servers=cluster.kafka_bootstrap, acks="all", enable_idempotence=True
    )
    try:
        admin.create_topics([NewTopic(topic, 1, 3)], timeout_ms=30000)
        for i in range(5):
            producer.send(topic, f"v{i}".encode(), partition=0).get(timeout=30)
        partition = kafka.TopicPartition(topic, 0)
        # DescribeProducers (the leader's idempotent-producer state, KIP-664).
        (state,) = admin.describe_producers([partition])[partition].active_producers
        assert state.producer_epoch == 0 and state.last_sequence == 4
        assert state.producer_id >= 0 and state.last_timestamp > 0
        # DescribeLogDirs: every broker holds the partition (replication factor 3).
        described = admin.describe_log_dirs({topic: [0]})
        assert sorted(d["broker"] for d in described) == sorted(cluster.broker_ids)
        for broker in described:
            (log_dir,) = broker["log_dirs"]
            assert log_dir["error_code"] == 0 and log_dir["total_bytes"] > 0
            ((name, partitions),) = [(t["name"], t["partitions"]) for t in log_dir["topics"]]
            assert name == topic and [p["partition_index"] for p in partitions] == [0]
    finally:
        producer.close()
        admin.close()


# -- aiokafka -----------------------------------------------------------------------------------


def test_aiokafka_admin_creates_describes_alters_grows_and_deletes(cluster: LocalCluster) -> None:
    topic = "ak-admin"

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
        await admin.start()
        try:
            created = await admin.create_topics([AioNewTopic(topic, 2, 3)])
            assert [e[:2] for e in created.topic_errors] == [(topic, 0)]
            (described,) = await admin.describe_topics([topic])
            assert described["error_code"] == 0 and len(described["partitions"]) == 2

            resource = AioConfigResource(AioConfigResourceType.TOPIC, topic)
            altered = await admin.alter_configs(
                [AioConfigResource(AioConfigResourceType.TOPIC, topic, {"retention.ms": "300000"})]
            )
            assert [r[0] for r in altered[0].resources] == [0]
            (answer,) = await admin.describe_configs([resource])
            entries = {e[0]: e for e in answer.resources[0][4]}
            assert entries["retention.ms"][1] == "300000"
            assert entries["retention.ms"][3] == DYNAMIC_TOPIC_CONFIG

            grown = await admin.create_partitions({topic: AioNewPartitions(3)})
            assert [e[1] for e in grown.topic_errors] == [0]
            (described,) = await admin.describe_topics([topic])
            assert len(described["partitions"]) == 3

            deleted = await admin.delete_topics([topic])
            assert [e[1] for e in deleted.topic_error_codes] == [0]
        finally:
            await admin.close()

    asyncio.run(run())
    assert topic not in topic_names(cluster)


# -- confluent-kafka (librdkafka) ---------------------------------------------------------------


def results(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: future.result(timeout=30) for key, future in futures.items()}


def test_confluent_admin_creates_describes_alters_grows_acls_and_deletes(
    cluster: LocalCluster,
) -> None:
    admin = ck.AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    topic = "ck-admin"
    # validate_only checks and creates nothing.
    results(admin.create_topics([ck.NewTopic(topic, 2, 3)], validate_only=True))
    assert topic not in topic_names(cluster)
    # -1: the broker's defaults (KIP-464).
    results(admin.create_topics([ck.NewTopic(topic, config={"retention.ms": "100000"})]))
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        results(admin.create_topics([ck.NewTopic(topic, 2, 3)]))
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS

    described = results(admin.describe_topics(confluent_kafka.TopicCollection([topic])))[topic]
    partitions = len(described.partitions)
    assert partitions >= 1 and described.topic_id is not None

    resource = ck.ConfigResource("topic", topic)
    results(
        admin.incremental_alter_configs(
            [
                ck.ConfigResource(
                    "topic",
                    topic,
                    incremental_configs=[
                        ck.ConfigEntry(
                            "retention.ms", None, incremental_operation=ck.AlterConfigOpType.DELETE
                        ),
                        ck.ConfigEntry(
                            "segment.ms", "3600000", incremental_operation=ck.AlterConfigOpType.SET
                        ),
                    ],
                )
            ]
        )
    )
    configs = results(admin.describe_configs([resource]))[resource]
    assert configs["segment.ms"].value == "3600000"
    assert configs["segment.ms"].source == DYNAMIC_TOPIC_CONFIG
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        RETENTION_DEFAULT,
        DEFAULT_CONFIG,
    )
    broker = ck.ConfigResource("broker", str(min(cluster.broker_ids)))
    assert "log.retention.ms" in results(admin.describe_configs([broker]))[broker]

    results(admin.create_partitions([ck.NewPartitions(topic, partitions + 2)]))
    described = results(admin.describe_topics(confluent_kafka.TopicCollection([topic])))[topic]
    assert len(described.partitions) == partitions + 2

    # ListOffsets v7+: the record with the largest timestamp (KIP-734), the first of equals.
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap})
    for stamp in (1000, 3000, 2000, 3000):
        producer.produce(topic, b"v", partition=0, timestamp=stamp)
    assert producer.flush(30) == 0
    partition = confluent_kafka.TopicPartition(topic, 0)
    newest = results(admin.list_offsets({partition: ck.OffsetSpec.max_timestamp()}))[partition]
    assert (newest.offset, newest.timestamp) == (1, 3000)

    acl = ck.AclBinding(
        ck.ResourceType.TOPIC,
        topic,
        ck.ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        ck.AclOperation.READ,
        ck.AclPermissionType.ALLOW,
    )
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        results(admin.create_acls([acl]))
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.SECURITY_DISABLED

    results(admin.delete_topics([topic]))
    until(lambda: topic not in admin.list_topics(timeout=10).topics)
    with pytest.raises(confluent_kafka.KafkaException) as unknown:
        results(admin.delete_topics([topic]))
    assert unknown.value.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


# -- Kafka's own tools (Java) -------------------------------------------------------------------

KAFKA_JARS = Path(os.environ.get("KRAFT_KAFKA_JARS", "/root/.cache/kraft/jars/kafka-4.4.0"))
"""Kafka 4.x's jars (fetched from Maven Central into the cache, never into the repository)."""


def kafka_tool(tool: str, *args: str) -> str:
    """Run one of Kafka's command-line tools (``org.apache.kafka.tools.<tool>``); its stdout."""
    done = subprocess.run(
        ["java", "-cp", str(KAFKA_JARS / "*"), f"org.apache.kafka.tools.{tool}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{tool} {args}: {done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.skipif(
    shutil.which("java") is None or not any(KAFKA_JARS.glob("kafka-tools-*.jar")),
    reason="no Java or no Kafka jars in the cache",
)
def test_kafka_topics_and_kafka_configs_create_describe_alter_and_delete(
    cluster: LocalCluster,
) -> None:
    server = ("--bootstrap-server", cluster.kafka_bootstrap)
    topic = ("--topic", "java-admin-wire")
    created = kafka_tool(
        "TopicCommand", *server, "--create", *topic, "--partitions", "3",
        "--replication-factor", "3", "--config", "retention.ms=100000",
    )  # fmt: skip
    assert "Created topic java-admin-wire." in created
    kafka_tool("TopicCommand", *server, "--alter", *topic, "--partitions", "4")
    # --describe: the Java admin's describeTopics is DescribeTopicPartitions (KIP-966).
    described = kafka_tool("TopicCommand", *server, "--describe", *topic)
    assert "PartitionCount: 4" in described and "ReplicationFactor: 3" in described
    assert described.count("Leader: ") == 4
    entity = ("--entity-type", "topics", "--entity-name", "java-admin-wire")
    kafka_tool("ConfigCommand", *server, *entity, "--alter", "--add-config", "segment.ms=3600000")
    configs = kafka_tool("ConfigCommand", *server, *entity, "--describe")
    assert "retention.ms=100000" in configs and "segment.ms=3600000" in configs
    broker = ("--entity-type", "brokers", "--entity-name", str(min(cluster.broker_ids)))
    assert "log.retention.ms=" in kafka_tool(
        "ConfigCommand", *server, *broker, "--describe", "--all"
    )
    kafka_tool("TopicCommand", *server, "--delete", *topic)
    until(lambda: "java-admin-wire" not in topic_names(cluster))
