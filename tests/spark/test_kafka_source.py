"""Spark's own Kafka source (``format("kafka")``, org.apache.spark:spark-sql-kafka-0-10, the jars
of ``kraft peer kafka fetch`` on the shared session's ``spark.jars``) reads a kraft topic through
kraft's Kafka listeners, unchanged (issue 25, item 6): its driver lists partitions and offsets
with Kafka's AdminClient (Metadata, ListOffsets), its executors assign, seek and fetch. What it
reads must be exactly what kraft's own ``kraft`` data source reads over gRPC, in a batch query
and in a Structured Streaming one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kraft.cluster import LocalCluster
from kraft.peer.jars import spark_kafka_jars
from replication.clients import Producer
from tests.java_jars import jars_unavailable
from tests.spark.conftest import create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.java, pytest.mark.process, pytest.mark.timeout(600)]

TOPIC = "spark-kafka-source"
RECORDS = 300
COLUMNS = ("key", "value", "topic", "partition", "offset", "headers")


@pytest.fixture(scope="module")
def kafka_source(session: Any, cluster: LocalCluster) -> str:
    """The topic, once the session has Spark's Kafka source (else the test skips)."""
    if "spark-sql-kafka" not in session.sparkContext.getConf().get("spark.jars", ""):
        reason = jars_unavailable(spark_kafka_jars()) or "the session started without them"
        pytest.skip(f"no spark-sql-kafka jars: {reason}")
    assert cluster.kafka_bootstrap, "the cluster runs no Kafka listener"
    create_topic(cluster.bootstrap, TOPIC, partitions=3)
    produce(cluster.bootstrap, TOPIC, RECORDS)  # keys k0..k4, headers on every third
    with Producer(cluster.bootstrap, acks="all") as producer:  # null keys and a null value
        futures = [producer.send(TOPIC, value=b"no-key", partition=p) for p in range(3)]
        futures.append(producer.send(TOPIC, key=b"tombstone", value=None, partition=0))
        for f in futures:
            f.result(timeout=30)
    return TOPIC


def rows(df: Any) -> list[tuple[Any, ...]]:
    """(key, value, topic, partition, offset, headers) with bytes for binary columns."""

    def b(value: Any) -> bytes | None:
        return None if value is None else bytes(value)

    return sorted(
        (
            (
                b(r.key),
                b(r.value),
                r.topic,
                r.partition,
                r.offset,
                tuple((h.key, b(h.value)) for h in r.headers or ()),
            )
            for r in df.select(*COLUMNS).collect()
        ),
        key=lambda row: (row[2], row[3], row[4]),  # topic, partition, offset: keys may be null
    )


def kraft_rows(session: Any, cluster: LocalCluster, topic: str) -> list[tuple[Any, ...]]:
    df = (
        session.read.format("kraft")
        .option("kraft.bootstrap", cluster.bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    return rows(df)


def test_batch_read_equals_the_kraft_source(
    session: Any, cluster: LocalCluster, kafka_source: str
) -> None:
    df = (
        session.read.format("kafka")
        .option("kafka.bootstrap.servers", cluster.kafka_bootstrap)
        .option("subscribe", kafka_source)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
    )
    got = rows(df)
    assert len(got) == RECORDS + 4
    assert {r[3] for r in got} == {0, 1, 2}
    assert got == kraft_rows(session, cluster, kafka_source)


def test_streaming_available_now_into_memory_equals_the_kraft_source(
    session: Any, cluster: LocalCluster, kafka_source: str, tmp_path: Path
) -> None:
    query = (
        session.readStream.format("kafka")
        .option("kafka.bootstrap.servers", cluster.kafka_bootstrap)
        .option("subscribe", kafka_source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .select(*COLUMNS)
        .writeStream.format("memory")
        .queryName("kafka_source_rows")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(300), "the availableNow query did not finish in 300 s"
        assert query.exception() is None, query.exception()
        got = rows(session.sql("SELECT * FROM kafka_source_rows"))
    finally:
        query.stop()
    assert len(got) == RECORDS + 4
    assert got == kraft_rows(session, cluster, kafka_source)
