"""Real broker processes: `LocalCluster(controllers=1, brokers=3)` with the real clients."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, ConsumerRecord, Producer
from storage.errors import KraftError
from tests.broker.clusters import running_cluster

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with running_cluster() as c:
        yield c


def create_topic(cluster: LocalCluster, name: str, partitions: int) -> None:
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(
            name,
            partitions=partitions,
            replication_factor=3,
            config={"min.insync.replicas": "2"},
        )
        admin.wait_for_leaders(name, timeout=30)


def leader_of(cluster: LocalCluster, topic: str, partition: int) -> int:
    with AdminClient(cluster.bootstrap) as admin:
        return admin.describe_topic(topic).partitions[partition].leader


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + 60
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(consumer.poll(timeout=1.0))
        out.extend(consumer.poll(timeout=0.5))
    return out


def test_acks_all_records_are_replicated_to_every_isr_member_and_consumed_back(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, "orders", partitions=3)
    with Producer(cluster.bootstrap, acks="all", linger_ms=2) as producer:
        futures = [producer.send("orders", value=b"%d" % i, partition=i % 3) for i in range(600)]
        producer.flush()
        sent = [f.result(timeout=30) for f in futures]
    assert sorted(md.offset for md in sent if md.partition == 0) == list(range(200))
    records = consume_all(cluster.bootstrap, "orders", 3, 600)
    assert sorted(int(r.value or b"") for r in records) == list(range(600))
    with AdminClient(cluster.bootstrap) as admin:
        for p in admin.describe_topic("orders").partitions:
            assert sorted(p.isr) == sorted(cluster.broker_ids)


def test_controlled_shutdown_moves_leadership_and_exits_zero(cluster: LocalCluster) -> None:
    create_topic(cluster, "handover", partitions=1)
    leader = leader_of(cluster, "handover", 0)
    with Producer(cluster.bootstrap, acks="all") as producer:
        producer.send("handover", value=b"before", partition=0).result(timeout=30)
        assert cluster.stop_broker(leader, timeout=40) == 0
        assert leader_of(cluster, "handover", 0) not in (leader, -1)
        producer.send("handover", value=b"after", partition=0).result(timeout=60)
    values = [r.value for r in consume_all(cluster.bootstrap, "handover", 1, 2)]
    assert values == [b"before", b"after"]


def test_killing_the_leader_during_produce_loses_no_acknowledged_record(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, "failover", partitions=1)
    leader = leader_of(cluster, "failover", 0)
    acknowledged: list[int] = []
    stop = threading.Event()

    def produce() -> None:
        with Producer(cluster.bootstrap, acks="all", linger_ms=1) as producer:
            i = 0
            while not stop.is_set():
                futures = [
                    (n, producer.send("failover", value=b"%d" % n, partition=0))
                    for n in range(i, i + 20)
                ]
                i += 20
                for n, future in futures:
                    try:
                        future.result(timeout=60)
                    except KraftError:
                        continue
                    acknowledged.append(n)

    thread = threading.Thread(target=produce)
    thread.start()
    deadline = time.monotonic() + 30
    while len(acknowledged) < 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    cluster.kill_broker(leader)
    before_kill = len(acknowledged)
    deadline = time.monotonic() + 60
    while len(acknowledged) < before_kill + 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    thread.join(timeout=90)
    assert len(acknowledged) >= before_kill + 200, "produce did not resume after the failover"
    assert leader_of(cluster, "failover", 0) not in (leader, -1)
    records = consume_all(cluster.bootstrap, "failover", 1, len(acknowledged))
    values = [int(r.value or b"") for r in records]
    assert len(values) == len(set(values)), "a record was written twice"
    assert set(acknowledged) <= set(values), "an acknowledged record was lost"


def test_a_restarted_follower_catches_up_and_rejoins_the_isr(cluster: LocalCluster) -> None:
    create_topic(cluster, "rejoin", partitions=1)
    leader = leader_of(cluster, "rejoin", 0)
    follower = next(b for b in cluster.broker_ids if b != leader)
    with Producer(cluster.bootstrap, acks="all") as producer:
        producer.send("rejoin", value=b"0", partition=0).result(timeout=30)
        cluster.kill_broker(follower)
        for i in range(1, 50):
            producer.send("rejoin", value=b"%d" % i, partition=0).result(timeout=60)
        with AdminClient(cluster.bootstrap) as admin:
            deadline = time.monotonic() + 30
            while follower in admin.describe_topic("rejoin").partitions[0].isr:
                assert time.monotonic() < deadline, "the dead follower was never shrunk out"
                time.sleep(0.1)
            cluster.start_broker(follower)
            deadline = time.monotonic() + 60
            while follower not in admin.describe_topic("rejoin").partitions[0].isr:
                assert time.monotonic() < deadline, "the restarted follower never rejoined"
                time.sleep(0.1)
        producer.send("rejoin", value=b"50", partition=0).result(timeout=30)
    values = [r.value for r in consume_all(cluster.bootstrap, "rejoin", 1, 51)]
    assert values == [b"%d" % i for i in range(51)]


def test_a_killed_leader_restarts_truncates_its_tail_and_rejoins(cluster: LocalCluster) -> None:
    """The old leader may hold records no follower fetched (never acknowledged with acks=all).
    Back as a follower it must truncate to the new leader's epoch end offset (KIP-101/279),
    not keep them: afterwards every replica serves the same log."""
    create_topic(cluster, "diverge", partitions=1)
    leader = leader_of(cluster, "diverge", 0)
    with Producer(cluster.bootstrap, acks="all", linger_ms=1) as producer:
        futures = [producer.send("diverge", value=b"%d" % i, partition=0) for i in range(300)]
        cluster.kill_broker(leader)
        acknowledged = []
        for i, future in enumerate(futures):
            try:
                future.result(timeout=60)
            except KraftError:
                continue
            acknowledged.append(i)
        cluster.start_broker(leader)
        with AdminClient(cluster.bootstrap) as admin:
            deadline = time.monotonic() + 60
            while sorted(admin.describe_topic("diverge").partitions[0].isr) != cluster.broker_ids:
                assert time.monotonic() < deadline, "the old leader never rejoined the ISR"
                time.sleep(0.1)
        producer.send("diverge", value=b"last", partition=0).result(timeout=30)
    new_leader = leader_of(cluster, "diverge", 0)
    # Now make the old leader the only live ISR member left besides one other: stop the new
    # leader gracefully, so the old leader's (truncated) log is read back.
    assert cluster.stop_broker(new_leader, timeout=40) == 0
    records = consume_all(cluster.bootstrap, "diverge", 1, len(acknowledged) + 1)
    values = [r.value for r in records]
    assert len(values) == len(set(values)), "a record was written twice"
    assert {b"%d" % i for i in acknowledged} | {b"last"} <= set(values)
    assert [r.offset for r in records] == list(range(len(records)))


def test_an_idempotent_producer_keeps_send_order_with_requests_in_flight(
    cluster: LocalCluster,
) -> None:
    """gRPC may hand concurrent Produce calls to the broker in any order; the leader must
    still append an idempotent producer's batches in sequence order (KIP-98 ordering with up
    to 5 requests in flight), not fail them or start the producer at a later sequence."""
    create_topic(cluster, "ordered", partitions=3)
    n = 30_000
    with Producer(cluster.bootstrap, acks="all", linger_ms=1, batch_size=2048) as producer:
        futures = [producer.send("ordered", value=b"%d" % i, partition=i % 3) for i in range(n)]
        producer.flush()
        sent = [f.result(timeout=60) for f in futures]
    for partition in range(3):
        offsets = [md.offset for md in sent if md.partition == partition]
        assert offsets == list(range(n // 3))
    records = consume_all(cluster.bootstrap, "ordered", 3, n)
    for partition in range(3):
        values = [int(r.value or b"") for r in records if r.partition == partition]
        assert values == list(range(partition, n, 3))
