"""MetadataImage: the fold of the metadata records, its read API and its snapshots."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.metadata import (
    NO_LEADER,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    BrokerState,
    ConfigRecord,
    ConfigResourceType,
    LeaderRecoveryState,
    MetadataImage,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from kraft.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kraft.types import TopicPartition
from storage.config import LogConfig
from storage.errors import InvalidRecordError, InvariantViolation, UnsupportedVersionError
from tests.metadata.builders import ImageBuilder, topic_id_for


def test_builder_image_has_unfenced_brokers_with_epoch_equal_to_registration_offset() -> None:
    image = ImageBuilder().with_brokers(1, 2, 3).build()
    assert image.active_broker_ids() == [1, 2, 3]
    assert [image.brokers[b].broker_epoch for b in (1, 2, 3)] == [0, 2, 4]
    assert image.brokers[1].address == "127.0.0.1:9001"


def test_apply_returns_a_new_image_and_leaves_the_old_one_untouched() -> None:
    before = ImageBuilder().with_brokers(1, 2).with_topic("t", partitions=1, rf=2).build()
    after = before.apply(
        PartitionChangeRecord(topic_id=topic_id_for("t"), partition=0, isr=(1,)),
        offset=before.last_offset + 1,
        epoch=3,
    )
    assert before.partition(topic_id_for("t"), 0).isr == (1, 2)  # type: ignore[union-attr]
    assert after.partition(topic_id_for("t"), 0).isr == (1,)  # type: ignore[union-attr]
    assert (after.last_offset, after.last_epoch) == (before.last_offset + 1, 3)
    assert after.brokers is before.brokers  # untouched state is shared, not copied


def test_leader_change_bumps_leader_epoch_and_every_change_bumps_partition_epoch() -> None:
    image = ImageBuilder().with_brokers(1, 2).with_topic("t", rf=2).build()
    tid = topic_id_for("t")
    image = image.apply(PartitionChangeRecord(topic_id=tid, partition=0, isr=(1,)), 100)
    p = image.partition(tid, 0)
    assert p is not None and (p.leader_epoch, p.partition_epoch) == (0, 1)
    image = image.apply(PartitionChangeRecord(topic_id=tid, partition=0, leader=NO_LEADER), 101)
    p = image.partition(tid, 0)
    assert p is not None and (p.leader, p.leader_epoch, p.partition_epoch) == (NO_LEADER, 1, 2)


def test_broker_registration_change_moves_broker_through_states() -> None:
    image = ImageBuilder().with_brokers(1, fenced=[1]).build()
    assert image.brokers[1].state is BrokerState.FENCED
    epoch = image.brokers[1].broker_epoch
    image = image.apply(
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=False), 10
    )
    assert image.brokers[1].state is BrokerState.UNFENCED
    image = image.apply(
        BrokerRegistrationChangeRecord(
            broker_id=1, broker_epoch=epoch, in_controlled_shutdown=True
        ),
        11,
    )
    assert image.brokers[1].state is BrokerState.CONTROLLED_SHUTDOWN
    assert not image.is_active_broker(1)


def test_replay_of_a_record_for_a_stale_broker_epoch_is_an_invariant_violation() -> None:
    image = ImageBuilder().with_brokers(1).build()
    with pytest.raises(InvariantViolation, match="epoch"):
        image.apply(UnregisterBrokerRecord(broker_id=1, broker_epoch=999), 10)


@pytest.mark.parametrize(
    "change",
    [
        PartitionChangeRecord(topic_id="t-id", partition=0, isr=(1, 9)),  # ISR outside replicas
        PartitionChangeRecord(
            topic_id="t-id", partition=0, leader=3, isr=(1, 2)
        ),  # leader not in ISR
        PartitionChangeRecord(topic_id="t-id", partition=7, isr=(1,)),  # unknown partition
        PartitionChangeRecord(topic_id="nope", partition=0, isr=(1,)),  # unknown topic
        PartitionChangeRecord(
            topic_id="t-id", partition=0, leader_recovery_state=LeaderRecoveryState.RECOVERING
        ),  # RECOVERING with a 3-member ISR
    ],
)
def test_replay_rejects_partition_changes_that_break_invariants(
    change: PartitionChangeRecord,
) -> None:
    image = ImageBuilder().with_brokers(1, 2, 3).with_topic("t", rf=3).build()
    with pytest.raises(InvariantViolation):
        image.apply(change, 100)


def test_remove_topic_drops_its_partitions_name_and_configs() -> None:
    image = (
        ImageBuilder()
        .with_brokers(1)
        .with_topic("t", partitions=2, configs={"retention.ms": "1000"})
        .build()
    )
    assert image.topic_config("t", "retention.ms") == "1000"
    image = image.apply(RemoveTopicRecord(topic_id=topic_id_for("t")), 100)
    assert image.topic("t") is None and image.topic_by_id(topic_id_for("t")) is None
    assert image.dynamic_configs(ConfigResourceType.TOPIC, "t") == {}


def test_topic_configs_fall_back_to_cluster_default_then_kafka_default() -> None:
    image = (
        ImageBuilder()
        .with_brokers(1)
        .with_topic("t", configs={"min.insync.replicas": "2"})
        .with_cluster_config("log.retention.ms", "5000")
        .build()
    )
    configs = image.topic_configs("t")
    assert configs["min.insync.replicas"] == "2"  # topic override
    assert configs["retention.ms"] == "5000"  # cluster default via the broker synonym
    assert configs["unclean.leader.election.enable"] == "false"  # Kafka default
    assert configs["replication.mode"] == "isr"
    assert configs["segment.bytes"] == str(LogConfig().segment_bytes)  # the log's default


def test_config_delete_removes_the_override() -> None:
    image = ImageBuilder().with_brokers(1).with_topic("t", configs={"retention.ms": "1"}).build()
    image = image.apply(
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="t",
            name="retention.ms",
            value=None,
        ),
        100,
    )
    assert image.topic_config("t", "retention.ms") == "604800000"
    assert image.configs == {}


def test_describe_topic_lists_leader_epoch_replicas_isr_and_offline_replicas() -> None:
    image = (
        ImageBuilder()
        .with_brokers(1, 2, 3, fenced=[3])
        .with_topic("t", partitions=2, assignments=[(1, 2, 3), (2, 3, 1)])
        .with_partition("t", 0, isr=[1, 2])
        .with_partition("t", 1, isr=[2, 1])
        .build()
    )
    description = image.describe_topic("t")
    assert description is not None and description.topic_id == topic_id_for("t")
    p0, p1 = description.partitions
    assert (p0.partition, p0.leader, p0.leader_epoch, p0.replicas, p0.isr) == (
        0,
        1,
        0,
        (1, 2, 3),
        (1, 2),
    )
    assert p1.offline_replicas == (3,)
    assert image.describe_topic("missing") is None
    assert image.partitions_led_by(2) == [TopicPartition("t", 1)]


def test_offline_partitions_are_those_without_leader() -> None:
    image = ImageBuilder().with_brokers(1, 2).with_topic("t", partitions=2, rf=1).build()
    image = image.apply(
        PartitionChangeRecord(topic_id=topic_id_for("t"), partition=1, leader=NO_LEADER), 100
    )
    assert image.offline_partitions() == [TopicPartition("t", 1)]


def test_producer_ids_only_move_forward() -> None:
    image = MetadataImage.empty().apply(
        ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=1000), 0
    )
    assert image.next_producer_id == 1000
    with pytest.raises(InvariantViolation):
        image.apply(ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=1000), 1)


def test_noop_record_changes_only_the_offset() -> None:
    image = ImageBuilder().with_brokers(1).build()
    after = image.apply(NoOpRecord(), 50, epoch=4)
    assert after.brokers == image.brokers and (after.last_offset, after.last_epoch) == (50, 4)


def test_snapshot_round_trips_a_populated_image() -> None:
    image = (
        ImageBuilder()
        .with_brokers(1, 2, 3, racks={1: "a", 2: "b"}, fenced=[3])
        .with_brokers(4, shutting_down=[4])
        .with_topic("orders", partitions=3, rf=2, configs={"cleanup.policy": "compact"})
        .with_topic("logs", partitions=1, rf=1)
        .with_partition("orders", 1, isr=[3], leader=NO_LEADER, leader_epoch=4, partition_epoch=9)
        .with_cluster_config("min.insync.replicas", "2")
        .build()
        .apply(ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=3000), 500, 7)
        .apply(AccessControlEntryRecord.of("acl-1", READ_ORDERS), 501, 7)
    )
    again = MetadataImage.from_snapshot(image.to_snapshot())
    assert again == image
    assert again.to_snapshot() == image.to_snapshot()


def test_empty_image_snapshot_round_trips() -> None:
    assert MetadataImage.from_snapshot(MetadataImage.empty().to_snapshot()) == MetadataImage.empty()


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"garbage", InvalidRecordError),
        (b'{"format":1}', InvalidRecordError),
        (b'{"format":2,"records":[]}', UnsupportedVersionError),
        (b'{"format":1,"records":[],"last_offset":"x","last_epoch":1}', InvalidRecordError),
        (
            b'{"format":1,"records":[{"k":99,"v":0}],"last_offset":1,"last_epoch":1}',
            InvalidRecordError,
        ),
    ],
)
def test_from_snapshot_rejects_bad_input_with_typed_errors(
    data: bytes, error: type[Exception]
) -> None:
    with pytest.raises(error):
        MetadataImage.from_snapshot(data)


@st.composite
def evolved_images(draw: st.DrawFn) -> MetadataImage:
    """A builder image, then random legal ISR shrinks, leader moves, configs and removals."""
    brokers = draw(st.integers(1, 5))
    builder = ImageBuilder().with_brokers(*range(1, brokers + 1))
    for t in range(draw(st.integers(0, 3))):
        builder.with_topic(
            f"t{t}", partitions=draw(st.integers(1, 4)), rf=draw(st.integers(1, brokers))
        )
    image = builder.build()
    offset = image.last_offset
    for _ in range(draw(st.integers(0, 15))):
        offset += 1
        choice = draw(st.integers(0, 3))
        partitions = list(image.iter_partitions())
        if choice == 0 and partitions:
            topic, index, p = draw(st.sampled_from(partitions))
            isr = tuple(draw(st.lists(st.sampled_from(p.replicas), min_size=1, unique=True)))
            leader = draw(st.sampled_from((NO_LEADER, *isr)))
            record: object = PartitionChangeRecord(
                topic_id=topic.topic_id, partition=index, isr=isr, leader=leader
            )
        elif choice == 1:
            record = ConfigRecord(
                resource_type=draw(st.sampled_from(ConfigResourceType)),
                resource_name=draw(st.sampled_from(["", "1", "t0"])),
                name=draw(st.sampled_from(["retention.ms", "min.insync.replicas"])),
                value=draw(st.none() | st.sampled_from(["1", "2"])),
            )
        elif choice == 2 and image.topics_by_id:
            record = RemoveTopicRecord(topic_id=draw(st.sampled_from(sorted(image.topics_by_id))))
        else:
            name = f"n{offset}"
            record = TopicRecord(name=name, topic_id=f"{name}-id")
            image = image.apply(record, offset)
            offset += 1
            record = PartitionRecord(
                topic_id=f"{name}-id", partition=0, replicas=(1,), isr=(1,), leader=1
            )
        image = image.apply(record, offset, epoch=draw(st.integers(1, 3)))  # type: ignore[arg-type]
    return image


@settings(max_examples=150, deadline=None)
@given(image=evolved_images())
def test_snapshot_round_trip_holds_for_any_reachable_image(image: MetadataImage) -> None:
    assert MetadataImage.from_snapshot(image.to_snapshot()) == image


@settings(max_examples=50, deadline=None)
@given(image=evolved_images())
def test_replaying_to_records_rebuilds_the_same_state(image: MetadataImage) -> None:
    rebuilt = MetadataImage.empty().apply_batch(image.to_records(), 0, image.last_epoch)
    assert rebuilt.brokers == image.brokers
    assert rebuilt.topics_by_id == image.topics_by_id
    assert rebuilt.configs == image.configs


READ_ORDERS = AclBinding(
    resource_type=ResourceType.TOPIC,
    resource_name="orders",
    pattern_type=PatternType.LITERAL,
    principal="User:alice",
    host="*",
    operation=AclOperation.READ,
    permission_type=AclPermissionType.ALLOW,
)


def test_acls_are_created_and_removed_by_id_and_a_bad_id_is_an_invariant_violation() -> None:
    image = MetadataImage.empty().apply(AccessControlEntryRecord.of("a", READ_ORDERS), 0)
    assert dict(image.acls) == {"a": READ_ORDERS}
    with pytest.raises(InvariantViolation, match="created twice"):
        image.apply(AccessControlEntryRecord.of("a", READ_ORDERS), 1)
    assert image.apply(RemoveAccessControlEntryRecord(acl_id="a"), 1).acls == {}
    with pytest.raises(InvariantViolation, match="unknown ACL"):
        image.apply(RemoveAccessControlEntryRecord(acl_id="b"), 1)
