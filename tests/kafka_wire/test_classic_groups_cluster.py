"""Classic consumer groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup; the default protocol
of every client) through kraft's Kafka listeners, with the clients' own assignors.

For kafka-python, aiokafka and confluent-kafka (librdkafka): three members (processes) share a
topic; once the first records are consumed and committed one member is killed with SIGKILL, and
the survivors take its partitions over after its session timeout, from its committed offsets
(no record lost, no committed record read again, duplicates only of records after the kill).
Then commit and seek; and a classic member meeting a KIP-848 group gets Kafka's answer.

The cluster is the package's one (`conftest.cluster`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin

from kraft.cluster import LocalCluster
from replication.clients import AdminClient, Producer
from storage.errors import ErrorCode
from tests.kafka_wire.wire import call

pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 6
BATCH = 60
SESSION_TIMEOUT_S = 6.0


def new_topic(cluster: LocalCluster, name: str, partitions: int = PARTITIONS) -> str:
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(name, partitions=partitions, replication_factor=3)
        admin.wait_for_leaders(name, timeout=30)
    return name


def produce(
    cluster: LocalCluster, topic: str, prefix: str, partitions: int = PARTITIONS
) -> set[str]:
    values = [f"{prefix}-{i}" for i in range(BATCH)]
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i, value in enumerate(values):
            producer.send(topic, value=value.encode(), partition=i % partitions)
        producer.flush(timeout=30)
    return set(values)


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.1)


class Member:
    """A `group_member` process and the events it printed, each with when it was read."""

    def __init__(
        self, cluster: LocalCluster, client: str, topic: str, group: str, assignor: str, log: Path
    ) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self._stderr = log.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.kafka_wire.group_member",
                client,
                cluster.kafka_bootstrap,
                topic,
                group,
                assignor,
            ],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=ROOT,
            env=env,
        )
        self._lock = threading.Lock()
        self.events: list[tuple[float, dict[str, Any]]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            with self._lock:
                self.events.append((time.monotonic(), event))

    def records(self) -> list[tuple[float, dict[str, Any]]]:
        with self._lock:
            return [(t, e) for t, e in self.events if "value" in e]

    @property
    def assigned(self) -> set[int]:
        with self._lock:
            latest = [e["assigned"] for _, e in self.events if "assigned" in e]
        return set(latest[-1]) if latest else set()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._stderr.close()


@pytest.fixture
def members(tmp_path: Path) -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.stop()


def balanced(members: list[Member]) -> bool:
    """Every partition owned by exactly one member, every member owning some."""
    owned = [m.assigned for m in members]
    return (
        all(owned)
        and sum(len(o) for o in owned) == PARTITIONS
        and set().union(*owned) == set(range(PARTITIONS))
    )


def describe(cluster: LocalCluster, group: str) -> Any:
    """librdkafka's describe of a classic group (DescribeGroups, after ConsumerGroupDescribe
    answers that it is no consumer group)."""
    admin = ConfluentAdmin({"bootstrap.servers": cluster.kafka_bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=30)


def committed(cluster: LocalCluster, group: str) -> int:
    """The sum of ``group``'s committed offsets (OffsetFetch of a classic group)."""
    admin = kafka.KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return sum(o.offset for o in offsets.values() if o.offset >= 0)


@pytest.mark.parametrize(
    ("client", "assignor"),
    [
        ("kafka-python", ""),  # its default: range, then roundrobin
        ("aiokafka", "roundrobin"),
        ("confluent-kafka", "cooperative-sticky"),
        ("kafka-python", "cooperative-sticky"),
    ],
)
def test_a_killed_member_s_partitions_go_to_the_survivors_from_its_committed_offsets(
    cluster: LocalCluster, members: list[Member], tmp_path: Path, client: str, assignor: str
) -> None:
    topic = new_topic(cluster, f"classic-kill-{client}-{assignor or 'default'}")
    group = topic
    for i in range(3):
        members.append(Member(cluster, client, topic, group, assignor, tmp_path / f"m{i}.log"))
    wait_for(lambda: balanced(members), 90, "three members sharing the partitions")
    described = describe(cluster, group)
    assert described.state == confluent_kafka.ConsumerGroupState.STABLE
    assert described.partition_assignor == (assignor or "range")
    assert len(described.members) == 3

    first = produce(cluster, topic, "a")
    seen = lambda: {e["value"] for m in members for _, e in m.records()}  # noqa: E731
    wait_for(lambda: first <= seen(), 60, "the first records consumed")
    wait_for(lambda: committed(cluster, group) == BATCH, 30, "the first records committed")

    victim, survivors = members[0], members[1:]
    taken = victim.assigned
    killed_at = time.monotonic()
    victim.kill()
    second = produce(cluster, topic, "b")
    wait_for(lambda: balanced(survivors), 60, "the survivors owning every partition")
    wait_for(lambda: first | second <= seen(), 60, "every record consumed")
    took_over = time.monotonic() - killed_at
    print(f"{client} {assignor or 'default'}: every record read {took_over:.1f}s after the kill")
    assert took_over >= SESSION_TIMEOUT_S - 1, "the victim left only by its session timeout"

    prints = [(t, e) for m in members for t, e in m.records()]
    before = [e["value"] for t, e in prints if t < killed_at]
    assert len(before) == len(set(before)), "a record read twice before the kill"
    again = [e for t, e in prints if t >= killed_at and e["value"] in first]
    assert again == [], f"committed records read again after the kill: {again[:5]}"
    assert {e["partition"] for _, e in victim.records()} <= taken
    wait_for(lambda: committed(cluster, group) == 2 * BATCH, 30, "every record committed")


def test_commit_and_seek_in_a_classic_group(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "classic-seek", partitions=1)
    produce(cluster, topic, "s", partitions=1)
    tp = kafka.TopicPartition(topic, 0)

    def consumer() -> kafka.KafkaConsumer:
        c = kafka.KafkaConsumer(
            bootstrap_servers=cluster.kafka_bootstrap,
            group_id="classic-seek",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
        )
        c.subscribe([topic])
        return c

    def offsets(c: kafka.KafkaConsumer, want: int) -> list[int]:
        got: list[int] = []
        deadline = time.monotonic() + 60
        while len(got) < want and time.monotonic() < deadline:
            got.extend(r.offset for rs in c.poll(500).values() for r in rs)
        return got

    first = consumer()
    try:
        assert offsets(first, BATCH) == list(range(BATCH))
        first.commit({tp: kafka.OffsetAndMetadata(40, "", -1)})
        assert first.committed(tp) == 40
        first.seek(tp, 10)
        assert offsets(first, BATCH - 10) == list(range(10, BATCH))
    finally:
        first.close()  # LeaveGroup
    second = consumer()
    try:
        assert offsets(second, BATCH - 40) == list(range(40, BATCH))
    finally:
        second.close()

    # confluent-kafka in the same group resumes from the same committed offset
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": "classic-seek",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    try:
        c.subscribe([topic])
        got: list[int] = []
        deadline = time.monotonic() + 60
        while len(got) < BATCH - 40 and time.monotonic() < deadline:
            message = c.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.offset())
        assert got == list(range(40, BATCH))
    finally:
        c.close()  # LeaveGroup: the group is Empty

    # OffsetDelete, then DeleteGroups, of the empty classic group (kafka-python's admin)
    admin = kafka.KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        assert admin.list_group_offsets("classic-seek")["classic-seek"][tp].offset == 40
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed["classic-seek"]["group_state"] == "Empty"
        assert listed["classic-seek"]["group_type"] == "classic"
        assert admin.delete_group_offsets("classic-seek", [tp]) == {tp: kafka.errors.NoError}
        assert tp not in admin.list_group_offsets("classic-seek")["classic-seek"]
        assert admin.delete_groups(["classic-seek"]) == {"classic-seek": "OK"}
        assert "classic-seek" not in {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()


# -- classic and KIP-848 members of one group ------------------------------------------------------


def coordinator_answers(
    cluster: LocalCluster, api_key: int, version: int, body: dict[str, Any]
) -> int:
    """The error of ``body`` at the group's coordinator (every other broker: NOT_COORDINATOR)."""
    codes = [
        int(call(cluster.kafka_addresses[b], api_key, version, body).error_code)
        for b in cluster.broker_ids
    ]
    answered = [c for c in codes if c != ErrorCode.NOT_COORDINATOR]
    assert len(answered) == 1, codes
    return answered[0]


def test_classic_and_kip_848_members_of_one_group_get_kafkas_answer(
    cluster: LocalCluster, members: list[Member], tmp_path: Path
) -> None:
    topic = new_topic(cluster, "classic-interop", partitions=2)
    # A classic group with a member: a KIP-848 heartbeat for it is GROUP_ID_NOT_FOUND.
    members.append(
        Member(cluster, "kafka-python", topic, "classic-interop", "", tmp_path / "classic.log")
    )
    wait_for(lambda: members[0].assigned == {0, 1}, 60, "the classic member's assignment")
    heartbeat = {
        "group_id": "classic-interop",
        "member_id": "kip848-member-id-00001",
        "member_epoch": 0,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": [topic],
        "topic_partitions": [],
    }
    assert coordinator_answers(cluster, 68, 0, heartbeat) == ErrorCode.GROUP_ID_NOT_FOUND
    admin = ConfluentAdmin({"bootstrap.servers": cluster.kafka_bootstrap})
    listed = admin.list_consumer_groups().result(timeout=30)
    assert "classic-interop" in {g.group_id for g in listed.valid}
    kafka_admin = kafka.KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:  # its member subscribes to the topic: its offsets stay (OffsetDelete)
        tp = kafka.TopicPartition(topic, 0)
        refused = kafka_admin.delete_group_offsets("classic-interop", [tp])
        assert refused == {tp: kafka.errors.GroupSubscribedToTopicError}
    finally:
        kafka_admin.close()

    # A KIP-848 group with a member: a classic JoinGroup for it is INCONSISTENT_GROUP_PROTOCOL.
    kip848 = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": "kip848-interop",
            "group.protocol": "consumer",
        }
    )
    try:
        kip848.subscribe([topic])
        deadline = time.monotonic() + 60
        while not kip848.assignment() and time.monotonic() < deadline:
            kip848.poll(0.2)
        assert kip848.assignment()
        join = {
            "group_id": "kip848-interop",
            "session_timeout": 10000,
            "rebalance_timeout": 10000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00"}],
        }
        assert coordinator_answers(cluster, 11, 9, join) == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    finally:
        kip848.close()
