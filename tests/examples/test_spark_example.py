"""examples/spark_batch_job.py runs as the docs say and checks its own aggregate: its own cluster
and SparkSession, so ``make test-long``; the job itself runs in ``make test`` on the Spark
package's shared ones (`tests/spark/test_example_job.py`)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.spark,
    pytest.mark.process,
    pytest.mark.long,
    pytest.mark.skipif(
        importlib.util.find_spec("pyspark") is None or shutil.which("java") is None,
        reason="needs pyspark and java",
    ),
]


def test_spark_batch_job_counts_every_page_view() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "spark_batch_job.py"), "--records", "3000"],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "produced 3000 page views" in result.stdout
    assert "OK: Spark counted all 3000 page views per country" in result.stdout
