"""The coordinator forwards a real client's bytes untouched: kafka-python's consumer protocol
subscriptions go to the leader, kafka-python's own assignors (range, roundrobin,
cooperative-sticky) run on them, and every member decodes its share of the leader's
assignment. (The wire codec is the Kafka listener's; this checks the opaque pass-through.)"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from replication.group.classic import MemberIdentity, OffsetExpiry, Protocol, subscribed_topics
from tests.group.classic.harness import Harness

TOPICS = {"orders": 5, "payments": 3}


class Cluster:
    """The two calls kafka-python's assignors make on its ClusterMetadata."""

    def topics(self) -> set[str]:
        return set(TOPICS)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(range(TOPICS[topic])) if topic in TOPICS else None


def subscription(assignor: Any, topics: set[str]) -> bytes:
    meta = assignor().metadata(topics) if assignor is CooperativeStickyAssignor else None
    if meta is None:
        meta = assignor.metadata(topics)
    data = meta.encode()
    assert isinstance(data, bytes)
    return data


@pytest.mark.parametrize(
    ("assignors", "chosen"),
    [
        ((RangePartitionAssignor, RoundRobinPartitionAssignor), "range"),  # kafka-python's
        ((RoundRobinPartitionAssignor, RangePartitionAssignor), "roundrobin"),
        ((CooperativeStickyAssignor, RangePartitionAssignor), "cooperative-sticky"),
    ],
)
def test_kafka_python_assignors_run_on_what_the_coordinator_forwards(
    assignors: tuple[Any, ...], chosen: str
) -> None:
    h = Harness()
    topics = set(TOPICS)
    protos = [Protocol(name=a.name, metadata=subscription(a, topics)) for a in assignors]
    joined = [h.new_member(client_id=f"consumer-{i}", protos=protos) for i in range(3)]
    h.tick_until_answered([handle for _, handle in joined])
    answers = [h.join_answer(handle) for _, handle in joined]
    leader = next(a for a in answers if a.members)
    assert leader.protocol_name == chosen and {a.protocol_name for a in answers} == {chosen}

    # the leader, as kafka-python's _perform_assignment does
    members = [
        SimpleNamespace(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            metadata=ConsumerProtocolSubscription.decode(m.metadata),
        )
        for m in leader.members
    ]
    assignor = next(a for a in assignors if a.name == chosen)
    instance = assignor() if assignor is CooperativeStickyAssignor else assignor
    plan = instance.assign(Cluster(), members)
    gen = leader.generation_id
    syncs = {
        a.member_id: h.sync(
            a.member_id,
            gen,
            {mid: x.encode() for mid, x in plan.items()} if a is leader else None,
        )
        for a in sorted(answers, key=lambda a: a is leader)
    }
    owned: list[tuple[str, int]] = []
    for handle in syncs.values():
        decoded = ConsumerProtocolAssignment.decode(h.sync_answer(handle).assignment)
        owned.extend((t, p) for t, ps in decoded.assigned_partitions for p in ps)
    everything = [(t, p) for t, n in TOPICS.items() for p in range(n)]
    assert sorted(owned) == sorted(everything)  # each partition exactly once


def test_offsets_expire_only_for_topics_no_stable_member_subscribes_to() -> None:
    h = Harness()
    protos = [Protocol(name="range", metadata=subscription(RangePartitionAssignor, {"orders"}))]
    h.stable_group(1)  # its subscription is no consumer protocol one
    assert h.mgr.offset_expiry("g") == OffsetExpiry(expires=False)
    mid, handle = h.new_member(group="real", protos=protos, client_id="x")
    assert h.mgr.offset_expiry("real") == OffsetExpiry(expires=False)  # rebalancing
    h.tick_until_answered([handle])
    h.sync(mid, h.join_answer(handle).generation_id, {mid: b""}, group="real")
    assert h.mgr.offset_expiry("real") == OffsetExpiry(
        expires=True, subscribed_topics=frozenset({"orders"})
    )
    h.leave(MemberIdentity(member_id=mid), group="real")
    assert h.mgr.offset_expiry("real") == OffsetExpiry(expires=True, since_ms=h.now)
    assert h.mgr.offset_expiry("unknown") is None


@pytest.mark.parametrize("assignor", [RangePartitionAssignor, CooperativeStickyAssignor])
def test_subscribed_topics_reads_every_consumer_protocol_version(assignor: Any) -> None:
    assert subscribed_topics(subscription(assignor, {"a", "b\u00e9"})) == {"a", "b\u00e9"}
    assert subscribed_topics(b"\x00\x00\x00\x00\x00\x09\x00") is None
    assert subscribed_topics(b"") is None
