"""Real processes: a partition leader's log fails (a full disk injected through
``KRAFT_TEST_FAULTS``, or bytes flipped in its segment file). The replica goes offline on that
broker, leadership moves to another ISR member, producers and consumers carry on there, nothing
acknowledged is lost, and once the fault clears the replica is rebuilt and rejoins the ISR
(issue 10, findings 5 and 6)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kraft.cluster import LocalCluster
from kraft.metadata.image import PartitionDescription
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, Producer
from storage.errors import KraftError
from storage.file_io import TEST_FAULTS_ENV, arm_fault, clear_fault
from storage.segment import segment_file_name
from tests.broker.clusters import running_cluster
from tests.broker.test_repeated_leader_kills import read_replica

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]

TOPIC = "disk"
TP = TopicPartition(TOPIC, 0)


@pytest.fixture
def faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fault directory every broker of the cluster watches (they inherit the variable)."""
    directory = tmp_path / "faults"
    monkeypatch.setenv(TEST_FAULTS_ENV, str(directory))
    return directory


@pytest.fixture
def cluster(faults: Path) -> Iterator[LocalCluster]:
    with running_cluster() as c:
        c.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
        yield c


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except (KraftError, TimeoutError, ConnectionError):
            pass
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.05)


def partition(cluster: LocalCluster) -> PartitionDescription:
    with AdminClient(cluster.bootstrap) as admin:
        return admin.describe_topic(TOPIC).partitions[0]


def produce(cluster: LocalCluster, values: list[bytes], timeout: float = 60) -> dict[bytes, int]:
    """Send ``values`` with an idempotent acks=all producer; their acknowledged offsets."""
    with Producer(cluster.bootstrap, acks="all", enable_idempotence=True, linger_ms=1) as p:
        futures = [(v, p.send(TOPIC, value=v, partition=0)) for v in values]
        return {v: f.result(timeout=timeout).offset for v, f in futures}


def consume_all(cluster: LocalCluster, count: int, timeout: float = 60) -> dict[int, bytes]:
    """Offsets 0..count-1 of the partition, read from whichever broker leads it."""
    read: dict[int, bytes] = {}
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 0)
        deadline = time.monotonic() + timeout
        while len(read) < count:
            assert time.monotonic() < deadline, f"read {len(read)} of {count} records"
            for r in consumer.poll(timeout=1.0):
                assert read.setdefault(r.offset, r.value) == r.value
    return read


def test_a_full_disk_moves_the_leadership_and_the_replica_returns_when_space_is_back(
    cluster: LocalCluster, faults: Path
) -> None:
    acked = produce(cluster, [b"before-%04d" % i for i in range(100)])
    wait_until(lambda: len(partition(cluster).isr) == 3, 30, "a full ISR")
    leader = partition(cluster).leader
    fault = arm_fault(faults, cluster.broker_data_dir(leader) / f"{TOPIC}-0")

    started = time.monotonic()
    acked |= produce(cluster, [b"during-%04d" % i for i in range(200)], timeout=45)
    failover_s = time.monotonic() - started
    now = partition(cluster)
    assert now.leader not in (leader, -1)
    assert leader not in now.isr and leader in now.offline_replicas

    clear_fault(fault)
    wait_until(lambda: leader in partition(cluster).isr, 45, f"broker {leader} back in the ISR")
    assert leader not in partition(cluster).offline_replicas
    acked |= produce(cluster, [b"after-%04d" % i for i in range(50)])

    read = consume_all(cluster, len(acked))
    lost = {v: o for v, o in acked.items() if read.get(o) != v}
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {list(lost.items())[:5]}"
    assert sorted(read) == list(range(len(acked)))  # no duplicates, no holes
    print(f"failover_s={failover_s:.2f}")


def test_a_corrupt_segment_is_failed_over_and_the_replica_is_rebuilt_from_the_new_leader(
    cluster: LocalCluster,
) -> None:
    values = [b"value-%04d" % i for i in range(600)]
    acked: dict[bytes, int] = {}
    for start in range(0, 600, 60):  # several batches
        acked |= produce(cluster, values[start : start + 60])
    wait_until(lambda: len(partition(cluster).isr) == 3, 30, "a full ISR")
    leader = partition(cluster).leader
    segment = cluster.broker_data_dir(leader) / f"{TOPIC}-0" / segment_file_name(0)
    data = bytearray(segment.read_bytes())
    at = len(data) // 9  # in a batch near offset 64
    with open(segment, "r+b") as f:  # the broker reads it through the page cache too
        f.seek(at)
        f.write(bytes([data[at] ^ 0x5A]))

    read = consume_all(cluster, 600)  # detected on read: served by the new leader
    assert {read[o]: o for o in range(600)} == acked
    now = partition(cluster)
    assert now.leader not in (leader, -1)

    # Reopened by the broker: recovery cut the segment at the corrupt batch, the replica
    # fetched the rest from the new leader and is back in the ISR.
    wait_until(lambda: leader in partition(cluster).isr, 45, f"broker {leader} back in the ISR")
    assert leader not in partition(cluster).offline_replicas
    log = cluster.broker_log(leader).read_text()
    assert "replica_offline" in log and "replica_back_online" in log
    for broker_id in cluster.broker_ids:
        cluster.stop_broker(broker_id)
    copies = {
        b: read_replica(cluster.broker_data_dir(b) / f"{TOPIC}-0", 600) for b in cluster.broker_ids
    }
    assert copies[leader] == copies[now.leader]  # the same batches, byte for byte


def test_a_removed_log_directory_takes_the_replica_offline_and_a_restart_rebuilds_it(
    cluster: LocalCluster,
) -> None:
    """Issue 16: the directory goes, the open segment files live on unlinked until the broker
    next needs the directory (a checkpoint, a roll); then the replica goes offline, the
    leadership moves, and a restart of the broker rebuilds the replica from the new leader."""
    acked = produce(cluster, [b"before-%04d" % i for i in range(100)])
    wait_until(lambda: len(partition(cluster).isr) == 3, 30, "a full ISR")
    leader = partition(cluster).leader
    directory = cluster.broker_data_dir(leader) / f"{TOPIC}-0"
    shutil.rmtree(directory)

    def moved() -> bool:
        acked.update(produce(cluster, [b"during-%04d" % len(acked)], timeout=30))
        now = partition(cluster)
        return now.leader not in (leader, -1) and leader in now.offline_replicas

    wait_until(moved, 60, f"broker {leader} to take its removed replica offline")
    assert leader not in partition(cluster).isr

    cluster.stop_broker(leader)
    cluster.start_broker(leader)
    wait_until(lambda: leader in partition(cluster).isr, 60, f"broker {leader} back in the ISR")
    assert directory.is_dir()
    acked |= produce(cluster, [b"after-%04d" % i for i in range(50)])
    read = consume_all(cluster, len(acked))
    lost = {v: o for v, o in acked.items() if read.get(o) != v}
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {list(lost.items())[:5]}"
