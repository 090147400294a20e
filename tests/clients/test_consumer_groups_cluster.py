"""Consumer groups (KIP-848) on real broker processes: members share a topic's partitions, hand
them over on a graceful leave and after a stalled poll loop, resume at committed offsets, and
the group state survives the coordinator's broker dying (the new leader of the offsets partition
replays it, from a coordinator snapshot)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kraft.cluster import LocalCluster
from kraft.types import OFFSETS_TOPIC, TopicPartition
from replication.clients import AdminClient, Consumer, Producer
from replication.group import partition_for_group
from storage.errors import FencedMemberEpochError, InvalidRequestError, InvalidTopicError
from tests.broker.clusters import running_cluster

pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]

PARTITIONS = 4
BROKER_CONFIG = {
    "group.consumer.session.timeout.ms": "6000",
    "group.coordinator.snapshot.interval.records": "40",
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with running_cluster(broker_config=BROKER_CONFIG) as c:
        yield c


def _wait(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def _poll_until(
    consumers: list[Consumer], condition: Callable[[], bool], what: str, timeout: float = 30.0
) -> list[tuple[int, int]]:
    """Poll every consumer (callbacks run in poll) until ``condition``; what they returned."""
    seen: list[tuple[int, int]] = []

    def step() -> bool:
        for c in consumers:
            seen.extend((r.partition, r.offset) for r in c.poll(0.05))
        return condition()

    _wait(step, what, timeout)
    return seen


def _topic(cluster: LocalCluster, name: str, records: int) -> None:
    cluster.create_topic(name, partitions=PARTITIONS, replication_factor=2)
    with Producer(cluster.bootstrap) as producer:
        for i in range(records):
            producer.send(name, key=b"k%d" % i, value=b"%d" % i)
        producer.flush()


def _consumer(cluster: LocalCluster, group: str, name: str, **options: Any) -> Consumer:
    return Consumer(
        cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        client_id=name,
        **options,
    )


def test_members_split_the_partitions_and_a_graceful_leave_hands_them_over_at_the_commit(
    cluster: LocalCluster,
) -> None:
    _topic(cluster, "split", 200)
    a, b = _consumer(cluster, "g-split", "a"), _consumer(cluster, "g-split", "b")
    revoked: list[set[TopicPartition]] = []
    a.subscribe(["split"], on_revoke=lambda _c, ps: revoked.append(ps))
    seen = _poll_until([a], lambda: len(a.assignment()) == PARTITIONS, "a owns every partition")
    b.subscribe(["split"])

    def split() -> bool:
        owned_a, owned_b = a.assignment(), b.assignment()
        assert not owned_a & owned_b, "a partition owned by two members at once"
        return len(owned_a) == len(owned_b) == PARTITIONS // 2

    seen += _poll_until([a, b], split, "the two members own two partitions each")
    assert revoked and len(revoked[0]) == PARTITIONS // 2  # a gave up half, in poll
    seen += _poll_until([a, b], lambda: len(set(seen)) == 200, "every record is consumed")
    a.close()  # commits its positions, then leaves
    _poll_until([b], lambda: len(b.assignment()) == PARTITIONS, "b owns every partition")
    b.commit()
    with AdminClient(cluster.bootstrap) as admin:
        committed = admin.list_group_offsets("g-split")
        ends = {
            tp: listed.offset  # type: ignore[union-attr]
            for tp, listed in admin.list_offsets(
                {TopicPartition("split", p): -1 for p in range(PARTITIONS)}
            ).items()
        }
        assert committed == ends
        described = admin.describe_group("g-split")
        assert described.state == "Stable" and [m.client_id for m in described.members] == ["b"]
    b.close()


def test_a_member_that_stops_polling_loses_its_partitions_and_its_commit_is_refused(
    cluster: LocalCluster,
) -> None:
    _topic(cluster, "stall", 20)
    lost: list[set[TopicPartition]] = []
    slow = _consumer(cluster, "g-stall", "slow", max_poll_interval_ms=1500)
    slow.subscribe(["stall"], on_lost=lambda _c, ps: lost.append(ps))
    _poll_until([slow], lambda: len(slow.assignment()) == PARTITIONS, "slow owns all")
    other = _consumer(cluster, "g-stall", "other")
    other.subscribe(["stall"])
    # No poll from `slow` from here on: its heartbeat thread leaves the group for it.
    _poll_until(
        [other],
        lambda: len(other.assignment()) == PARTITIONS,
        "the other member takes every partition of the stalled one",
    )
    with pytest.raises(FencedMemberEpochError, match=r"max\.poll\.interval\.ms"):
        slow.commit()
    slow.poll(0.1)  # rejoins: on_lost first, with what it owned
    assert lost and lost[0] == {TopicPartition("stall", p) for p in range(PARTITIONS)}
    slow.close()
    other.close()


def test_the_brokers_create_the_offsets_topic_and_users_may_neither_produce_to_nor_create_it(
    cluster: LocalCluster,
) -> None:
    _topic(cluster, "refuse", 1)
    with _consumer(cluster, "g-refuse", "r") as c:
        c.subscribe(["refuse"])
        _poll_until([c], lambda: bool(c.assignment()), "the offsets topic exists")
    with Producer(cluster.bootstrap, delivery_timeout_ms=5000) as producer:
        future = producer.send(OFFSETS_TOPIC, value=b"forged", partition=0)
        with pytest.raises(InvalidTopicError):
            future.result(timeout=30)
    with AdminClient(cluster.bootstrap) as admin, pytest.raises(InvalidRequestError) as refused:
        admin.create_topic(OFFSETS_TOPIC, 3, 1)  # a raw CreateTopics, as any user can send
    assert "internal topic __consumer_offsets is prohibited" in str(refused.value)


def test_committed_offsets_survive_the_coordinator_broker_and_snapshots_bound_the_log(
    cluster: LocalCluster,
) -> None:
    _topic(cluster, "failover", 40)
    with AdminClient(cluster.bootstrap) as admin, _consumer(cluster, "g-fail", "f") as c:
        c.subscribe(["failover"])
        _poll_until([c], lambda: len(c.assignment()) == PARTITIONS, "c owns every partition")
        offsets: dict[TopicPartition, int] = {}
        for i in range(60):  # 60 commits > group.coordinator.snapshot.interval.records=40
            c.poll(0.05)
            offsets = {TopicPartition("failover", p): i for p in range(PARTITIONS)}
            c.commit(offsets)
        count = len(admin.describe_topic(OFFSETS_TOPIC).partitions)
        tp = TopicPartition(OFFSETS_TOPIC, partition_for_group("g-fail", count))
        start = admin.list_offsets({tp: -2})[tp]
        assert start.offset > 0, "no snapshot moved the log start offset"  # type: ignore[union-attr]
        coordinator = admin.describe_group("g-fail").coordinator
        cluster.kill_broker(coordinator)
        try:
            _wait(
                lambda: admin.describe_group("g-fail").coordinator != coordinator,
                "a new coordinator",
                timeout=60,
            )
            assert c.committed(offsets) == offsets  # replayed from the snapshot and after
            c.commit({tp2: 100 + o for tp2, o in offsets.items()})  # the member carries on
        finally:
            cluster.start_broker(coordinator)
            cluster.wait_until_healthy(timeout=60)


def _kraft(cluster: LocalCluster, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", *argv, "--bootstrap", cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_kraft_groups_describes_resets_only_an_empty_group_and_deletes_it(
    cluster: LocalCluster,
) -> None:
    _topic(cluster, "cli", 40)
    consumed = _kraft(
        cluster, "consume", "cli", "--group", "g-cli", "--from-beginning", "--max-messages", "40"
    )
    assert consumed.returncode == 0, consumed.stderr
    assert "g-cli" in _kraft(cluster, "groups", "list").stdout.split()
    assert OFFSETS_TOPIC not in _kraft(cluster, "topics", "list").stdout.split()
    assert OFFSETS_TOPIC in _kraft(cluster, "topics", "list", "--internal").stdout.split()

    described = _kraft(cluster, "groups", "describe", "g-cli")
    header, *rows = [line.split() for line in described.stdout.splitlines() if line.strip()][1:]
    assert header == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert len(rows) == PARTITIONS and all(r[5] == "0" for r in rows), described.stdout

    with _consumer(cluster, "g-cli", "live") as live:
        live.subscribe(["cli"])
        _poll_until([live], lambda: len(live.assignment()) == PARTITIONS, "live owns all")
        state = json.loads(
            _kraft(cluster, "groups", "describe", "g-cli", "--state", "--json").stdout
        )
        assert state["state"] == "Stable" and state["members"] == 1
        refused = _kraft(
            cluster,
            "groups",
            "reset-offsets",
            "g-cli",
            "--all-topics",
            "--to-earliest",
            "--execute",
        )
        assert refused.returncode == 1 and "NON_EMPTY_GROUP" in refused.stderr
    dry = _kraft(
        cluster, "groups", "reset-offsets", "g-cli", "--topic", "cli:0", "--to-earliest", "--json"
    )
    assert json.loads(dry.stdout)["executed"] is False
    with AdminClient(cluster.bootstrap) as admin:
        before = admin.list_group_offsets("g-cli")
        done = _kraft(
            cluster,
            "groups",
            "reset-offsets",
            "g-cli",
            "--all-topics",
            "--to-earliest",
            "--execute",
        )
        assert done.returncode == 0, done.stderr
        assert admin.list_group_offsets("g-cli") == dict.fromkeys(before, 0)
    assert _kraft(cluster, "groups", "delete", "g-cli").returncode == 0
    gone = _kraft(cluster, "groups", "describe", "g-cli")
    assert gone.returncode == 1 and "GROUP_ID_NOT_FOUND" in gone.stderr
