"""Three real controller processes: failover, catch-up from a snapshot, quorum loss, restart.

Each test owns a `LocalCluster` whose data and logs live under pytest's ``tmp_path`` (kept
after a failure: the assertion messages name the log directory). Conditions are awaited with
deadlines, never with fixed sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraft import LocalCluster
from kraft.cluster.process import wait_for
from kraft.controller.client import ControllerClient
from storage.errors import KraftError, NotControllerError
from tests.controller_process.helpers import FakeBrokers, TopicWriter

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

CONTROLLER_CONFIG = {
    # Snapshot often, so a node that was down must catch up from a snapshot (KIP-630).
    "metadata.log.max.record.bytes.between.snapshots": "2048",
    # Fake brokers heartbeat every 0.3 s; be lenient with a loaded 2-core machine.
    "broker.session.timeout.ms": "10000",
}
BROKERS = (101, 102, 103)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        controllers=3,
        brokers=0,
        data_dir=tmp_path / "cluster",
        controller_config=CONTROLLER_CONFIG,
    ) as cluster:
        cluster.wait_until_healthy(timeout=30)
        yield cluster


def _logs(cluster: LocalCluster) -> str:
    return f"(controller logs: {cluster.data_dir / 'logs'})"


def _wait_for_active_brokers(client: ControllerClient, cluster: LocalCluster) -> None:
    def unfenced() -> bool:
        brokers = client.describe_cluster(timeout=5).brokers
        return {b.broker_id for b in brokers if not b.fenced} >= set(BROKERS)

    wait_for(unfenced, 20, f"fake brokers to be unfenced {_logs(cluster)}")


def test_killed_leader_is_replaced_keeps_acknowledged_topics_and_catches_up_from_a_snapshot(
    cluster: LocalCluster,
) -> None:
    client = cluster.controller_client()
    with FakeBrokers(cluster.controller_bootstrap, BROKERS):
        _wait_for_active_brokers(client, cluster)
        writer = TopicWriter(client, "t")
        writer.start()
        wait_for(lambda: writer.count() >= 10, 20, f"10 acknowledged topics {_logs(cluster)}")

        old_leader = cluster.active_controller_id()
        acked_before_kill = writer.count()
        killed_at = time.monotonic()
        cluster.kill_controller(old_leader)  # SIGKILL

        wait_for(
            lambda: writer.count() >= acked_before_kill + 40,
            30,
            f"40 topics acknowledged after killing the leader {_logs(cluster)}",
        )
        writer.stop()
        new_leader = cluster.active_controller_id()
        assert new_leader != old_leader
        failover_s = time.monotonic() - killed_at

        topics = set(client.list_topics())
        lost = [t for t in writer.acknowledged if t not in topics]
        assert not lost, f"acknowledged topics lost after failover: {lost} {_logs(cluster)}"

        # The survivors snapshotted and trimmed their logs past the killed node's log end
        # (2 KiB snapshot interval; 40+ topics since): it must load the leader's snapshot.
        cluster.start_controller(old_leader)
        address = cluster.controller_addresses[old_leader]

        def caught_up() -> bool:
            view = client.describe_cluster(address=address, timeout=2)
            return {t.name for t in view.topics} >= topics

        wait_for(caught_up, 30, f"controller {old_leader} to catch up {_logs(cluster)}")
        log = cluster.controller_log(old_leader).read_text()
        assert '"snapshot_installed"' in log, f"no snapshot was fetched {_logs(cluster)}"
        cluster.wait_until_healthy(timeout=20)
    print(f"failover and 40 writes took {failover_s:.2f}s")


def test_losing_two_of_three_fails_writes_quickly_and_healing_resumes_progress(
    cluster: LocalCluster,
) -> None:
    client = cluster.controller_client()
    with FakeBrokers(cluster.controller_bootstrap, BROKERS):
        _wait_for_active_brokers(client, cluster)
        client.create_topic("before", num_partitions=2)
        leader = cluster.active_controller_id()
        # Kill both followers: the leader is still alive and must stop acting as one.
        followers = [i for i in cluster.controller_ids if i != leader]
        for node_id in followers:
            cluster.kill_controller(node_id)

        started = time.monotonic()
        with pytest.raises(KraftError) as failure:
            cluster.controller_client(timeout=3).create_topic("during")
        elapsed = time.monotonic() - started
        assert failure.value.retriable, failure.value
        assert elapsed < 8, f"a write without a quorum took {elapsed:.1f}s to fail"

        # No split brain: the survivor resigns (check-quorum, KIP-595) and commits nothing.
        survivor = ControllerClient(cluster.controller_addresses[leader], timeout=1)
        with survivor:

            def survivor_resigned() -> bool:
                try:
                    survivor.describe_quorum(timeout=0.5)
                except NotControllerError:
                    return True
                return False

            wait_for(survivor_resigned, 5, f"the lone survivor to resign {_logs(cluster)}")
            view = survivor.describe_cluster(address=cluster.controller_addresses[leader])
            assert view.controller_id != leader
            assert "during" not in {t.name for t in view.topics}

        for node_id in followers:
            cluster.start_controller(node_id)
        cluster.wait_until_healthy(timeout=30)
        client.create_topic("after")
        assert {"before", "after"} <= set(client.list_topics())


def test_stopping_and_restarting_every_controller_keeps_all_metadata(
    cluster: LocalCluster,
) -> None:
    client = cluster.controller_client()
    with FakeBrokers(cluster.controller_bootstrap, BROKERS):
        _wait_for_active_brokers(client, cluster)
        for i in range(30):
            client.create_topic(f"keep-{i}", num_partitions=2, replication_factor=2)
        before = client.describe_cluster()

    codes = {i: cluster.stop_controller(i) for i in cluster.controller_ids}  # SIGTERM
    assert codes == dict.fromkeys(cluster.controller_ids, 0), codes
    for node_id in cluster.controller_ids:
        cluster.start_controller(node_id)
    cluster.wait_until_healthy(timeout=30)

    after = client.describe_cluster()
    assert after.topics == before.topics
    assert {b.broker_id for b in after.brokers} == set(BROKERS)


def test_paused_leader_is_replaced_and_steps_down_when_resumed(cluster: LocalCluster) -> None:
    client = cluster.controller_client()
    with FakeBrokers(cluster.controller_bootstrap, BROKERS):
        _wait_for_active_brokers(client, cluster)
        old_leader = cluster.active_controller_id()
        cluster.pause_controller(old_leader)  # SIGSTOP: alive, sockets open, silent
        try:
            client.create_topic("while-paused")
            assert cluster.active_controller_id() != old_leader
        finally:
            cluster.resume_controller(old_leader)
        address = cluster.controller_addresses[old_leader]

        def followed() -> bool:
            view = client.describe_cluster(address=address, timeout=2)
            return view.controller_id not in (-1, old_leader) and "while-paused" in {
                t.name for t in view.topics
            }

        wait_for(followed, 20, f"the resumed old leader to follow {_logs(cluster)}")
        client.create_topic("after-resume")


def test_a_killed_leader_is_replaced_long_before_the_fetch_timeout(tmp_path: Path) -> None:
    """Its host closes its connections, and the followers campaign at once: with a 60 s
    fetch timeout a SIGKILLed leader is still replaced within the 20 s deadline (a paused or
    cut-off one would wait the 60 s)."""
    config = {"controller.quorum.fetch.timeout.ms": "60000"}
    with LocalCluster(3, 0, data_dir=tmp_path / "cluster", controller_config=config) as cluster:
        cluster.wait_until_healthy(timeout=30)
        old_leader = cluster.active_controller_id()
        cluster.kill_controller(old_leader)
        wait_for(
            lambda: cluster.active_controller_id() not in (None, -1, old_leader),
            20,
            f"a new active controller {_logs(cluster)}",
        )
        logs = "".join(
            (cluster.data_dir / "logs" / f"controller-{n}.log").read_text()
            for n in cluster.controller_ids
            if n != old_leader
        )
        assert "leader_connection_lost" in logs
