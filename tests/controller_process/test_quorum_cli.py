"""``kraft quorum describe`` against a real controller, and against nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kraft import LocalCluster
from kraft.cluster.ports import free_ports

pytestmark = [pytest.mark.process, pytest.mark.timeout(60)]


def _kraft(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args], capture_output=True, text=True, timeout=30
    )


def test_quorum_describe_shows_leader_epoch_high_watermark_and_voters(tmp_path: Path) -> None:
    with LocalCluster(controllers=1, brokers=0, data_dir=tmp_path / "cluster") as cluster:
        cluster.wait_until_healthy(timeout=30)
        bootstrap = cluster.controller_bootstrap
        as_json = _kraft("quorum", "describe", "--bootstrap-controller", bootstrap, "--json")
        assert as_json.returncode == 0, as_json.stderr
        doc = json.loads(as_json.stdout)
        assert doc["leader_id"] == 1 and doc["leader_epoch"] >= 1
        assert doc["high_watermark"] >= 1  # the leader-change batch committed
        assert [v["id"] for v in doc["voters"]] == [1] and doc["observers"] == []
        assert doc["voters"][0]["lag"] == 0

        text = _kraft("quorum", "describe", "--bootstrap-controller", bootstrap)
        assert text.returncode == 0, text.stderr
        assert "LeaderId:            1" in text.stdout
        assert "Leader" in text.stdout.splitlines()[-1]


def test_quorum_describe_without_a_reachable_controller_fails_with_one_line() -> None:
    (port,) = free_ports(1)
    result = _kraft(
        "quorum", "describe", "--bootstrap-controller", f"127.0.0.1:{port}", "--timeout", "1"
    )
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kraft: error:"), result.stderr
