"""`kraft bench group` runs end to end with one run and prints the JSON it promises.

No timing assertions: the figures depend on the machine; this checks the plumbing (a real
cluster, three worker processes, a graceful leave, a kill -9) and the report's shape.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.long
@pytest.mark.process
@pytest.mark.timeout(180)
def test_bench_group_runs_and_reports_json(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kraft.cli",
            "bench",
            "group",
            "--runs",
            "1",
            "--records",
            "2000",
            "--session-timeout-ms",
            "3000",
            "--json",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["session_timeout_ms"] == 3000
    assert 0 < report["rebalance_graceful_s"]["p50"] <= report["rebalance_graceful_s"]["max"]
    assert report["rebalance_kill9_s"]["p50"] > 0
    assert report["throughput_records_per_s"]["one_consumer"] > 0
    assert report["throughput_records_per_s"]["group_of_three"] > 0
