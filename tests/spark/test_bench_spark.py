"""``kraft bench spark``'s measurement on the package's shared cluster and SparkSession, with a
tiny N: every figure is reported, and the report prints.

The command itself (`kraft.bench.spark.run`) only adds a `LocalCluster` and a SparkSession of
its own around the same `measure`; starting those cost this test ~70 s (280 s on a loaded
machine) when it ran the command in a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kraft.bench import spark as bench
from kraft.cluster import LocalCluster

pytestmark = [pytest.mark.spark, pytest.mark.process]

RECORDS = 3000


@pytest.mark.long
def test_bench_spark_reports_rates_and_ratios_for_every_source(
    cluster: LocalCluster, session: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    produce_s = bench.produce(cluster.bootstrap, RECORDS, 100)
    figures = bench.measure(
        session, cluster.bootstrap, tmp_path, RECORDS, 100, rounds=1, warm_up=False
    )
    for source in ("kraft", "parquet", "jsonl"):
        assert figures[source]["count_rows_per_s"] > 0
        assert figures[source]["scan_rows_per_s"] > 0
        assert figures[source]["write_parquet_rows_per_s"] > 0
    assert figures["kraft_vs_jsonl_scan"] > 0
    assert figures["kraft"]["count_offset_schema_rows_per_s"] > 0
    result = {
        "records": RECORDS,
        "record_size": 100,
        "master": "local[2]",
        "rounds": 1,
        "load_average_before": [0.0, 0.0, 0.0],
        "produce_s": round(produce_s, 2),
        **figures,
        "load_average": [0.0, 0.0, 0.0],
    }
    json.dumps(result)  # --json prints it
    bench._print(result)
    out = capsys.readouterr().out
    assert "kraft bench spark: 3,000 records of 100 B" in out
    assert "kraft / jsonl: count x" in out
