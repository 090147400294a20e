"""The group APIs on the shared cluster's Kafka listeners answer each group on its own, as
Kafka's KafkaApis: FindCoordinator (batched keys, v4+), ConsumerGroupDescribe and DeleteGroups
give one group its error (INVALID_GROUP_ID, NOT_COORDINATOR, GROUP_ID_NOT_FOUND) and serve the
others; and a group known only by its committed offsets (a consumer that assign()s and
commits) is what Kafka 4.x makes of it, an Empty classic group of protocol type "".

(The same per-group answers under the authorizer: tests/broker/test_broker_api.py.)"""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin

from kraft.cluster import LocalCluster
from storage.errors import ErrorCode
from tests.kafka_wire.wire import call

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

FIND_COORDINATOR, CONSUMER_GROUP_DESCRIBE, DELETE_GROUPS = 10, 69, 42


def _codes(items: Any, key: str) -> list[tuple[str, ErrorCode]]:
    return [(getattr(i, key), ErrorCode(int(i.error_code))) for i in items]


def _coordinator(cluster: LocalCluster, group: str) -> int:
    """The node id of ``group``'s coordinator (FindCoordinator v4, retried while the offsets
    topic is being created)."""
    address = cluster.kafka_addresses[cluster.broker_ids[0]]
    for _ in range(300):
        (found,) = call(
            address, FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}
        ).coordinators
        if int(found.error_code) == ErrorCode.NONE:
            return int(found.node_id)
        assert int(found.error_code) == ErrorCode.COORDINATOR_NOT_AVAILABLE, found
        time.sleep(0.1)  # NB: polling a condition, bounded by the loop
    raise AssertionError(f"no coordinator for {group}")


def _commit_outside_membership(cluster: LocalCluster, group: str, topic: str) -> None:
    """A kafka-python consumer that assign()s and commits (generation -1: no membership)."""
    cluster.create_topic(topic, 1, 1)
    tp = kafka.TopicPartition(topic, 0)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.kafka_bootstrap, group_id=group, enable_auto_commit=False
    )
    try:
        consumer.assign([tp])
        consumer.commit({tp: kafka.structs.OffsetAndMetadata(7, "", -1)})
    finally:
        consumer.close()


def test_a_group_known_only_by_its_commits_is_an_empty_classic_group(
    cluster: LocalCluster,
) -> None:
    """Kafka 4.x: an OffsetCommit at generation -1 creates a "simple" classic group, which
    DescribeGroups answers Empty with protocol type "", ListGroups lists as classic, and
    ConsumerGroupDescribe does not find (not a consumer group)."""
    group = "items-assign-commit"
    _commit_outside_membership(cluster, group, "items-assign-commit-topic")
    admin = kafka.KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        described = admin.describe_groups([group])[group]
        assert (described["group_state"], described["protocol_type"], described["members"]) == (
            "Empty",
            "",
            [],
        )
        (listed,) = [g for g in admin.list_groups() if g["group_id"] == group]
        assert (listed["group_state"], listed["group_type"], listed["protocol_type"]) == (
            "Empty",
            "classic",
            "",
        )
    finally:
        admin.close()
    # librdkafka's admin asks ConsumerGroupDescribe, then DescribeGroups for a classic group.
    confluent = ConfluentAdmin({"bootstrap.servers": cluster.kafka_bootstrap})
    description = confluent.describe_consumer_groups([group])[group].result(timeout=30)
    assert description.state == confluent_kafka.ConsumerGroupState.EMPTY
    assert description.members == []
    coordinator = cluster.kafka_addresses[_coordinator(cluster, group)]
    (answer,) = call(coordinator, CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group]}).groups
    assert int(answer.error_code) == ErrorCode.GROUP_ID_NOT_FOUND


def test_find_coordinator_describe_and_delete_answer_each_group(cluster: LocalCluster) -> None:
    simple = "items-simple"
    _commit_outside_membership(cluster, simple, "items-simple-topic")
    coordinator = _coordinator(cluster, simple)
    # A group of another coordinator (NOT_COORDINATOR there) and one of the same (not found).
    others = [f"items-other-{i}" for i in range(200)]
    elsewhere = next(g for g in others if _coordinator(cluster, g) != coordinator)
    unknown = next(g for g in others if _coordinator(cluster, g) == coordinator)
    address = cluster.kafka_addresses[coordinator]

    found = call(
        address, FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["", simple, "x" * 256]}
    ).coordinators
    assert _codes(found, "key") == [
        ("", ErrorCode.NONE),  # Kafka finds a coordinator for the empty group id too
        (simple, ErrorCode.NONE),
        ("x" * 256, ErrorCode.INVALID_GROUP_ID),  # kraft's bound on a group id
    ]

    described = call(
        address, CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [unknown, elsewhere, ""]}
    ).groups
    assert _codes(described, "group_id") == [
        (unknown, ErrorCode.GROUP_ID_NOT_FOUND),
        (elsewhere, ErrorCode.NOT_COORDINATOR),
        ("", ErrorCode.INVALID_GROUP_ID),
    ]
    assert [(int(g.group_epoch), g.group_state) for g in described] == [(0, "")] * 3  # Kafka's

    deleted = call(address, DELETE_GROUPS, 2, {"groups_names": [simple, elsewhere, simple]})
    assert _codes(deleted.results, "group_id") == [
        (simple, ErrorCode.NONE),  # once: Kafka answers each group once
        (elsewhere, ErrorCode.NOT_COORDINATOR),
    ]


def test_a_consumer_group_whose_member_subscribes_to_nothing_is_still_a_consumer_group(
    cluster: LocalCluster,
) -> None:
    """Kafka 4.4 writes no group record for a first member subscribed to nothing (its epoch
    stays at the unwritten 1): such a group has a member, so it is a consumer group, not a
    simple classic one (found merging the KIP-848 epochs with the simple groups)."""
    group = "items-no-subscription"
    address = cluster.kafka_addresses[_coordinator(cluster, group)]
    heartbeat = {
        "group_id": group,
        "member_id": "items-member-0000000001",
        "member_epoch": 0,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": [],
        "topic_partitions": [],
    }
    joined = call(address, 68, 0, heartbeat)
    assert (int(joined.error_code), int(joined.member_epoch)) == (ErrorCode.NONE, 1)
    (described,) = call(address, CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group]}).groups
    assert int(described.error_code) == ErrorCode.NONE
    assert [m.member_id for m in described.members] == ["items-member-0000000001"]
    leave = {**heartbeat, "member_epoch": -1}
    assert int(call(address, 68, 0, leave).error_code) == ErrorCode.NONE
