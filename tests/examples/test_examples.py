"""Every example runs as written in the docs, as a subprocess, and says it succeeded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.process
def test_replicated_kv_survives_leader_kill_and_converges(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "replicated_kv.py"), "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "killing the leader with SIGKILL" in result.stdout
    assert "all 3 nodes hold the same 150 keys" in result.stdout


@pytest.mark.process
def test_consumer_group_processes_everything_through_a_worker_and_a_coordinator_kill(
    tmp_path: Path,
) -> None:
    """Issue 13's process test: 12 partitions, a producer, 3 consumer processes in one group;
    kill -9 one consumer, then the coordinator's broker; every acknowledged record is processed
    at least once, committed == log end offsets, and ``kraft groups describe`` shows lag 0."""
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "consumer_group.py"),
            "--data-dir",
            str(tmp_path),
            "--records",
            "3000",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "killed a worker with SIGKILL" in out
    assert "killed the group coordinator" in out
    assert "all 3000 acknowledged records processed at least once" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("billing orders ")]
    assert len(rows) == 12
    assert all(row[5] == "0" for row in rows), out  # the LAG column
