"""`kraft bench raft` runs end to end with tiny numbers and prints the JSON it promises.

No timing assertions: the figures depend on the machine; this checks the plumbing (three
node processes, the line protocol, the leader kill) and the report's shape.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.process
@pytest.mark.timeout(120)
def test_bench_raft_runs_and_reports_json(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kraft.bench.raft",
            "--entries",
            "2000",
            "--latency-ops",
            "20",
            "--failover-runs",
            "1",
            "--skip-pysyncobj",
            "--json",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)

    assert report["entry_bytes"] == 100
    assert report["pysyncobj"] is None
    kraft = report["kraft"]
    tput = kraft["throughput"]
    assert tput["entries"] == 2000
    assert tput["group"] == 1
    assert tput["failed"] == 0
    assert tput["seconds"] > 0 and tput["per_s"] > 0
    assert set(tput["loop_stalls"]) == {"1", "2", "3"}

    lat = kraft["latency"]
    assert lat["ops"] == 20
    assert 0 < lat["p50_ms"] <= lat["p99_ms"] <= lat["p999_ms"] <= lat["max_ms"]

    fo = kraft["failover"]
    assert len(fo["runs"]) == 1 and len(fo["runs_s"]) == 1
    run = fo["runs"][0]
    assert run["seconds"] > 0
    assert run["new_leader"] != run["killed"]
    assert fo["median_s"] == fo["max_s"] == run["seconds"]

    targets = report["summary"]["targets"]
    assert set(targets) == {
        "throughput_3x_pysyncobj",
        "p50_le_2ms",
        "p99_below_pysyncobj",
        "failover_median_lt_0_5s",
        "failover_max_lt_1s",
    }
    assert targets["throughput_3x_pysyncobj"] is None  # no PySyncObj to compare with


@pytest.mark.process
def test_bench_raft_help_names_the_options() -> None:
    from kraft.bench.raft import main

    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
