"""The kraft cluster for every test of Kafka's own Java client and tools against kraft's Kafka
listeners (issue 25, item 6), and the way those tests run a tool.

Each tool is a JVM of its own (2-8 s to start on two loaded cores), so each test runs few of
them and uses its own topic and group.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kraft.cluster import LocalCluster
from kraft.peer.jars import kafka_jars
from kraft.peer.tools import tool_command
from replication.clients import AdminClient
from tests.java_jars import jars_unavailable

TOOL_TIMEOUT_S = 120.0
"""One tool run, JVM start included."""
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="package")
def kafka_tools() -> None:
    """Java and Kafka's jars are here (fetched once if they were not), or the test skips."""
    reason = jars_unavailable(kafka_jars())
    if reason is not None:
        pytest.skip(f"no Kafka tools: {reason}")


@pytest.fixture(scope="package")
def cluster(kafka_tools: None, kraft_cluster: LocalCluster) -> LocalCluster:
    """The suite's shared kraft 3+3 (``tests/kraft_cluster.py``)."""
    return kraft_cluster


def create_topic(cluster: LocalCluster, name: str, partitions: int) -> str:
    """With kraft's admin (Kafka's CreateTopics is not served yet)."""
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(
            name, partitions=partitions, replication_factor=3, config={"min.insync.replicas": "2"}
        )
        admin.wait_for_leaders(name, timeout=30)
    return name


def run_tool(tool: str, *args: str, stdin: str | None = None) -> str:
    """Kafka's ``tool`` with ``args``; its stdout. Fails the test, with the tool's stderr, if
    it exits non-zero."""
    done = subprocess.run(
        tool_command(tool, *args),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"{tool} exited {done.returncode}: {done.stderr[-3000:]}"
    return done.stdout


def run_kraft_tool(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Kafka's ``tool`` as a user types it: ``kraft peer kafka tool TOOL ARGS``."""
    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", "peer", "kafka", "tool", tool, *args],
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
