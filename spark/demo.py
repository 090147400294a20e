"""What the main demo shows of Spark: an aggregate over a topic, through the data source."""

from __future__ import annotations

from typing import Any


def demo_aggregate(session: Any, bootstrap: str, topic: str) -> list[tuple[int, int, int, int]]:
    """Per partition of ``topic``: ``(partition, records, first offset, last offset)``, read
    with ``format("kraft")`` from the earliest to the latest offset.

    Args:
        session: a `SparkSession` (see `spark.local_session`); the source is registered on it.
    """
    from pyspark.sql import functions as F

    from spark.session import register

    register(session)
    df = (
        session.read.format("kraft")
        .option("kraft.bootstrap", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    rows = (
        df.groupBy("partition")
        .agg(F.count("*").alias("records"), F.min("offset"), F.max("offset"))
        .orderBy("partition")
        .collect()
    )
    return [(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]


__all__ = ["demo_aggregate"]
