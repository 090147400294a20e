"""``kraft bench spark`` runs end to end with a tiny N and reports every figure."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.spark,
    pytest.mark.process,
    pytest.mark.skipif(
        importlib.util.find_spec("pyspark") is None or shutil.which("java") is None,
        reason="needs pyspark and java",
    ),
]


def test_bench_spark_reports_rates_and_ratios_for_every_source() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kraft.cli",
            "bench",
            "spark",
            "--records",
            "3000",
            "--rounds",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["records"] == 3000
    for source in ("kraft", "parquet", "jsonl"):
        assert figures[source]["count_rows_per_s"] > 0
        assert figures[source]["scan_rows_per_s"] > 0
        assert figures[source]["write_parquet_rows_per_s"] > 0
    assert figures["kraft_vs_jsonl_scan"] > 0
    assert figures["kraft"]["count_offset_schema_rows_per_s"] > 0
    assert len(figures["load_average"]) == 3
