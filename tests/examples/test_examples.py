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
