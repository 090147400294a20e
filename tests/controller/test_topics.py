"""CreateTopics, DeleteTopics, CreatePartitions and IncrementalAlterConfigs."""

from __future__ import annotations

import random

import pytest

from kraft.controller import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
    validate_topic_name,
)
from kraft.controller.config_control import handle_incremental_alter_configs
from kraft.controller.topic_control import handle_create_topics
from kraft.metadata import ConfigRecord, ConfigResourceType, PartitionRecord, TopicRecord
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness
from tests.metadata.builders import ImageBuilder


def harness(*brokers: int, racks: dict[int, str] | None = None) -> ControllerHarness:
    h = ControllerHarness()
    h.start_brokers(*brokers, racks=racks)
    return h


def create(
    h: ControllerHarness, *topics: CreatableTopic, validate_only: bool = False
) -> list[ErrorCode]:
    response = h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(topics=topics, validate_only=validate_only),
    )
    return [t.error_code for t in response.topics]


def test_create_topic_writes_topic_configs_then_partitions_in_one_batch() -> None:
    h = harness(1, 2, 3)
    result = h.propose(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="orders",
                    num_partitions=3,
                    replication_factor=2,
                    configs={"retention.ms": "1000"},
                ),
            )
        ),
    )
    kinds = [type(r) for r in result.records]
    assert kinds == [TopicRecord, ConfigRecord, PartitionRecord, PartitionRecord, PartitionRecord]
    h.commit()
    description = h.image.describe_topic("orders")
    assert description is not None and description.topic_id == result.response.topics[0].topic_id
    for p in description.partitions:
        assert len(p.replicas) == 2 and p.isr == p.replicas and p.leader == p.replicas[0]
        assert p.leader_epoch == 0
    assert h.image.topic_config("orders", "retention.ms") == "1000"


def test_topic_ids_come_from_the_injected_rng() -> None:
    image = ImageBuilder().with_brokers(1).build()
    request = CreateTopicsRequest(topics=(CreatableTopic(name="a"),))
    first = handle_create_topics(image, request, rng=random.Random(42)).response.topics[0].topic_id
    again = handle_create_topics(image, request, rng=random.Random(42)).response.topics[0].topic_id
    assert first == again and len(first) == 36


def test_create_topic_uses_controller_defaults_for_minus_one() -> None:
    h = harness(1, 2)
    response = h.run(
        h.core.handle_create_topics_request, CreateTopicsRequest(topics=(CreatableTopic(name="t"),))
    )
    assert (response.topics[0].num_partitions, response.topics[0].replication_factor) == (1, 1)


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "slash/y", "ünicode"])
def test_create_topic_rejects_illegal_names(name: str) -> None:
    assert validate_topic_name(name) is not None
    assert create(harness(1), CreatableTopic(name=name)) == [ErrorCode.INVALID_TOPIC_EXCEPTION]


def test_legal_topic_names_include_dots_dashes_underscores_up_to_249_chars() -> None:
    assert validate_topic_name("a.b-c_D9") is None
    assert validate_topic_name("x" * 249) is None


def test_create_existing_topic_is_topic_already_exists() -> None:
    h = harness(1)
    assert create(h, CreatableTopic(name="t")) == [ErrorCode.NONE]
    assert create(h, CreatableTopic(name="t")) == [ErrorCode.TOPIC_ALREADY_EXISTS]


def test_topic_names_colliding_on_dot_and_underscore_are_rejected() -> None:
    h = harness(1)
    assert create(h, CreatableTopic(name="a.b"), CreatableTopic(name="a_b")) == [
        ErrorCode.NONE,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
    ]


def test_the_same_name_twice_in_one_request_is_invalid_request_for_both() -> None:
    h = harness(1)
    assert (
        create(h, CreatableTopic(name="t"), CreatableTopic(name="t"))
        == [ErrorCode.INVALID_REQUEST] * 2
    )


@pytest.mark.parametrize(
    "configs",
    [
        {"min.insync.replicas": "0"},
        {"no.such.config": "1"},
        {"unclean.leader.election.enable": "maybe"},
    ],
)
def test_create_topic_with_invalid_config_is_invalid_config(configs: dict[str, str]) -> None:
    assert create(harness(1), CreatableTopic(name="t", configs=configs)) == [
        ErrorCode.INVALID_CONFIG
    ]


def test_replication_factor_above_unfenced_brokers_is_invalid_replication_factor() -> None:
    h = harness(1, 2)
    h.register(3)  # registered but still fenced: not usable
    assert create(h, CreatableTopic(name="t", replication_factor=3)) == [
        ErrorCode.INVALID_REPLICATION_FACTOR
    ]


@pytest.mark.parametrize("count", [0, -2])
def test_bad_partition_count_is_invalid_partitions(count: int) -> None:
    assert create(harness(1), CreatableTopic(name="t", num_partitions=count)) == [
        ErrorCode.INVALID_PARTITIONS
    ]


def test_manual_assignment_puts_only_live_replicas_in_the_isr() -> None:
    h = harness(1, 2)
    h.register(3)
    assert create(h, CreatableTopic(name="t", assignments=((3, 1, 2), (2, 3)))) == [ErrorCode.NONE]
    description = h.image.describe_topic("t")
    assert description is not None
    p0, p1 = description.partitions
    assert (p0.isr, p0.leader, p1.isr, p1.leader) == ((1, 2), 1, (2,), 2)


@pytest.mark.parametrize("assignments", [((1, 1),), ((1, 9),), ((),)])
def test_bad_manual_assignment_is_invalid_replica_assignment(
    assignments: tuple[tuple[int, ...], ...],
) -> None:
    assert create(harness(1, 2), CreatableTopic(name="t", assignments=assignments)) == [
        ErrorCode.INVALID_REPLICA_ASSIGNMENT
    ]


def test_manual_assignment_with_partition_count_is_invalid_request() -> None:
    assert create(harness(1), CreatableTopic(name="t", num_partitions=1, assignments=((1,),))) == [
        ErrorCode.INVALID_REQUEST
    ]


def test_validate_only_writes_nothing() -> None:
    h = harness(1)
    assert create(h, CreatableTopic(name="t"), validate_only=True) == [ErrorCode.NONE]
    assert h.image.topic("t") is None and h.core.inflight_count == 0


def test_create_topics_places_rack_aware_when_brokers_have_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    h = harness(1, 2, 3, 4, racks=racks)
    assert create(h, CreatableTopic(name="t", num_partitions=8, replication_factor=2)) == [
        ErrorCode.NONE
    ]
    description = h.image.describe_topic("t")
    assert description is not None
    assert all({racks[b] for b in p.replicas} == {"a", "b"} for p in description.partitions)


def test_delete_topics_by_name_and_id() -> None:
    h = harness(1)
    create(h, CreatableTopic(name="a"), CreatableTopic(name="b"))
    b_id = h.image.topic("b").topic_id  # type: ignore[union-attr]
    response = h.run(
        h.core.handle_delete_topics_request,
        DeleteTopicsRequest(topic_names=("a", "missing"), topic_ids=(b_id, "no-such-id")),
    )
    assert [t.error_code for t in response.topics] == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_ID,
    ]
    assert h.image.topics_by_id == {}


def test_create_partitions_adds_partitions_with_the_topics_replication_factor() -> None:
    h = harness(1, 2, 3)
    create(h, CreatableTopic(name="t", num_partitions=2, replication_factor=2))
    response = h.run(
        h.core.handle_create_partitions_request,
        CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="t", count=5),)),
    )
    assert response.results[0].error_code is ErrorCode.NONE
    description = h.image.describe_topic("t")
    assert description is not None and [p.partition for p in description.partitions] == [
        0,
        1,
        2,
        3,
        4,
    ]
    assert all(len(p.replicas) == 2 for p in description.partitions)


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        (CreatePartitionsTopic(name="missing", count=3), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (CreatePartitionsTopic(name="t", count=1), ErrorCode.INVALID_PARTITIONS),
        (CreatePartitionsTopic(name="t", count=2), ErrorCode.INVALID_PARTITIONS),
        (
            CreatePartitionsTopic(name="t", count=3, assignments=()),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            CreatePartitionsTopic(name="t", count=3, assignments=((1,),)),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            CreatePartitionsTopic(name="t", count=3, assignments=((1, 9),)),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
    ],
)
def test_create_partitions_rejections(topic: CreatePartitionsTopic, expected: ErrorCode) -> None:
    h = harness(1, 2)
    create(h, CreatableTopic(name="t", num_partitions=2, replication_factor=2))
    response = h.run(
        h.core.handle_create_partitions_request, CreatePartitionsRequest(topics=(topic,))
    )
    assert response.results[0].error_code is expected


def alter(*resources: AlterConfigsResource) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(resources=resources)


def topic_resource(*configs: AlterableConfig, name: str = "t") -> AlterConfigsResource:
    return AlterConfigsResource(
        resource_type=ConfigResourceType.TOPIC, resource_name=name, configs=configs
    )


def test_incremental_alter_configs_set_delete_append_subtract() -> None:
    h = harness(1)
    create(h, CreatableTopic(name="t"))
    response = h.run(
        h.core.handle_incremental_alter_configs_request,
        alter(
            topic_resource(
                AlterableConfig(name="retention.ms", value="100"),
                AlterableConfig(name="cleanup.policy", op=AlterConfigOp.APPEND, value="delete"),
            )
        ),
    )
    assert response.responses[0].error_code is ErrorCode.NONE
    assert h.image.topic_config("t", "retention.ms") == "100"
    assert h.image.topic_config("t", "cleanup.policy") == "delete"  # APPEND adds no duplicate
    response = h.run(
        h.core.handle_incremental_alter_configs_request,
        alter(
            topic_resource(
                AlterableConfig(name="retention.ms", op=AlterConfigOp.DELETE),
                AlterableConfig(name="cleanup.policy", op=AlterConfigOp.SUBTRACT, value="delete"),
            )
        ),
    )
    # SUBTRACT of the only policy leaves an empty list, which no policy allows: the resource
    # is refused whole (the DELETE beside it does not happen either).
    assert response.responses[0].error_code is ErrorCode.INVALID_CONFIG
    assert h.image.topic_config("t", "retention.ms") == "100"
    h.run(
        h.core.handle_incremental_alter_configs_request,
        alter(topic_resource(AlterableConfig(name="retention.ms", op=AlterConfigOp.DELETE))),
    )
    assert h.image.topic_config("t", "retention.ms") == "604800000"


def test_appending_compact_to_cleanup_policy_makes_it_compact_and_delete() -> None:
    h = harness(1)
    create(h, CreatableTopic(name="t"))
    response = h.run(
        h.core.handle_incremental_alter_configs_request,
        alter(
            topic_resource(
                AlterableConfig(name="cleanup.policy", op=AlterConfigOp.APPEND, value="compact")
            )
        ),
    )
    result = response.responses[0]
    assert result.error_code is ErrorCode.NONE
    assert h.image.topic_config("t", "cleanup.policy") == "delete,compact"


def test_cluster_default_broker_config_changes_topic_effective_value() -> None:
    h = harness(1)
    create(h, CreatableTopic(name="t"))
    h.run(
        h.core.handle_incremental_alter_configs_request,
        alter(
            AlterConfigsResource(
                resource_type=ConfigResourceType.BROKER,
                resource_name="",
                configs=(AlterableConfig(name="min.insync.replicas", value="2"),),
            )
        ),
    )
    assert h.image.topic_config("t", "min.insync.replicas") == "2"


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (
            topic_resource(AlterableConfig(name="retention.ms", value="1"), name="nope"),
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        (topic_resource(AlterableConfig(name="bogus", value="1")), "INVALID_CONFIG"),
        (topic_resource(AlterableConfig(name="retention.ms", value="soon")), "INVALID_CONFIG"),
        (topic_resource(AlterableConfig(name="retention.ms")), "INVALID_CONFIG"),
        (
            topic_resource(
                AlterableConfig(name="retention.ms", op=AlterConfigOp.APPEND, value="1")
            ),
            "INVALID_CONFIG",
        ),
        (
            topic_resource(
                AlterableConfig(name="retention.ms", value="1"),
                AlterableConfig(name="retention.ms", value="2"),
            ),
            "INVALID_REQUEST",
        ),
        (
            AlterConfigsResource(
                resource_type=ConfigResourceType.BROKER, resource_name="x", configs=()
            ),
            "INVALID_REQUEST",
        ),
    ],
)
def test_incremental_alter_configs_rejections(
    resource: AlterConfigsResource, expected: str
) -> None:
    image = ImageBuilder().with_brokers(1).with_topic("t").build()
    result = handle_incremental_alter_configs(image, alter(resource))
    assert result.response.responses[0].error_code is ErrorCode[expected]
    assert result.records == ()


def test_a_failing_config_change_rejects_its_whole_resource_but_not_others() -> None:
    image = ImageBuilder().with_brokers(1).with_topic("t").with_topic("u").build()
    result = handle_incremental_alter_configs(
        image,
        alter(
            topic_resource(
                AlterableConfig(name="retention.ms", value="1"),
                AlterableConfig(name="bogus", value="1"),
            ),
            topic_resource(AlterableConfig(name="retention.ms", value="5"), name="u"),
        ),
    )
    assert [r.error_code for r in result.response.responses] == [
        ErrorCode.INVALID_CONFIG,
        ErrorCode.NONE,
    ]
    assert result.records == (
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="u",
            name="retention.ms",
            value="5",
        ),
    )


def test_the_metadata_log_name_is_refused_as_a_topic() -> None:
    """Kafka's ControllerApis refuses ``__cluster_metadata``; a broker's metadata log lives in
    a directory of that name beside its partition directories."""
    assert create(harness(1), CreatableTopic(name="__cluster_metadata")) == [
        ErrorCode.INVALID_REQUEST
    ]


def _internal(
    h: ControllerHarness, broker_id: int | None = None, broker_epoch: int | None = None
) -> list[ErrorCode]:
    response = h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(
            topics=(CreatableTopic(name="__consumer_offsets", num_partitions=3),),
            broker_id=broker_id,
            broker_epoch=broker_epoch,
        ),
    )
    return [t.error_code for t in response.topics]


def test_a_users_create_topics_for_the_offsets_topic_is_refused() -> None:
    """The brokers create ``__consumer_offsets`` on first use with the partition count and
    configs the group coordinator relies on; a user's CreateTopics for it (or a claim to be a
    broker that does not match a live broker's current epoch) is INVALID_REQUEST."""
    h = harness(1, 2)
    epoch = h.image.brokers[1].broker_epoch
    assert _internal(h) == [ErrorCode.INVALID_REQUEST]
    assert _internal(h, broker_id=1, broker_epoch=epoch + 1) == [ErrorCode.INVALID_REQUEST]
    assert _internal(h, broker_id=9, broker_epoch=epoch) == [ErrorCode.INVALID_REQUEST]
    assert h.image.topic("__consumer_offsets") is None


def test_a_live_broker_creates_the_offsets_topic_as_itself() -> None:
    h = harness(1, 2)
    epoch = h.image.brokers[1].broker_epoch
    assert _internal(h, broker_id=1, broker_epoch=epoch) == [ErrorCode.NONE]
