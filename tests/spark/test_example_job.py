"""examples/spark_batch_job.py's job on the package's shared cluster and SparkSession: the
aggregate that the example prints and checks. Its whole run as the docs say (its own cluster
and session, 50-75 s on two cores) is `tests/examples/test_spark_example.py`, in
``make test-long``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kraft.cluster import LocalCluster

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.spark, pytest.mark.process, pytest.mark.timeout(600)]


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "spark_batch_job", ROOT / "examples" / "spark_batch_job.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_job_counts_every_page_view(cluster: LocalCluster, session: Any) -> None:
    job = _example()
    expected = job.produce_events(cluster.bootstrap, 3000)
    assert sum(expected.values()) == 3000
    assert job.views_per_country(session, cluster.bootstrap) == expected
