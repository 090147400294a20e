"""Nodes on separate network hosts (issue 29): 3 controllers and a broker, each in its own
network namespace, started from per-node properties files as docs/operations.md says, with mTLS
and per-host certificates (``--san``). Real faults act on their links: a one-way partition of
the active controller's outbound traffic, and a bandwidth limit on the broker's link. A
librdkafka client on a host of its own uses the broker's SSL Kafka listener.

Needs root (CI has it). Where namespaces cannot be made the test fails with one line: it does
not skip, so a CI that lost the privilege shows it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pytest

from kraft.cli import main
from kraft.cluster.netns import (
    STATE_DIR,
    NetnsNetwork,
    running_networks,
    sweep,
)
from kraft.cluster.netns_cluster import NetnsCluster
from kraft.properties import load_properties
from kraft.types import TopicPartition
from replication.clients import Consumer, Producer
from tests.netns import require_namespaces
from tests.netns.kafka_roundtrip import librdkafka_security, run_on_host
from tests.netns.operations_doc import check_in_step

pytestmark = pytest.mark.timeout(90)

SESSION_MS = 10_000


@pytest.fixture(scope="module")
def cluster() -> Iterator[NetnsCluster]:
    require_namespaces()
    # A session longer than a broker's restart takes, so a restarted broker's old
    # registration is still unfenced when the new process serves (see the restart test).
    session = {"broker.session.timeout.ms": str(SESSION_MS)}
    with NetnsCluster(controllers=3, brokers=1, tls=True, controller_config=session) as c:
        c.wait_until_running(60)
        yield c


def _quorum(cluster: NetnsCluster) -> tuple[int, int]:
    """(leader, epoch) from the active controller."""
    with cluster.controller_client(timeout=10.0, request_timeout=0.5) as client:
        q = client.describe_quorum(timeout=10.0)
        return q.leader_id, q.leader_epoch


def _epoch_stays(cluster: NetnsCluster, leader: int, epoch: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert _quorum(cluster) == (leader, epoch)
        time.sleep(0.2)


def test_a_one_way_cut_of_the_leaders_outbound_elects_another_and_the_epoch_then_holds(
    cluster: NetnsCluster,
) -> None:
    """The old leader still hears everyone (its inbound is untouched), but no fetch response
    reaches a follower: they elect a new leader; the old one learns it (BeginQuorumEpoch
    arrives), and its pre-votes (KIP-996) cannot get out, so no epoch is spent on it, while
    cut and after the heal."""
    assert cluster.network is not None
    old_leader, old_epoch = _quorum(cluster)
    cluster.network.cut(cluster.host_name(old_leader))
    try:
        deadline = time.monotonic() + 20
        while (now := _quorum(cluster))[0] == old_leader:
            assert time.monotonic() < deadline, f"still led by {old_leader} (epoch {now[1]})"
            time.sleep(0.1)
        leader, epoch = now
        assert epoch > old_epoch
        _epoch_stays(cluster, leader, epoch, 3.0)
        assert cluster.network.limits(cluster.host_name(old_leader))["dropped"] > 0
    finally:
        cluster.network.heal()
    _epoch_stays(cluster, leader, epoch, 2.0)


def test_records_cross_a_bandwidth_limited_link_all_of_them(cluster: NetnsCluster) -> None:
    """A 512 kbit/s token bucket on the broker's link: every acknowledged record reads back,
    and the bucket did hold traffic back (its overlimits count)."""
    assert cluster.network is not None
    broker = cluster.host_name(cluster.broker_ids[0])
    with cluster.controller_client(timeout=30.0) as client:
        client.create_topic("slow", 1, 1, timeout=30.0)
        deadline = time.monotonic() + 20
        while client.describe_topic("slow", timeout=10.0).partitions[0].leader < 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    run = cluster.network.run_id  # through the command an operator uses
    assert main(["netns", "fault", broker, "--bandwidth", "512", "--run", run]) == 0
    try:
        count, value = 200, b"x" * 1000  # 200 KB: about 3 s at 512 kbit/s
        security = cluster.client_security()
        with Producer(cluster.bootstrap, acks="all", **security) as producer:
            futures = [producer.send("slow", value) for _ in range(count)]
            producer.flush(30)
        assert all(f.exception() is None for f in futures)
        # NB: small fetches: one response must cross the link well within the consumer's
        # patience for a fetch (fetch.max.wait.ms + retry.backoff.max.ms), or it abandons each.
        options = {
            "auto.offset.reset": "earliest",
            "max.partition.fetch.bytes": 16384,
            "fetch.max.bytes": 16384,
        }
        with Consumer(cluster.bootstrap, **options, **security) as c:
            c.assign([TopicPartition("slow", 0)])
            got = 0
            deadline = time.monotonic() + 30
            while got < count:
                assert time.monotonic() < deadline, f"read {got} of {count}"
                got += len(c.poll(1.0))
        assert got == count
        assert cluster.network.limits(broker)["overlimits"] > 0
    finally:
        assert main(["netns", "heal", "--run", run]) == 0


def test_librdkafka_on_a_client_host_produces_and_reads_back_over_the_ssl_kafka_listener(
    cluster: NetnsCluster,
) -> None:
    """The client certificate (``User:CN=client``) against the broker's per-host certificate,
    which names its address: the handshake checks it as a Kafka client on another host does.
    The broker's properties are docs/operations.md's TLS example."""
    assert cluster.network is not None
    (broker,) = cluster.broker_ids
    check_in_step(load_properties(cluster.config_path(broker)), tls=True)
    client = cluster.network.add_host("kafka-client")
    cluster.create_topic("kafka-ssl", 1, 1)
    security = librdkafka_security(cluster.client_security())
    assert security["security.protocol"] == "SSL"
    result = run_on_host(client.exec_prefix(), cluster.kafka_bootstrap, "kafka-ssl", 50, security)
    assert result["errors"] == []
    assert result["brokers"] == {str(broker): cluster.kafka_addresses[broker]}
    assert result["delivered"] == list(range(50))
    assert result["read"] == [f"v{i}" for i in range(50)]


def test_healthy_after_a_broker_restart_means_its_new_registration_is_unfenced(
    cluster: NetnsCluster,
) -> None:
    """After SIGKILL and a start, the controller keeps the old registration, unfenced, until
    its session expires; the new process serves before that. `wait_until_healthy` waits for
    the new incarnation (a higher broker epoch), not the old one's leftover registration."""
    broker = cluster.broker_ids[0]
    cluster.wait_until_healthy(60)
    with cluster.controller_client(timeout=10.0) as client:

        def registration() -> tuple[int, bool]:
            (b,) = [
                b for b in client.describe_cluster(timeout=10.0).brokers if b.broker_id == broker
            ]
            return b.broker_epoch, b.fenced

        old_epoch, _ = registration()
        cluster.kill_broker(broker)
        cluster.start_broker(broker)
        cluster.wait_until_healthy(SESSION_MS / 1000 + 45)
        epoch, fenced = registration()
    assert epoch > old_epoch and not fenced


def test_a_run_whose_owner_died_leaves_nothing_after_a_sweep() -> None:
    """A harness SIGKILLed mid-run cannot clean up: `sweep` (which every new run calls first)
    removes the namespaces, links and state of a run whose owner is gone, and leaves live runs
    alone. (The owner here is a process that has exited, recorded as the run's owner.)"""
    require_namespaces()
    network = NetnsNetwork()
    network.add_host("a")
    network.add_host("b")
    run = network.run_id
    assert run in running_networks()
    assert not any(run in line for line in sweep())  # its owner (this process) lives
    state = STATE_DIR / f"{run}.json"
    state.write_text(state.read_text().replace(f'"pid": {os.getpid()}', f'"pid": {_gone_pid()}'))
    network.owner = False  # as after a SIGKILL: nobody will close it
    assert run not in running_networks()
    removed = sweep()
    assert f"netns kn{run}-a" in removed and f"link kn{run}-br" in removed
    assert not any(run in line for line in _listing())
    assert not state.exists()


def _gone_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _listing() -> list[str]:
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [*links.splitlines(), *namespaces.splitlines()]
