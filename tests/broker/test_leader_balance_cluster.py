"""Real processes: leadership returns to the preferred replicas after a broker restart, by
itself (``auto.leader.rebalance.enable``) or when an operator asks (``kraft topics
elect-leaders``, Kafka's kafka-leader-election.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from kraft.cluster import LocalCluster
from replication.clients import AdminClient, Producer
from tests.broker.clusters import running_cluster

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

TOPIC = "balanced"
PARTITIONS = 6


def _leaders(admin: AdminClient) -> dict[int, tuple[int, int]]:
    """partition -> (leader, preferred leader)."""
    return {p.partition: (p.leader, p.replicas[0]) for p in admin.describe_topic(TOPIC).partitions}


def _restart_broker_and_wait_for_it_in_every_isr(cluster: LocalCluster, admin: AdminClient) -> int:
    """Stop (controlled shutdown: its leaderships move away) and restart the preferred leader
    of partition 0; returns its id once it is back in every ISR."""
    broker = _leaders(admin)[0][1]
    cluster.stop_broker(broker)
    deadline = time.monotonic() + 60
    while any(leader == broker for leader, _ in _leaders(admin).values()):
        assert time.monotonic() < deadline, "the stopped broker kept a leadership"
        time.sleep(0.1)
    cluster.start_broker(broker)
    cluster.wait_until_healthy(timeout=60)
    while not all(broker in p.isr for p in admin.describe_topic(TOPIC).partitions):
        assert time.monotonic() < deadline, "the restarted broker never rejoined every ISR"
        time.sleep(0.1)
    return broker


def _create_topic(admin: AdminClient) -> None:
    admin.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    admin.wait_for_leaders(TOPIC, timeout=30)
    assert all(leader == preferred for leader, preferred in _leaders(admin).values())


def test_leadership_returns_to_the_preferred_replicas_after_a_restarted_broker_rejoins() -> None:
    with (
        running_cluster(controller_config={"leader.imbalance.check.interval.seconds": "1"}) as c,
        AdminClient(c.bootstrap) as admin,
    ):
        _create_topic(admin)
        broker = _restart_broker_and_wait_for_it_in_every_isr(c, admin)
        deadline = time.monotonic() + 30
        while not all(leader == preferred for leader, preferred in _leaders(admin).values()):
            assert time.monotonic() < deadline, f"still imbalanced: {_leaders(admin)}"
            time.sleep(0.1)
        assert sum(leader == broker for leader, _ in _leaders(admin).values()) == 2


def _kraft(*args: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KRAFT_")}
    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args, "--bootstrap", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_an_operator_elects_preferred_leaders_alters_partitions_and_lists_offsets() -> None:
    with (
        running_cluster(controller_config={"auto.leader.rebalance.enable": "false"}) as c,
        AdminClient(c.bootstrap) as admin,
    ):
        _create_topic(admin)
        broker = _restart_broker_and_wait_for_it_in_every_isr(c, admin)
        assert not any(leader == broker for leader, _ in _leaders(admin).values())

        out = _kraft("topics", "elect-leaders", "--topic", TOPIC, "--json", bootstrap=c.bootstrap)
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert len(doc["elected"]) == 2 and not doc["failed"], doc
        assert len(doc["not_needed"]) == PARTITIONS - 2
        assert all(leader == preferred for leader, preferred in _leaders(admin).values())
        again = _kraft("topics", "elect-leaders", bootstrap=c.bootstrap)
        assert again.returncode == 0 and "No partition needed" in again.stdout, again

        out = _kraft("topics", "alter", TOPIC, "--partitions", "8", bootstrap=c.bootstrap)
        assert out.returncode == 0, out.stderr
        assert len(admin.describe_topic(TOPIC).partitions) == 8

        with Producer(c.bootstrap, acks="all") as producer:
            for i in range(5):
                producer.send(TOPIC, value=b"%d" % i, partition=1).result(timeout=30)
        out = _kraft("topics", "offsets", TOPIC, "--json", bootstrap=c.bootstrap)
        assert out.returncode == 0, out.stderr
        offsets = {row["partition"]: row["offset"] for row in json.loads(out.stdout)}
        assert offsets == {p: (5 if p == 1 else 0) for p in range(8)}
        out = _kraft(
            "topics",
            "offsets",
            TOPIC,
            "--partition",
            "1",
            "--time",
            "earliest",
            bootstrap=c.bootstrap,
        )
        assert out.stdout.strip() == f"{TOPIC}:1:0", out
