"""``readStream.format("kraft")``: availableNow runs that resume from their checkpoint, and
``maxOffsetsPerTrigger``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kraft.cluster import LocalCluster
from tests.spark.conftest import create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.process, pytest.mark.timeout(600)]


def run_available_now(
    session: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path, **options: Any
) -> Any:
    reader = (
        session.readStream.format("kraft")
        .option("kraft.bootstrap", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query


def test_available_now_twice_reads_only_new_records_the_second_time(
    session: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    create_topic(cluster.bootstrap, "stream", partitions=2)
    produce(cluster.bootstrap, "stream", 100)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    first = run_available_now(session, cluster.bootstrap, "stream", out, checkpoint)
    assert sum(p["numInputRows"] for p in first.recentProgress) == 100
    assert session.read.parquet(str(out)).count() == 100

    produce(cluster.bootstrap, "stream", 40, start=100)
    second = run_available_now(session, cluster.bootstrap, "stream", out, checkpoint)
    assert sum(p["numInputRows"] for p in second.recentProgress) == 40
    values = sorted(r.value for r in session.read.parquet(str(out)).collect())
    assert values == sorted(f"v{i}" for i in range(140))


def test_max_offsets_per_trigger_splits_available_now_into_micro_batches(
    session: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    create_topic(cluster.bootstrap, "limited", partitions=2)
    produce(cluster.bootstrap, "limited", 90)
    query = run_available_now(
        session,
        cluster.bootstrap,
        "limited",
        tmp_path / "out",
        tmp_path / "checkpoint",
        maxOffsetsPerTrigger="40",
    )
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(batches) == 90
    assert len(batches) >= 3 and max(batches) <= 40


def test_stream_writer_copies_a_topic(session: Any, cluster: LocalCluster, tmp_path: Path) -> None:
    create_topic(cluster.bootstrap, "copy-from", partitions=2)
    create_topic(cluster.bootstrap, "copy-to", partitions=2)
    produce(cluster.bootstrap, "copy-from", 30)
    query = (
        session.readStream.format("kraft")
        .option("kraft.bootstrap", cluster.bootstrap)
        .option("subscribe", "copy-from")
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value", "partition")
        .writeStream.format("kraft")
        .option("kraft.bootstrap", cluster.bootstrap)
        .option("topic", "copy-to")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    copied = (
        session.read.format("kraft")
        .option("kraft.bootstrap", cluster.bootstrap)
        .option("subscribe", "copy-to")
        .load()
        .selectExpr("CAST(value AS STRING) AS value", "partition")
        .collect()
    )
    original = (
        session.read.format("kraft")
        .option("kraft.bootstrap", cluster.bootstrap)
        .option("subscribe", "copy-from")
        .load()
        .selectExpr("CAST(value AS STRING) AS value", "partition")
        .collect()
    )
    assert sorted(map(tuple, copied)) == sorted(map(tuple, original))
    assert len(copied) == 30
