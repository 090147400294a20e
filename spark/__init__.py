"""Spark readers and writers for kraft topics: a partition-aware RDD and the ``kraft`` data
source (``pyspark.sql.datasource``), with the schema and options of Spark's Kafka source.

Usage::

    import spark as kraft_spark

    session = kraft_spark.local_session()          # or: kraft_spark.register(existing_session)
    df = (session.read.format("kraft")
          .option("kraft.bootstrap", "127.0.0.1:9092")
          .option("subscribe", "events")           # or subscribePattern, or assign
          .option("startingOffsets", "earliest")   # or latest, or '{"events":{"0":23,"1":-2}}'
          .option("endingOffsets", "latest")
          .load())                                 # key, value, topic, partition, offset, ...

    ranges = kraft_spark.offset_ranges("127.0.0.1:9092", [("events", "earliest", "latest")])
    rdd = kraft_spark.topic_rdd(session.sparkContext, "127.0.0.1:9092", ranges)

Who does what: the driver plans (`plan_ranges`: Metadata and ListOffsets through
`OffsetLookup`, then `split_ranges`), executors fetch (`RangeFetcher`: Fetch from the
partition's leader, decoding v2 batches straight into Arrow columns, `storage.columnar`).
Streaming (`spark.stream`) keeps its offsets in Spark's checkpoint; writers (`spark.writer`)
produce with ``acks=all``. docs/spark.md has the options, the schema and measured figures.

pyspark is imported only by the modules that need it (`source`, `stream`, `writer` and
`session` when called), so `offset_ranges` and the pure planning helpers work without a JVM.
"""

from __future__ import annotations

import importlib
from typing import Any

from spark.fetcher import RangeFetcher, TopicRecord
from spark.lookup import OffsetLookup
from spark.offsets import OffsetRange, rate_limit, split_ranges
from spark.options import ReadOptions, WriteOptions
from spark.planning import offset_ranges, plan_ranges
from spark.rdd import topic_rdd
from spark.session import local_session, register, stop_session
from storage.columnar.schema import (
    ARROW_SCHEMA,
    ARROW_SCHEMA_WITH_HEADERS,
    ColumnBuilder,
    schema_ddl,
)

_LAZY = {
    "KraftDataSource": "spark.source",
    "KraftStreamReader": "spark.stream",
    "KraftArrowWriter": "spark.writer",
    "demo_aggregate": "spark.demo",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'spark' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ARROW_SCHEMA",
    "ARROW_SCHEMA_WITH_HEADERS",
    "ColumnBuilder",
    "KraftArrowWriter",
    "KraftDataSource",
    "KraftStreamReader",
    "OffsetLookup",
    "OffsetRange",
    "RangeFetcher",
    "ReadOptions",
    "TopicRecord",
    "WriteOptions",
    "demo_aggregate",
    "local_session",
    "offset_ranges",
    "plan_ranges",
    "rate_limit",
    "register",
    "schema_ddl",
    "split_ranges",
    "stop_session",
    "topic_rdd",
]
