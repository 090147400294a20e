"""examples/produce_consume.py and examples/local_cluster_failover.py run as written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kraft import LocalCluster

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]


def _run(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_produce_consume_starts_its_own_cluster_without_a_bootstrap() -> None:
    env = {k: v for k, v in os.environ.items() if k != "KRAFT_BOOTSTRAP"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "produce_consume.py")],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "starting a local cluster" in result.stdout
    assert "consumed 1000 records: each exactly once" in result.stdout


def test_produce_consume_uses_the_bootstrap_from_argv_or_the_environment() -> None:
    with LocalCluster(controllers=1, brokers=2) as cluster:
        cluster.wait_until_healthy(timeout=60)
        for out in (
            _run("produce_consume.py", cluster.bootstrap),
            _run("produce_consume.py", env={"KRAFT_BOOTSTRAP": cluster.bootstrap}),
        ):
            assert "starting a local cluster" not in out
            assert "RF 2" in out
            assert "consumed 1000 records: each exactly once" in out


def test_local_cluster_failover_moves_leadership_and_loses_nothing(tmp_path: Path) -> None:
    out = _run("local_cluster_failover.py", "--data-dir", str(tmp_path))
    assert "killing broker" in out and "partition 0 moved to broker" in out
    assert "is back in the ISR of partition 0" in out
    assert "read back 1000 of 1000 acknowledged records: lost or moved 0, duplicates 0" in out
    assert (tmp_path / "logs").is_dir()
