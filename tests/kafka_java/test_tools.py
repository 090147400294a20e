"""Apache Kafka's own Java client and command-line tools (org.apache.kafka 4.x, the jars of
``kraft peer kafka fetch``) against kraft's Kafka listeners, unchanged (issue 25, item 6).

What kraft checks behind each tool is kraft's own view (its gRPC clients, its on-disk log), so a
tool that printed success while writing or reading the wrong thing fails here.

The admin tools and a classic-group consumer (the Java client's default protocol) run in the
last test, on the same cluster.
"""

from __future__ import annotations

import pytest

from kraft.cluster import LocalCluster
from kraft.peer.tools import parse_consumer_perf_test, parse_producer_perf_test
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, Producer
from tests.kafka_java.conftest import create_topic, run_kraft_tool, run_tool

pytestmark = [pytest.mark.java, pytest.mark.process, pytest.mark.timeout(400)]

KIP848 = ("--command-property", "group.protocol=consumer")
"""The KIP-848 consumer protocol; the classic one (the default) has its own test below."""


def end_offsets(cluster: LocalCluster, topic: str, partitions: int) -> dict[int, int]:
    with AdminClient(cluster.bootstrap) as admin:
        listed = admin.list_offsets({TopicPartition(topic, p): "latest" for p in range(partitions)})
    out = {}
    for tp, result in listed.items():
        assert not isinstance(result, Exception), result
        out[tp.partition] = result.offset
    return out


def kraft_values(cluster: LocalCluster, topic: str, partition: int, count: int) -> list[bytes]:
    """The first ``count`` values of ``partition``, in order, read by kraft's own Consumer."""
    out: list[bytes] = []
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, partition)])
        for _ in range(60):
            out.extend(r.value or b"" for r in consumer.poll(timeout=0.5))
            if len(out) >= count:
                break
    return out


def test_console_producer_writes_lines_the_console_consumer_reads_back(
    cluster: LocalCluster,
) -> None:
    topic = create_topic(cluster, "java-console", partitions=1)
    lines = [f"line-{i} ünïcode and spaces" for i in range(50)]
    run_tool(
        "kafka-console-producer",
        "--bootstrap-server",
        cluster.kafka_bootstrap,
        "--topic",
        topic,
        "--command-property",
        "acks=all",
        stdin="\n".join(lines) + "\n",
    )
    assert kraft_values(cluster, topic, 0, len(lines)) == [line.encode() for line in lines]
    out = run_tool(
        "kafka-console-consumer",
        "--bootstrap-server",
        cluster.kafka_bootstrap,
        "--topic",
        topic,
        "--partition",
        "0",
        "--offset",
        "earliest",
        "--max-messages",
        str(len(lines)),
        "--timeout-ms",
        "60000",
    )
    assert out.splitlines() == lines


def test_console_consumer_in_a_group_commits_what_consumer_groups_describes(
    cluster: LocalCluster,
) -> None:
    topic = create_topic(cluster, "java-group", partitions=3)
    with Producer(cluster.bootstrap, acks="all") as producer:
        futures = [producer.send(topic, value=b"g-%d" % i, partition=i % 3) for i in range(30)]
        for f in futures:
            f.result(timeout=30)
    group = "java-console-group"
    out = run_tool(
        "kafka-console-consumer",
        "--bootstrap-server",
        cluster.kafka_bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        *KIP848,
        "--from-beginning",
        "--max-messages",
        "30",
        "--timeout-ms",
        "60000",
    )
    assert sorted(out.splitlines()) == sorted(f"g-{i}" for i in range(30))

    listed = run_tool(
        "kafka-consumer-groups", "--bootstrap-server", cluster.kafka_bootstrap, "--list"
    )
    assert group in listed.split()
    described = run_tool(
        "kafka-consumer-groups",
        "--bootstrap-server",
        cluster.kafka_bootstrap,
        "--describe",
        "--group",
        group,
    )
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...: the consumer committed its
    # positions as it closed, every partition's end.
    rows = [line.split() for line in described.splitlines() if line.startswith(group + " ")]
    committed = {int(r[2]): (int(r[3]), int(r[4]), int(r[5])) for r in rows if r[1] == topic}
    assert committed == {p: (10, 10, 0) for p in range(3)}, described


def test_producer_and_consumer_perf_tests_move_every_record(cluster: LocalCluster) -> None:
    topic = create_topic(cluster, "java-perf", partitions=3)
    records = 3000
    produced = parse_producer_perf_test(
        run_tool(
            "kafka-producer-perf-test",
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--bootstrap-server",
            cluster.kafka_bootstrap,
            "--command-property",  # idempotence is on by default in the Java producer
            "acks=all",
        )
    )
    assert produced["records"] == records
    assert sum(end_offsets(cluster, topic, 3).values()) == records
    consumed = parse_consumer_perf_test(
        run_tool(
            "kafka-consumer-perf-test",
            "--bootstrap-server",
            cluster.kafka_bootstrap,
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--group",
            "java-perf-group",
            *KIP848,
            "--timeout",
            "60000",
        )
    )
    assert consumed["records"] == records


def test_topics_list_get_offsets_and_api_versions(cluster: LocalCluster) -> None:
    topic = create_topic(cluster, "java-admin", partitions=2)
    with Producer(cluster.bootstrap, acks="all") as producer:
        for f in [producer.send(topic, value=b"x", partition=i % 2) for i in range(5)]:
            f.result(timeout=30)

    # As typed in docs/kafka-compatibility.md: through kraft's own command.
    listed = run_kraft_tool("kafka-topics", "--bootstrap-server", cluster.kafka_bootstrap, "--list")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert topic in listed.stdout.split()

    latest = run_tool(
        "kafka-get-offsets", "--bootstrap-server", cluster.kafka_bootstrap, "--topic", topic
    )
    assert sorted(latest.split()) == [f"{topic}:0:3", f"{topic}:1:2"]
    earliest = run_tool(
        "kafka-get-offsets",
        "--bootstrap-server",
        cluster.kafka_bootstrap,
        "--topic",
        topic,
        "--time",
        "-2",
    )
    assert sorted(earliest.split()) == [f"{topic}:0:0", f"{topic}:1:0"]

    versions = run_tool("kafka-broker-api-versions", "--bootstrap-server", cluster.kafka_bootstrap)
    # One block per broker, each naming its Kafka listener; the client can use what it needs.
    addresses = cluster.kafka_bootstrap.split(",")
    for address in addresses:
        assert f"{address} (id: " in versions, versions[:2000]
    for api in ("Produce(0)", "Fetch(1)", "ListOffsets(2)", "Metadata(3)", "ApiVersions(18)"):
        lines = [line for line in versions.splitlines() if line.strip().startswith(api)]
        assert len(lines) == len(addresses), (api, versions[:2000])
        assert all("[usable: " in line for line in lines), lines


def test_an_unknown_tool_is_one_line_naming_the_known_ones() -> None:
    done = run_kraft_tool("kafka-nope", "--list")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "no Kafka tool 'kafka-nope'" in done.stderr
    assert "kafka-console-producer" in done.stderr and "kafka-topics" in done.stderr


def test_topics_create_describe_configs_and_a_classic_group_console_consumer(
    cluster: LocalCluster,
) -> None:
    """What the admin APIs and the classic group protocol opened to Kafka's tools: create and
    describe through ``kafka-topics``, ``kafka-configs --describe``, a console consumer in a
    classic group (the Java client's default protocol) and ``kafka-get-offsets --time -3``."""
    b, topic = cluster.kafka_bootstrap, "java-created"
    created = run_tool("kafka-topics", "--bootstrap-server", b, "--create", "--topic", topic,
                       "--partitions", "3", "--replication-factor", "3",
                       "--config", "retention.ms=600000")  # fmt: skip
    assert f"Created topic {topic}." in created
    described = run_tool("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", topic)
    rows = [line.split("\t") for line in described.splitlines() if "Partition:" in line]
    assert len(rows) == 3 and all("ReplicationFactor: 3" in described for _ in rows)
    configs = run_tool("kafka-configs", "--bootstrap-server", b, "--describe",
                       "--entity-type", "topics", "--entity-name", topic)  # fmt: skip
    assert "retention.ms=600000" in configs
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i in range(12):
            producer.send(topic, value=b"c-%d" % i, partition=i % 3).result(timeout=30)
    out = run_tool("kafka-console-consumer", "--bootstrap-server", b, "--topic", topic,
                   "--group", "java-classic", "--from-beginning", "--max-messages", "12",
                   "--timeout-ms", "60000")  # fmt: skip
    assert sorted(line for line in out.splitlines() if line.startswith("c-")) == sorted(
        f"c-{i}" for i in range(12)
    )
    newest = run_tool("kafka-get-offsets", "--bootstrap-server", b, "--topic", topic,
                      "--time", "-3")  # fmt: skip
    assert sorted(newest.split()) == sorted(f"{topic}:{p}:3" for p in range(3))
