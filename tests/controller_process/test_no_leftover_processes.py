"""Cluster processes never outlive the Python process that started them, even a SIGKILLed one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, threading
from kraft import LocalCluster
cluster = LocalCluster(controllers=3, brokers=0, data_dir=sys.argv[1])
cluster.start()
cluster.wait_until_healthy(timeout=60)
print(" ".join(str(p) for p in cluster.pids()), flush=True)
threading.Event().wait()  # until the test SIGKILLs this process
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose (its parent, the test runner, may not have reaped it).
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


@pytest.mark.process
def test_children_die_when_their_parent_is_killed(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert parent.stdout is not None
    line = parent.stdout.readline()
    pids = [int(p) for p in line.split()]
    assert len(pids) == 3 and all(_alive(p) for p in pids), line
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)], "controller processes outlived their parent"
