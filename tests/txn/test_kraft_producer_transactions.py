"""kraft's own transactional `Producer` (KIP-98, KIP-447) over gRPC against the shared kraft 3+3
cluster: consume-transform-produce with the input offsets committed in the transaction, an
abort that a read_committed `Consumer` never sees, and a zombie producer fenced by a second
producer with the same transactional id; ``kraft transactions list|describe|abort``."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from kraft.cli import main
from kraft.cluster import LocalCluster
from kraft.types import TRANSACTION_STATE_TOPIC, TopicPartition
from replication.clients import AdminClient, Consumer, Producer
from replication.group import partition_for_group
from storage.errors import InvalidTxnStateError, KraftError, ProducerFencedError
from tests.kafka_wire.test_transactions_cluster import new_topic  # 2 partitions, RF 3

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]


def _txn_producer(cluster: LocalCluster, transactional_id: str) -> Producer:
    p = Producer(
        cluster.bootstrap, transactional_id=transactional_id, **{"transaction.timeout.ms": 30_000}
    )
    p.init_transactions(30)
    return p


def _read(cluster: LocalCluster, topic: str, isolation: str, partitions: int = 2) -> list[bytes]:
    """The values a consumer at ``isolation`` reads from the start of ``topic`` to its end
    now (read_committed: the last stable offset)."""
    with Consumer(cluster.bootstrap, isolation_level=isolation) as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_end(tps)
        ends = {tp: c.position(tp, 10) for tp in tps}
        for tp in tps:
            c.seek(tp, 0)
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"{topic} not read to {ends} in 20 s"
            got.extend(r.value or b"" for r in c.poll(0.2))
        return sorted(got)


def _settled(cluster: LocalCluster, topic: str, want: int, partitions: int = 2) -> list[bytes]:
    """read_committed values once ``want`` are visible (the markers follow the commit)."""
    deadline = time.monotonic() + 20
    while len(got := _read(cluster, topic, "read_committed", partitions)) < want:
        assert time.monotonic() < deadline, f"only {len(got)} of {want} committed visible"
        time.sleep(0.1)
    return got


def test_consume_transform_produce_commits_output_and_input_offsets_together(
    kraft_cluster: LocalCluster,
) -> None:
    cluster = kraft_cluster
    source, sink = new_topic(cluster, "ctp-in"), new_topic(cluster, "ctp-out")
    with Producer(cluster.bootstrap) as plain:
        for i in range(6):
            plain.send(source, f"in-{i}".encode(), partition=i % 2)
        plain.flush(30)
    group = f"ctp-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(
        cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    producer = _txn_producer(cluster, f"ctp-{uuid.uuid4().hex[:6]}")
    try:
        consumer.subscribe([source])
        records = []
        deadline = time.monotonic() + 30
        while len(records) < 6 and time.monotonic() < deadline:
            records.extend(consumer.poll(0.5))
        assert len(records) == 6
        producer.begin_transaction()
        for r in records:
            producer.send(sink, (r.value or b"").upper(), partition=r.partition)
        offsets = {TopicPartition(r.topic, r.partition): r.offset + 1 for r in records}
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata(), 30)
        # Before the commit: nothing of the transaction is visible, offsets included.
        producer.flush(30)
        assert _read(cluster, sink, "read_committed") == []
        assert len(_read(cluster, sink, "read_uncommitted")) == 6
        # NB: not this read_committed consumer's committed(): it asks with require_stable,
        # which a pending offset answers UNSTABLE_OFFSET_COMMIT until the end (KIP-447)
        with AdminClient(cluster.bootstrap) as admin:
            assert admin.list_group_offsets(group) == {}
        producer.commit_transaction(30)
        assert _settled(cluster, sink, 6) == sorted(f"IN-{i}".encode() for i in range(6))
        deadline = time.monotonic() + 20
        while consumer.committed(list(offsets)) != offsets and time.monotonic() < deadline:
            time.sleep(0.1)
        assert consumer.committed(list(offsets)) == offsets
    finally:
        producer.close(10)
        consumer.close()


def test_an_abort_hides_its_records_and_the_next_transaction_commits(
    kraft_cluster: LocalCluster,
) -> None:
    cluster = kraft_cluster
    topic = new_topic(cluster, "abort")
    tid = f"abort-{uuid.uuid4().hex[:6]}"
    with _txn_producer(cluster, tid) as producer, AdminClient(cluster.bootstrap) as admin:
        epoch = admin.describe_transaction(tid).producer_epoch
        with pytest.raises(InvalidTxnStateError):
            producer.send(topic, b"outside")  # no transaction open
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, f"aborted-{i}".encode(), partition=i % 2)
        producer.flush(30)
        producer.abort_transaction(30)
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, f"committed-{i}".encode(), partition=i % 2)
        producer.commit_transaction(30)
        # KIP-890 part 2 (transaction.version 2, the cluster's default): each end bumped the
        # epoch, and the producer's next transaction used the bumped one.
        assert admin.describe_transaction(tid).producer_epoch == epoch + 2
    assert _settled(cluster, topic, 3) == [f"committed-{i}".encode() for i in range(3)]
    assert (
        len(_read(cluster, topic, "read_uncommitted")) == 7
    )  # the aborted records are in the log, only hidden


def test_a_second_producer_with_the_same_id_fences_the_zombie(kraft_cluster: LocalCluster) -> None:
    cluster = kraft_cluster
    topic = new_topic(cluster, "fence")
    tid = f"fence-{uuid.uuid4().hex[:6]}"
    zombie = _txn_producer(cluster, tid)
    try:
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0)
        zombie.flush(30)
        with _txn_producer(cluster, tid) as successor:  # fences and aborts the zombie's
            with pytest.raises(ProducerFencedError):
                zombie.commit_transaction(30)
            with pytest.raises(KraftError):
                zombie.begin_transaction()  # fatal: the zombie can only be closed
            successor.begin_transaction()
            successor.send(topic, b"successor", partition=1)
            successor.commit_transaction(30)
        assert _settled(cluster, topic, 1) == [b"successor"]
    finally:
        zombie.close(5)


def _cli(capsys: pytest.CaptureFixture[str], cluster: LocalCluster, *argv: str) -> Any:
    code = main(["transactions", *argv, "--bootstrap", cluster.bootstrap, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_kraft_transactions_lists_describes_and_aborts_a_hanging_transaction(
    kraft_cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = kraft_cluster
    topic = new_topic(cluster, "hang")
    tid = f"hang-{uuid.uuid4().hex[:6]}"
    with _txn_producer(cluster, tid) as producer:
        producer.begin_transaction()
        producer.send(topic, b"hanging", partition=0)
        producer.flush(30)
        listed = _cli(capsys, cluster, "list", "--state", "Ongoing")
        assert {"transactional_id": tid, "producer_id": listed[0]["producer_id"]} in [
            {k: t[k] for k in ("transactional_id", "producer_id")} for t in listed
        ]
        described = _cli(capsys, cluster, "describe", "--transactional-id", tid)
        assert described["state"] == "Ongoing"
        assert described["partitions"] == [f"{topic}-0"]
        assert _read(cluster, topic, "read_committed") == []  # the LSO is held back
        # The operator aborts it at the partition (as if its producer were gone for good).
        with AdminClient(cluster.bootstrap) as admin:
            state = admin.describe_topic(TRANSACTION_STATE_TOPIC)
            leader_epoch = state.partitions[partition_for_group(tid, len(state.partitions))]
        _cli(
            capsys,
            cluster,
            "abort",
            "--topic",
            topic,
            "--partition",
            "0",
            "--producer-id",
            str(described["producer_id"]),
            "--producer-epoch",
            str(described["producer_epoch"]),
            "--coordinator-epoch",
            str(leader_epoch.leader_epoch),
        )
        with Producer(cluster.bootstrap) as plain:
            plain.send(topic, b"after", partition=0).result(30)
        assert _read(cluster, topic, "read_committed") == [b"after"]
    assert main(["transactions", "list", "--state", "Nope", "--bootstrap", cluster.bootstrap]) == 1
    assert "unknown transaction states: Nope" in capsys.readouterr().err


def test_a_failed_record_makes_the_transaction_abortable_and_the_abort_bumps_the_epoch(
    kraft_cluster: LocalCluster,
) -> None:
    cluster = kraft_cluster
    topic = f"too-large-{uuid.uuid4().hex[:8]}"
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(
            topic, partitions=1, replication_factor=3, config={"max.message.bytes": "512"}
        )
        admin.wait_for_leaders(topic, timeout=30)
    tid = f"abortable-{uuid.uuid4().hex[:6]}"
    with _txn_producer(cluster, tid) as producer, AdminClient(cluster.bootstrap) as admin:
        epoch = admin.describe_transaction(tid).producer_epoch
        producer.begin_transaction()
        producer.send(topic, b"small", partition=0)
        failed = producer.send(topic, b"x" * 4096, partition=0)  # the broker refuses it
        with pytest.raises(KraftError):
            failed.result(30)
        with pytest.raises(KraftError):
            producer.commit_transaction(30)  # abortable: only an abort may follow
        producer.abort_transaction(30)  # and a new epoch: the lost sequence is forgotten
        assert admin.describe_transaction(tid).producer_epoch == epoch + 1  # KIP-360
        producer.begin_transaction()
        producer.send(topic, b"next", partition=0)
        producer.commit_transaction(30)
    assert _settled(cluster, topic, 1, partitions=1) == [b"next"]


def test_kraft_transactions_abort_finds_the_producer_from_the_start_offset(
    kraft_cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``kafka-transactions.sh abort --start-offset``: the leader's DescribeProducers names
    the producer whose transaction opened at that offset, and its abort marker is written."""
    cluster = kraft_cluster
    topic = new_topic(cluster, "hang-at")
    with Producer(cluster.bootstrap) as plain:
        plain.send(topic, b"before", partition=0).result(30)
    with _txn_producer(cluster, f"hang-at-{uuid.uuid4().hex[:6]}") as producer:
        producer.begin_transaction()
        producer.send(topic, b"hanging", partition=0)
        producer.flush(30)
        assert _read(cluster, topic, "read_committed") == [b"before"]  # held at offset 1
        argv = ["abort", "--topic", topic, "--partition", "0"]
        assert main(["transactions", *argv, "--start-offset", "0", "--bootstrap",
                     cluster.bootstrap]) == 1  # fmt: skip
        assert "Could not find any open transactions starting at offset 0" in (
            capsys.readouterr().err
        )
        assert main(["transactions", *argv, "--bootstrap", cluster.bootstrap]) == 2
        capsys.readouterr()
        aborted = _cli(capsys, cluster, *argv, "--start-offset", "1")
        with AdminClient(cluster.bootstrap) as admin:
            producers = admin.describe_producers(TopicPartition(topic, 0))
        assert aborted["producer_id"] in [p.producer_id for p in producers]
        assert [p.current_txn_start_offset for p in producers] == [-1, -1]  # nothing open
        with Producer(cluster.bootstrap) as plain:
            plain.send(topic, b"after", partition=0).result(30)
        assert _read(cluster, topic, "read_committed") == [b"after", b"before"]
