"""A node locks its data directory (Kafka's ``.lock``) for its whole life (issue 29 item 4): a
second start on the same directory fails with one line before it touches anything, and
``kraft.pid`` names the first node until that node removes it at exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraft.cli._node import LOCK_FILE, PID_FILE, claim_data_dir, read_pid_file
from kraft.cluster.ports import free_ports

pytestmark = pytest.mark.timeout(60)


def _wait(condition: object, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_lock_held_by_another_process_refuses_the_claim_naming_its_pid(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, pathlib; from kraft.cli._node import claim_data_dir; "
            "claim_data_dir(pathlib.Path(sys.argv[1])); print('held', flush=True); "
            "sys.stdin.read()",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(OSError, match=f"in use by pid {holder.pid} ") as refused:
            claim_data_dir(tmp_path)
        assert "\n" not in str(refused.value)
        assert read_pid_file(tmp_path) == holder.pid  # the refused claim left it alone
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)
    assert not (tmp_path / PID_FILE).exists()  # its owner removed it at exit
    assert (tmp_path / LOCK_FILE).exists()


def test_a_second_start_of_a_running_controller_fails_in_one_line(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    data = tmp_path / "c1"
    argv = [
        sys.executable,
        "-m",
        "kraft.cli",
        "controller",
        "--node-id",
        "1",
        "--controller-quorum-voters",
        f"1@127.0.0.1:{port}",
        "--data-dir",
        str(data),
    ]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait(lambda: read_pid_file(data) == first.pid, "the first controller's kraft.pid")
        second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
        assert second.returncode == 1
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and f"in use by pid {first.pid}" in lines[0], second.stderr
        assert read_pid_file(data) == first.pid
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(20)
    assert read_pid_file(data) is None
