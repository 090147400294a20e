"""The README's local-cluster example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.process
def test_readme_local_cluster_example_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    (example,) = [b for b in blocks if "LocalCluster(" in b]
    result = subprocess.run(
        [sys.executable, "-c", example],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("RecordMetadata(topic='events'"), result.stdout
    assert result.stderr == "", result.stderr  # a library prints nothing unasked
