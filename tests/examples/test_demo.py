"""The main job (``python -m kraft.demo``) on a small run: the whole story (the consumer group
and Spark included), a clean summary, and no process left behind (Spark's JVM and the consumer
processes included); Ctrl-C stops everything too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.interrupts import python_interruptible

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]


def processes_mentioning(text: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``text``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_demo_loses_and_duplicates_nothing_and_leaves_nothing_running(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    summary_path = tmp_path / "summary.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kraft.demo",
            "--records",
            "20000",
            "--data-dir",
            str(data),
            "--summary-json",
            str(summary_path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for text in (
        "1. starting 3 controllers and 3 brokers",
        "kill -9 broker",
        "controller fenced broker",
        "failover done: every partition has a live leader",
        "ISR shrank",
        "restarting broker",
        "ISR expanded",
        "is back in the ISR of every partition",
        "lost = 0",
        "duplicates = 0",
        "consumer group 'demo-group': 3 consumer processes",
        "the group is stable",
        "kill -9 consumer 1",
        "rebalance done: the survivors own every partition",
        "lag 0: the group's committed offsets reached the log end offset",
        "acknowledged records never processed: 0",
        "at-least-once: a consumer commits only after processing",
        "reading the topic with Spark (format 'kraft')",
        "OK: every acknowledged record was read back exactly once",
    ):
        assert text in out, f"{text!r} not in the output:\n{out}"
    summary = json.loads(summary_path.read_text())
    assert summary["records"] == summary["acknowledged"] == summary["consumed"] == 20000
    assert summary["lost"] == summary["duplicates"] == summary["misplaced"] == 0
    assert summary["group_missed"] == 0 and summary["group_rebalance_s"] is not None
    assert summary["group_processed"] == 20000 + summary["group_duplicates"]
    assert summary["killed_broker"] in (101, 102, 103) and summary["killed_leader_of"] >= 2
    assert summary["failover_s"] is not None and summary["rejoined_after_restart_s"] is not None
    spark = summary["spark"]  # a partition the sticky partitioner skipped has no row
    assert spark.startswith("20,000 rows in ") and spark.endswith(", as consumed"), spark
    assert len(summary["pids"]) >= 10  # 6 nodes, the restarted broker, 3 consumers
    assert not [p for p in summary["pids"] if _alive(p)]
    assert not processes_mentioning(str(data))
    assert not processes_mentioning("spark.app.name=kraft-demo")  # Spark's JVM is gone too
    assert (data / "logs" / "broker-101.log").exists()


def test_ctrl_c_stops_the_demo_and_every_process_it_started(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    command = python_interruptible(module="kraft.demo", args=("--records", "2000000", "--no-spark"))
    demo = subprocess.Popen(
        [*command, "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    assert demo.stdout is not None
    seen = []
    for line in demo.stdout:  # ends at EOF if the demo dies early
        seen.append(line)
        if line.startswith("3. producing"):
            break
    assert processes_mentioning(str(data)), "".join(seen)
    demo.send_signal(signal.SIGINT)
    rest, _ = demo.communicate(timeout=60)
    assert demo.returncode == 130, "".join(seen) + rest
    assert "interrupted: every process the demo started is stopped" in rest
    deadline = time.monotonic() + 10
    while processes_mentioning(str(data)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes_mentioning(str(data))
