"""``kraft cluster up`` in the foreground: the status view, and Ctrl-C stops every process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraft.cli._cluster_status import pid_alive
from tests.interrupts import python_interruptible

# `kraft cluster up` on its default ports (9090-9092): one pytest-xdist worker runs every such
# test (tests/conftest.py), or two clusters race for the ports and a command finds the other.
pytestmark = pytest.mark.xdist_group("default-ports")


def test_foreground_cluster_shows_status_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KRAFT_")}
    up = subprocess.Popen(
        python_interruptible(
            module="kraft.cli",
            args=(
                *("cluster", "up", "--controllers", "1", "--brokers", "1"),
                *("--data-dir", str(tmp_path)),
            ),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )  # fmt: skip
    info_path = tmp_path / "cluster.json"
    try:
        deadline = time.monotonic() + 60
        while not info_path.exists():
            assert up.poll() is None, up.communicate()[0]
            assert time.monotonic() < deadline, "no cluster.json within 60 s"
            time.sleep(0.1)
        info = json.loads(info_path.read_text())
        assert info["supervisor_pid"] == up.pid
        # A second cluster on the same directory is refused.
        again = subprocess.run(
            [sys.executable, "-m", "kraft.cli", "cluster", "up", "--data-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert again.returncode == 1 and "already running" in again.stderr
        status = subprocess.run(
            [sys.executable, "-m", "kraft.cli", "cluster", "status", "--data-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert status.returncode == 0, status.stderr
        assert "Quorum: leader 1" in status.stdout and "unfenced" in status.stdout
        up.send_signal(signal.SIGINT)
        output, _ = up.communicate(timeout=60)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert up.returncode == 0, output
    assert "Quorum: leader 1" in output and "101" in output  # the status view was printed
    assert "stopped" in output.splitlines()[-1]
    nodes = [*info["controllers"], *info["brokers"]]
    deadline = time.monotonic() + 10
    while any(pid_alive(n["pid"]) for n in nodes) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(n["pid"]) for n in nodes)
    assert not info_path.exists()
