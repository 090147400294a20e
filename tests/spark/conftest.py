"""Shared fixtures of the Spark tests: ONE local cluster and ONE local SparkSession for the
whole package.

A SparkSession costs 10-30 s to start on two cores, the first Python data source query as much
again (80 s each on a loaded machine), so the package starts one of each and every test shares
them (each test uses its own topic). The session's Python workers run this interpreter
(``PYSPARK_PYTHON``).

The session carries Spark's own Kafka source (``spark.jars``, `spark_kafka_config`) for
``test_kafka_source``; the other tests do not use it. A JVM holds one SparkContext, so the
standalone-cluster module stops the local session before it starts its own: its file name sorts
last in the package, after every module that uses the local one.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from kraft.cluster import LocalCluster
from kraft.peer.jars import spark_kafka_jars
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, ConsumerRecord, Producer
from tests.java_jars import jars_unavailable


def spark_available() -> bool:
    return importlib.util.find_spec("pyspark") is not None and shutil.which("java") is not None


@pytest.fixture(scope="package")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(
        controllers=1,
        brokers=3,
        broker_config={"log.retention.check.interval.ms": "200"},
    ) as c:
        c.wait_until_healthy(timeout=60)
        yield c


def spark_kafka_config() -> dict[str, str]:
    """``spark.jars`` = Spark's own Kafka source and its dependencies (fetched once if they are
    missing), so that ``test_kafka_source`` runs in the shared session: a JVM takes its jars
    when it starts. Empty when they cannot be had; that test then skips with the reason."""
    jar_set = spark_kafka_jars()
    if jars_unavailable(jar_set) is not None:
        return {}
    return {"spark.jars": ",".join(str(jar) for jar in jar_set.jars())}


@pytest.fixture(scope="package")
def session() -> Iterator[Any]:
    if not spark_available():
        pytest.skip("needs pyspark and java")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import spark as kraft_spark

    s = kraft_spark.local_session("local[2]", "kraft-tests", spark_kafka_config())
    try:
        yield s
    finally:
        s.stop()


def create_topic(
    bootstrap: str, name: str, partitions: int = 3, config: dict[str, str] | None = None
) -> None:
    with AdminClient(bootstrap) as admin:
        admin.create_topic(name, partitions=partitions, replication_factor=3, config=config)
        admin.wait_for_leaders(name)


def produce(bootstrap: str, topic: str, count: int, *, start: int = 0, **options: Any) -> None:
    """``count`` records ``v{i}`` with key ``k{i % 5}``, a header on every third one."""
    with Producer(bootstrap, acks="all", **options) as producer:
        futures = [
            producer.send(
                topic,
                value=b"v%d" % i,
                key=b"k%d" % (i % 5),
                headers=[("n", b"%d" % i), ("empty", None)] if i % 3 == 0 else None,
            )
            for i in range(start, start + count)
        ]
        producer.flush()
        for f in futures:
            f.result(timeout=30)


def consume_all(
    bootstrap: str, topic: str, partitions: Sequence[int], *, timeout: float = 30.0
) -> list[ConsumerRecord]:
    """Every record of ``partitions`` up to their end offsets, with a Consumer."""
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_end(tps)
        ends = {tp: consumer.position(tp) for tp in tps}
        consumer.seek_to_beginning(tps)
        out: list[ConsumerRecord] = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "consumer did not reach the end offsets"
            out.extend(consumer.poll(timeout=0.5))
        return sorted(out, key=lambda r: (r.partition, r.offset))
