"""Transactions (KIP-98) through librdkafka's transactional producer against the shared kraft
3+3 cluster: a commit, an abort, fencing by a second producer with the same transactional id,
and read_committed consumers that see exactly the committed records (read_uncommitted ones see
the aborted ones too); ListOffsets' latest under read_committed stops at the last stable offset.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import confluent_kafka
import pytest

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer
from storage.errors import ErrorCode
from tests.kafka_wire.wire import call

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]

PARTITIONS = 2


def new_topic(cluster: LocalCluster, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(
            name, partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"}
        )
        admin.wait_for_leaders(name, timeout=30)
    return name


def producer(cluster: LocalCluster, transactional_id: str) -> confluent_kafka.Producer:
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 30_000,
            "log_level": 3,
        }
    )
    p.init_transactions(30)
    return p


def read_all(cluster: LocalCluster, topic: str, isolation: str, want: int) -> list[bytes]:
    """Every value of ``topic`` a consumer at ``isolation`` sees, once it has ``want`` of them
    and the partitions' ends (a deadline bounds the wait)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 3,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (len(got) < want or len(at_end) < PARTITIONS):
            m = consumer.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                continue
            at_end.discard(m.partition())
            got.append(m.value())
        return sorted(got)
    finally:
        consumer.close()


def describe(cluster: LocalCluster, transactional_id: str) -> list[Any]:
    """DescribeTransactions at the id's coordinator (the other brokers: NOT_COORDINATOR)."""
    answers = [
        call(cluster.kafka_addresses[b], 65, 0, {"transactional_ids": [transactional_id]})
        for b in cluster.broker_ids
    ]
    states = [s for a in answers for s in a.transaction_states]
    return [s for s in states if s.error_code != ErrorCode.NOT_COORDINATOR]


def offset_fetch(
    cluster: LocalCluster, group: str, topic: str, *, stable: bool
) -> tuple[ErrorCode, int]:
    """OffsetFetch v8 of partition 0 at the group's coordinator: its error and offset."""
    body = {
        "groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
        "require_stable": stable,
    }
    for b in cluster.broker_ids:
        (answer,) = call(cluster.kafka_addresses[b], 9, 8, body).groups
        if int(answer.error_code) != ErrorCode.NOT_COORDINATOR:
            (partition,) = answer.topics[0].partitions
            return ErrorCode(int(partition.error_code)), int(partition.committed_offset)
    raise AssertionError(f"no coordinator answered for {group}")


def send(p: confluent_kafka.Producer, topic: str, values: list[str]) -> None:
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % PARTITIONS)
    p.flush(30)


def test_read_committed_sees_exactly_the_committed_transactions(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "txn")
    p = producer(cluster, f"txn-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    send(p, topic, [f"c1-{i}" for i in range(6)])
    p.commit_transaction(30)
    p.begin_transaction()
    send(p, topic, [f"a-{i}" for i in range(4)])
    p.abort_transaction(30)
    p.begin_transaction()
    send(p, topic, ["c2-0", "c2-1"])
    p.commit_transaction(30)

    committed = sorted([f"c1-{i}".encode() for i in range(6)] + [b"c2-0", b"c2-1"])
    assert read_all(cluster, topic, "read_committed", len(committed)) == committed
    everything = sorted(committed + [f"a-{i}".encode() for i in range(4)])
    assert read_all(cluster, topic, "read_uncommitted", len(everything)) == everything
    assert kraft_read(cluster, topic, "read_committed", len(committed)) == committed
    assert kraft_read(cluster, topic, "read_uncommitted", len(everything)) == everything


def kraft_read(cluster: LocalCluster, topic: str, isolation: str, want: int) -> list[bytes]:
    """What kraft's own consumer reads (over gRPC) at ``isolation``."""
    got: list[bytes] = []
    with Consumer(
        cluster.bootstrap, auto_offset_reset="earliest", isolation_level=isolation
    ) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 20
        while len(got) < want and time.monotonic() < deadline:
            got.extend(r.value or b"" for r in consumer.poll(timeout=0.5))
        got.extend(r.value or b"" for r in consumer.poll(timeout=0.5))  # nothing more comes
    return sorted(got)


def test_an_open_transaction_holds_read_committed_consumers_at_its_first_offset(
    cluster: LocalCluster,
) -> None:
    topic = new_topic(cluster, "txn-open")
    p = producer(cluster, f"open-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    send(p, topic, ["open-0", "open-1"])
    ends = {}
    for isolation in ("read_uncommitted", "read_committed"):
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap,
                "group.id": "lso",
                "isolation.level": isolation,
                "log_level": 3,
            }
        )
        try:  # ListOffsets' latest: the high watermark, or the last stable offset
            ends[isolation] = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, 0), timeout=10, cached=False
            )
        finally:
            consumer.close()
    assert ends == {"read_uncommitted": (0, 1), "read_committed": (0, 0)}
    request = {"topics": [{"name": topic, "partition_indexes": [0]}]}
    described = [  # DescribeProducers at the leader (the others: NOT_LEADER_OR_FOLLOWER)
        state
        for b in cluster.broker_ids
        for t in call(cluster.kafka_addresses[b], 61, 0, request).topics
        for part in t.partitions
        if part.error_code == ErrorCode.NONE
        for state in part.active_producers
    ]
    assert [s.current_txn_start_offset for s in described] == [0]
    assert read_all(cluster, topic, "read_committed", 0) == []
    p.commit_transaction(30)
    assert read_all(cluster, topic, "read_committed", 2) == [b"open-0", b"open-1"]
    del p


def test_a_second_producer_with_the_same_id_fences_the_first(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "txn-fence")
    transactional_id = f"fence-{uuid.uuid4().hex[:8]}"
    old = producer(cluster, transactional_id)
    old.begin_transaction()
    send(old, topic, ["zombie-0", "zombie-1"])
    [described] = describe(cluster, transactional_id)
    assert (described.transaction_state, [t.topic for t in described.topics]) == (
        "Ongoing",
        [topic],
    )
    listed = [
        t
        for b in cluster.broker_ids
        for t in call(
            cluster.kafka_addresses[b], 66, 1, {"state_filters": ["Ongoing"]}
        ).transaction_states
    ]
    assert transactional_id in [t.transactional_id for t in listed]
    new = producer(cluster, transactional_id)  # aborts the old one's open transaction
    with pytest.raises(confluent_kafka.KafkaException) as fenced:
        old.commit_transaction(30)
    assert fenced.value.args[0].fatal() or fenced.value.args[0].code() in (
        confluent_kafka.KafkaError._FENCED,
        confluent_kafka.KafkaError.PRODUCER_FENCED,
        confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH,
    )
    new.begin_transaction()
    send(new, topic, ["live-0", "live-1"])
    new.commit_transaction(30)
    assert read_all(cluster, topic, "read_committed", 2) == [b"live-0", b"live-1"]
    [described] = describe(cluster, transactional_id)
    assert described.transaction_state == "CompleteCommit"
    assert describe(cluster, "no-such-id")[0].error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    del fenced, old, new  # the traceback holds the old producer: let librdkafka stop now


def test_consume_transform_produce_commits_offsets_with_the_output(cluster: LocalCluster) -> None:
    """send_offsets_to_transaction (AddOffsetsToTxn, TxnOffsetCommit with the group's
    generation, KIP-447): the group's offsets move with a committed transaction, not with an
    aborted one."""
    source, sink = new_topic(cluster, "ctp-in"), new_topic(cluster, "ctp-out")
    group = f"ctp-{uuid.uuid4().hex[:8]}"
    plain = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap})
    for i in range(4):
        plain.produce(source, value=f"in-{i}".encode(), partition=0)
    plain.flush(30)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )
    p = producer(cluster, f"ctp-{uuid.uuid4().hex[:8]}")
    try:
        consumer.subscribe([source])
        records = []
        deadline = time.monotonic() + 30
        while len(records) < 4 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                records.append(m)
        assert len(records) == 4
        tp = confluent_kafka.TopicPartition(source, 0)

        def transform(first: int, last: int, commit: bool) -> None:
            p.begin_transaction()
            send(p, sink, [f"out-{r.value().decode()}" for r in records[first:last]])
            offsets = [confluent_kafka.TopicPartition(source, 0, records[last - 1].offset() + 1)]
            p.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            # KIP-447: while pending, a require_stable OffsetFetch (a read_committed consumer's)
            # is UNSTABLE_OFFSET_COMMIT; without it, the last committed offset
            before = 2 if first else -1
            assert offset_fetch(cluster, group, source, stable=True) == (
                ErrorCode.UNSTABLE_OFFSET_COMMIT,
                -1,
            )
            assert offset_fetch(cluster, group, source, stable=False) == (ErrorCode.NONE, before)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)

        transform(0, 2, commit=True)
        transform(2, 4, commit=False)

        def committed() -> int:
            [answer] = consumer.committed([tp], timeout=10)
            return int(answer.offset)

        deadline = time.monotonic() + 10
        while committed() != 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert committed() == 2
        assert offset_fetch(cluster, group, source, stable=True) == (ErrorCode.NONE, 2)
        with Consumer(
            cluster.bootstrap, group_id=group, isolation_level="read_committed"
        ) as reader:  # kraft's own consumer asks with require_stable
            assert reader.committed([TopicPartition(source, 0)]) == {TopicPartition(source, 0): 2}
        assert read_all(cluster, sink, "read_committed", 2) == [b"out-in-0", b"out-in-1"]
    finally:
        consumer.close()


def test_an_abandoned_transaction_is_aborted_after_its_timeout(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "txn-timeout")
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "transactional.id": f"timeout-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": 2_000,
            "log_level": 3,
        }
    )
    p.init_transactions(30)
    p.begin_transaction()
    send(p, topic, ["abandoned-0", "abandoned-1"])
    # The coordinator aborts it (and fences this producer): the partitions become stable.
    after = [b"after"]
    plain = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap})
    plain.produce(topic, value=b"after", partition=0)
    plain.flush(30)
    assert read_all(cluster, topic, "read_committed", 1) == after
    with pytest.raises(confluent_kafka.KafkaException):
        p.commit_transaction(30)
