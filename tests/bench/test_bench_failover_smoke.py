"""`kraft bench failover` runs end to end with one run and prints the JSON it promises.

No timing assertions: the figures depend on the machine; this checks the plumbing (a real
3-controller cluster, the kill of the active controller, the probe, the log phases) and the
report's shape.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.process
@pytest.mark.timeout(60)
def test_bench_failover_runs_and_reports_json(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kraft.cli",
            "bench",
            "failover",
            "--runs",
            "1",
            "--json",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=45,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)

    assert report["config"]["runs"] == 1
    assert report["config"]["probe"] == "direct"
    assert report["config"]["cluster"] == "fresh per run"
    assert len(report["runs"]) == 1 and len(report["runs_s"]) == 1
    run = report["runs"][0]
    assert run["seconds"] > 0
    assert run["killed"] in (1, 2, 3) and run["new_leader"] in (1, 2, 3)
    assert run["new_leader"] != run["killed"]
    assert run["attempts"]["total"] >= 1
    assert set(run["phases"]) == {
        "detected_s",
        "candidate_s",
        "elected_s",
        "activated_s",
        "committed_s",
    }
    assert run["phases"]["committed_s"] == run["seconds"]
    assert run["candidacies"] >= 1  # read from the survivors' logs
    assert report["runs_with_more_than_one_candidacy"] in (0, 1)
    assert report["median_s"] == report["p90_s"] == report["max_s"] == run["seconds"]
    assert set(report["targets"]) == {"median_lt_0_5s", "max_lt_1s"}
    assert len(report["load_average"]["before"]) == 3
    # Each controller's log is kept under --dir (the phases are read from them).
    assert {p.name for p in (tmp_path / "run-1" / "logs").iterdir()} == {
        f"controller-{i}.log" for i in (1, 2, 3)
    }


def test_bench_failover_help_names_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    from kraft.bench.failover import main

    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for option in ("--runs", "--json", "--reuse", "--probe", "--attempt-timeout-ms"):
        assert option in out
