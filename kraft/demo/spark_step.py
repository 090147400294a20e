"""The main job's Spark step: read a topic with the ``kraft`` data source into a DataFrame and
aggregate it per partition.

Written against the data source's API (``spark.register(session)``, then
``session.read.format("kraft").option("kraft.bootstrap", ...).option("subscribe", topic)``
with the schema of Spark's Kafka source); imported lazily, so the rest of the demo runs
without pyspark, Java or the ``spark`` package.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path


class SparkUnavailable(Exception):
    """pyspark or the ``kraft`` data source (``spark.register``) cannot be imported."""


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` meanwhile: a JVM started now keeps writing its
    log there (Spark's start-up chatter), not on the demo's terminal."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def aggregate_by_partition(
    bootstrap: str, topic: str, spark_log: Path
) -> list[tuple[int, int, int, int]]:
    """``(partition, records, min offset, max offset)`` per partition of ``topic``, computed
    by Spark ``local[2]`` over the ``kraft`` data source.

    Raises:
        SparkUnavailable: pyspark or the data source is not importable.
        Exception: whatever Spark raised (its log is ``spark_log``).
    """
    try:
        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        from spark import register, stop_session
    except (ImportError, AttributeError) as e:
        raise SparkUnavailable(str(e)) from None
    # Python workers on this interpreter, so they find pyarrow and the project's packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with stderr_to(spark_log):
        session = (
            SparkSession.builder.master("local[2]")
            .appName("kraft-demo")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.log.level", "ERROR")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
    try:
        session.sparkContext.setLogLevel("ERROR")
        register(session)
        df = (
            session.read.format("kraft")
            .option("kraft.bootstrap", bootstrap)
            .option("subscribe", topic)
            .load()
        )
        rows = (
            df.groupBy("partition")
            .agg(
                F.count("*").alias("records"),
                F.min("offset").alias("min_offset"),
                F.max("offset").alias("max_offset"),
            )
            .orderBy("partition")
            .collect()
        )
    finally:
        stop_session(session)  # and its JVM: the demo leaves nothing running
    return [
        (int(r["partition"]), int(r["records"]), int(r["min_offset"]), int(r["max_offset"]))
        for r in rows
    ]


__all__ = ["SparkUnavailable", "aggregate_by_partition", "stderr_to"]
