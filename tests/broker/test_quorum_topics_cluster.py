"""Real processes: quorum-mode topics (``replication.mode=quorum``, issue #12) beside an ISR
topic on the same brokers. Each quorum partition is a Raft group of its replicas that elects
its own leader and reports it to the controller; the clients are unchanged.

- SIGKILL of a quorum partition's leader broker while an idempotent acks=all producer writes
  to a quorum topic and an ISR topic: the group elects a new leader, Metadata shows it, writes
  resume on both topics, and every acknowledged record is read back exactly once at its
  acknowledged offset.
- Losing a majority of a quorum partition's replicas: acks=all writes fail (time out), and
  nothing acknowledged before is lost once the replicas come back.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, Producer
from storage.errors import KraftError
from tests.broker.clusters import running_cluster
from tests.broker.test_repeated_leader_kills import keep_evidence, wait_until

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

QUORUM = {"replication.mode": "quorum"}


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with running_cluster(controllers=3) as c:
        yield c


def _leader(cluster: LocalCluster, topic: str, partition: int = 0) -> tuple[int, int]:
    with AdminClient(cluster.bootstrap) as admin:
        p = next(p for p in admin.describe_topic(topic).partitions if p.partition == partition)
        return p.leader, p.leader_epoch


def _read_all(
    cluster: LocalCluster, topic: str, partitions: int
) -> tuple[dict[tuple[int, int], bytes | None], list[bytes | None]]:
    """Every record below each partition's high watermark: {(partition, offset): value},
    and the values in consumption order (to count duplicates)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        consumer.seek_to_end(tps)
        end = {tp.partition: consumer.position(tp, timeout=30) for tp in tps}
        for tp in tps:
            consumer.seek(tp, 0)
        by_position: dict[tuple[int, int], bytes | None] = {}
        values: list[bytes | None] = []
        positions = dict.fromkeys(end, 0)
        deadline = time.monotonic() + 60
        while any(positions[p] < end[p] for p in end):
            assert time.monotonic() < deadline, f"consumed up to {positions}, end {end}"
            for r in consumer.poll(timeout=1.0):
                if r.offset < end[r.partition]:
                    assert (r.partition, r.offset) not in by_position, "an offset read twice"
                    by_position[(r.partition, r.offset)] = r.value
                    values.append(r.value)
                    positions[r.partition] = max(positions[r.partition], r.offset + 1)
                else:
                    positions[r.partition] = max(positions[r.partition], r.offset)
            # NB: control batches (a Raft leader's first entry) occupy offsets nobody reads.
            for tp in tps:
                positions[tp.partition] = max(positions[tp.partition], consumer.position(tp))
    return by_position, values


def _check_exactly_once(
    cluster: LocalCluster,
    topic: str,
    partitions: int,
    acknowledged: dict[bytes, tuple[int, int]],
) -> None:
    by_position, values = _read_all(cluster, topic, partitions)
    duplicated = [v for v, n in Counter(values).items() if n > 1]
    assert not duplicated, f"{topic}: values written twice: {duplicated[:20]}"
    lost = {v: pos for v, pos in acknowledged.items() if by_position.get(pos) != v}
    assert not lost, f"{topic}: {len(lost)} acknowledged records lost, e.g. " + ", ".join(
        f"{v!r}@{pos} holds {by_position.get(pos)!r}" for v, pos in list(lost.items())[:10]
    )


class _Writer:
    """An idempotent acks=all producer writing unique values to some topics in a thread."""

    def __init__(self, cluster: LocalCluster, topics: dict[str, int], **options: object) -> None:
        self._cluster = cluster
        self._topics = topics
        self._options = options
        self.acknowledged: dict[str, dict[bytes, tuple[int, int]]] = {t: {} for t in topics}
        self.failed: list[str] = []
        self.error: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        assert not self._thread.is_alive(), "the producer thread did not finish"

    def acked(self, topic: str) -> int:
        with self._lock:
            return len(self.acknowledged[topic])

    def at_least(self, topic: str, n: int) -> Callable[[], bool]:
        return lambda: self.acked(topic) >= n

    def _run(self) -> None:
        try:
            with Producer(
                self._cluster.bootstrap,
                acks="all",
                enable_idempotence=True,
                linger_ms=2,
                **self._options,  # type: ignore[arg-type]
            ) as producer:
                i = 0
                while not self._stop.is_set():
                    futures = []
                    for topic, partitions in self._topics.items():
                        for n in range(i, i + 20):
                            value = b"%s-%07d" % (topic.encode(), n)
                            future = producer.send(topic, value=value, partition=n % partitions)
                            futures.append((topic, value, future))
                    i += 20
                    for topic, value, future in futures:
                        try:
                            md = future.result(timeout=90)
                        except KraftError as e:
                            with self._lock:
                                self.failed.append(f"{value!r}: {e!r:.200}")
                            continue
                        with self._lock:
                            assert value not in self.acknowledged[topic]
                            self.acknowledged[topic][value] = (md.partition, md.offset)
        except BaseException as e:  # reported by the test thread
            self.error.append(e)


def test_a_quorum_leader_kill_loses_nothing_beside_an_isr_topic(cluster: LocalCluster) -> None:
    try:
        _leader_kill(cluster)
    except BaseException as e:
        e.add_note(f"cluster data dir kept under {keep_evidence(cluster)}")
        raise


def _kraft(cluster: LocalCluster, *argv: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "kraft.cli", *argv, "--bootstrap", cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _leader_kill(cluster: LocalCluster) -> None:
    topics = {"ledger": 2, "events": 2}
    created = _kraft(
        cluster, "topics", "create", "ledger", "--partitions", "2", "--replication-factor", "3",
        "--config", "replication.mode=quorum",
    )  # fmt: skip
    assert "Created topic ledger" in created
    described = _kraft(cluster, "topics", "describe", "ledger")
    assert "ReplicationMode: quorum" in described and "Raft vote" in described
    assert "Voters: " in described and "Leader: none" not in described
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(
            "events", partitions=2, replication_factor=3, config={"min.insync.replicas": "2"}
        )
        for topic in topics:
            admin.wait_for_leaders(topic, timeout=30)
        description = admin.describe_topic("ledger")
        assert description.replication_mode == "quorum"
        assert admin.describe_topic("events").replication_mode == "isr"
    for p in description.partitions:  # the Raft vote's epochs start at 1
        assert p.leader_epoch >= 1 and sorted(p.isr) == sorted(p.replicas)

    with _Writer(cluster, topics) as writer:
        wait_until(writer.at_least("ledger", 100), 30, "the first acknowledgements")
        old, old_epoch = _leader(cluster, "ledger")
        cluster.kill_broker(old)
        before = {t: writer.acked(t) for t in topics}
        wait_until(
            lambda: _leader(cluster, "ledger")[0] not in (old, -1),
            30,
            f"a new Raft leader of ledger-0 after killing {old}, reported to the controller",
        )
        assert _leader(cluster, "ledger")[1] > old_epoch
        for topic in topics:
            wait_until(writer.at_least(topic, before[topic] + 100), 30, f"{topic} to progress")
        cluster.start_broker(old)
        cluster.wait_until_healthy(timeout=60)
        before = {t: writer.acked(t) for t in topics}
        wait_until(writer.at_least("ledger", before["ledger"] + 50), 30, "ledger after rejoin")
    assert not writer.error, f"producer thread failed: {writer.error!r}"
    for topic, partitions in topics.items():
        _check_exactly_once(cluster, topic, partitions, writer.acknowledged[topic])
    print(
        f"killed leader {old} (epoch {old_epoch}); acknowledged "
        + ", ".join(f"{t}={len(a)}" for t, a in writer.acknowledged.items())
        + f"; failed={len(writer.failed)}"
    )


def test_losing_a_quorum_majority_fails_writes_and_loses_nothing(cluster: LocalCluster) -> None:
    try:
        _majority_loss(cluster)
    except BaseException as e:
        e.add_note(f"cluster data dir kept under {keep_evidence(cluster)}")
        raise


def _majority_loss(cluster: LocalCluster) -> None:
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic("ledger", partitions=1, replication_factor=3, config=QUORUM)
        admin.wait_for_leaders("ledger", timeout=30)
    acknowledged: dict[bytes, tuple[int, int]] = {}
    with Producer(cluster.bootstrap, acks="all", enable_idempotence=True) as producer:
        for n in range(100):
            md = producer.send("ledger", value=b"before-%03d" % n, partition=0).result(30)
            acknowledged[b"before-%03d" % n] = (md.partition, md.offset)
    leader, _ = _leader(cluster, "ledger")
    followers = [b for b in cluster.broker_ids if b != leader]
    for broker in followers:
        cluster.kill_broker(broker)
    # Two of three voters gone: no majority, so no acks=all write can commit.
    failures = 0
    with Producer(
        cluster.bootstrap,
        acks="all",
        enable_idempotence=True,
        delivery_timeout_ms=3000,
        request_timeout_ms=1500,
    ) as producer:
        futures = [
            (b"during-%03d" % n, producer.send("ledger", value=b"during-%03d" % n, partition=0))
            for n in range(10)
        ]
        for value, future in futures:
            try:
                md = future.result(timeout=30)
            except KraftError:
                failures += 1
            else:
                acknowledged[value] = (md.partition, md.offset)
    assert failures == len(futures), "a write was acknowledged without a majority"
    for broker in followers:
        cluster.start_broker(broker)
    cluster.wait_until_healthy(timeout=60)
    with Producer(cluster.bootstrap, acks="all", enable_idempotence=True) as producer:
        for n in range(20):
            md = producer.send("ledger", value=b"after-%03d" % n, partition=0).result(60)
            acknowledged[b"after-%03d" % n] = (md.partition, md.offset)
    _check_exactly_once(cluster, "ledger", 1, acknowledged)
    print(f"acknowledged={len(acknowledged)} failed without a majority={failures}")
