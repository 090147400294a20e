"""KIP-853 with real processes: a controller quorum grows from one voter to three, then a
voter is replaced (a fourth added, the first removed and stopped), while a producer writes
with ``acks=all`` through the brokers: metadata stays available and no acknowledged record is
lost. The brokers bootstrap from the first controller only
(``controller.quorum.bootstrap.servers``): they learn the new voters from the metadata log,
so once the only controller they were configured with is gone they still heartbeat (stay
unfenced) and forward admin requests. The `kraft quorum` commands are the operator's path
(`ControllerClient` underneath)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kraft.cli import main as kraft_main
from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, Producer
from storage.errors import KraftError

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]


def _voters(cluster: LocalCluster) -> set[int]:
    return {r.replica_id for r in cluster.controller_client().describe_quorum(timeout=10).voters}


def _unfenced_brokers(cluster: LocalCluster) -> set[int]:
    brokers = cluster.controller_client().describe_cluster(timeout=10).brokers
    return {b.broker_id for b in brokers if not b.fenced}


def _quorum(cluster: LocalCluster, *argv: str) -> None:
    code = kraft_main(
        ["quorum", *argv, "--bootstrap-controller", cluster.controller_bootstrap, "--json"]
    )
    assert code == 0, f"kraft quorum {' '.join(argv)} failed (logs: {cluster.data_dir / 'logs'})"


def test_a_quorum_grows_from_one_to_three_and_replaces_a_voter_under_acks_all_writes(
    tmp_path: Path,
) -> None:
    session_timeout_s = 2.5
    with LocalCluster(
        controllers=4,
        brokers=2,
        initial_voters=1,
        data_dir=tmp_path / "cluster",
        controller_config={"broker.session.timeout.ms": str(int(session_timeout_s * 1000))},
        broker_config={"broker.heartbeat.interval.ms": "250"},
    ) as cluster:
        cluster.start_controller(1)
        for b in cluster.broker_ids:
            cluster.start_broker(b)
        cluster.start_controller(2)  # observers until added
        cluster.start_controller(3)
        cluster.wait_until_healthy(timeout=40)
        assert _voters(cluster) == {1}
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topic("t", partitions=1, replication_factor=2)
            admin.wait_for_leaders("t", timeout=30)
        acked: list[int] = []
        stop = threading.Event()

        def produce() -> None:
            with Producer(cluster.bootstrap, acks="all", linger_ms=1) as producer:
                i = 0
                while not stop.is_set():
                    futures = [(n, producer.send("t", value=b"%d" % n)) for n in range(i, i + 10)]
                    i += 10
                    for n, future in futures:
                        try:
                            future.result(timeout=30)
                        except KraftError:
                            continue
                        acked.append(n)

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        try:
            addr = cluster.controller_addresses
            _quorum(
                cluster, "add-controller", "--controller-id", "2", "--controller-address", addr[2]
            )
            _quorum(
                cluster, "add-controller", "--controller-id", "3", "--controller-address", addr[3]
            )
            assert _voters(cluster) == {1, 2, 3}
            cluster.start_controller(4)
            _quorum(
                cluster, "add-controller", "--controller-id", "4", "--controller-address", addr[4]
            )
            _quorum(cluster, "remove-controller", "--controller-id", "1")
            assert _voters(cluster) == {2, 3, 4}
            # The brokers' only configured controller goes: they must have followed the log.
            cluster.kill_controller(1)
            stopped_at = time.monotonic()
            before = len(acked)
            with AdminClient(cluster.bootstrap) as admin:  # forwarded by a broker to 2, 3 or 4
                admin.create_topic("after", partitions=1, replication_factor=2)
                admin.wait_for_leaders("after", timeout=30)
            deadline = time.monotonic() + 20
            while len(acked) < before + 50 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(acked) >= before + 50, "writes stalled after the voter changes"
        finally:
            stop.set()
            thread.join(timeout=60)
        assert cluster.active_controller_id() in {2, 3, 4}
        values: set[int] = set()
        with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition("t", 0)])
            deadline = time.monotonic() + 30
            while not set(acked) <= values and time.monotonic() < deadline:
                values.update(int(r.value or b"") for r in consumer.poll(timeout=0.5))
        assert set(acked) <= values, "an acknowledged record was lost"
        # A broker whose heartbeats stopped reaching the controller is fenced one session
        # timeout later (and stays so): past it, both must be unfenced.
        time.sleep(max(0.0, stopped_at + session_timeout_s + 0.5 - time.monotonic()))
        deadline = time.monotonic() + 15
        while _unfenced_brokers(cluster) != set(cluster.broker_ids):
            assert time.monotonic() < deadline, "a broker stopped heartbeating"
            time.sleep(0.05)
