"""The same batch read, unchanged, on a Spark standalone cluster (a master and one worker on
loopback, started with ``spark-daemon.sh`` and stopped at the end).

The module's name sorts last in the package: it stops the package's local SparkSession (one
SparkContext per JVM) once the other modules are done with it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import spark as kraft_spark
from kraft.cluster import LocalCluster
from spark.standalone import StandaloneCluster
from tests.spark.conftest import consume_all, create_topic, produce, spark_available

pytestmark = [pytest.mark.spark, pytest.mark.process, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def standalone_session() -> Iterator[Any]:
    if not spark_available():
        pytest.skip("needs pyspark and java")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    local = SparkSession.getActiveSession()
    if local is not None:
        local.stop()
    with StandaloneCluster(cores=2, memory="1g") as spark_cluster:
        session = kraft_spark.local_session(
            spark_cluster.master_url,
            "kraft-standalone-test",
            config={"spark.executor.memory": "512m", "spark.cores.max": "2"},
        )
        try:
            yield session
        finally:
            session.stop()


def test_batch_read_runs_unchanged_on_a_standalone_cluster(
    standalone_session: Any, cluster: LocalCluster
) -> None:
    create_topic(cluster.bootstrap, "standalone", partitions=3)
    produce(cluster.bootstrap, "standalone", 300)
    assert standalone_session.sparkContext.master.startswith("spark://127.0.0.1:")
    df = (
        standalone_session.read.format("kraft")
        .option("kraft.bootstrap", cluster.bootstrap)
        .option("subscribe", "standalone")
        .option("minPartitions", "6")
        .load()
    )
    got = sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())
    expected = consume_all(cluster.bootstrap, "standalone", [0, 1, 2])
    assert got == [(r.partition, r.offset, r.value) for r in expected]
