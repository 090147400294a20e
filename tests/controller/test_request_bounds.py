"""Hostile admin requests (issue 10, finding 4): every request is bounded before any work,
nonsensical configs are refused, and error messages never echo unbounded input."""

from __future__ import annotations

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
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
)
from kraft.controller.limits import MAX_PARTITIONS_PER_BATCH, MAX_RECORDS_PER_USER_OP
from kraft.metadata import ConfigResourceType
from kraft.metadata.configs import CONFIG_VALUE_MAX_CHARS
from kraft.types import TopicPartition
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness

BIG = 1_000_000
"""Characters of a hostile name or value: far more than any message may quote."""


def harness() -> ControllerHarness:
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    return h


def create_topics(
    h: ControllerHarness, *topics: CreatableTopic, validate_only: bool = False
) -> list[tuple[ErrorCode, str]]:
    result = h.propose(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(topics=topics, validate_only=validate_only),
    )
    h.commit()
    if any(t.error_code is not ErrorCode.NONE for t in result.response.topics):
        assert not result.records or not validate_only
    return [(t.error_code, t.error_message) for t in result.response.topics]


def create_partitions(
    h: ControllerHarness, *topics: CreatePartitionsTopic, validate_only: bool = False
) -> list[tuple[ErrorCode, str]]:
    result = h.propose(
        h.core.handle_create_partitions_request,
        CreatePartitionsRequest(topics=topics, validate_only=validate_only),
    )
    h.commit()
    return [(t.error_code, t.error_message) for t in result.response.results]


def alter_topic(
    h: ControllerHarness, name: str, *configs: AlterableConfig
) -> tuple[ErrorCode, str]:
    response = h.run(
        h.core.handle_incremental_alter_configs_request,
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=ConfigResourceType.TOPIC, resource_name=name, configs=configs
                ),
            )
        ),
    )
    (result,) = response.responses
    return result.error_code, result.error_message


# -- partitions and records per operation -----------------------------------------------------


@pytest.mark.parametrize("count", [1 + MAX_PARTITIONS_PER_BATCH + 1, 2**31 - 1])
def test_create_partitions_adding_more_than_10000_is_policy_violation_before_placement(
    count: int,
) -> None:
    """``CreatePartitions(count=2**31-1, validate_only=True)`` once ran placement for two
    billion partitions on the controller's event loop; now it is refused before any."""
    h = harness()
    assert create_topics(h, CreatableTopic(name="t", num_partitions=1))[0][0] is ErrorCode.NONE
    before = h.core.next_offset
    for validate_only in (True, False):
        [(code, message)] = create_partitions(
            h, CreatePartitionsTopic(name="t", count=count), validate_only=validate_only
        )
        assert code is ErrorCode.POLICY_VIOLATION
        assert "excessively large number of partitions" in message
    assert h.core.next_offset == before  # nothing written
    assert len(h.image.topic("t").partitions) == 1  # type: ignore[union-attr]


def test_create_partitions_up_to_the_bound_is_accepted() -> None:
    h = harness()
    create_topics(h, CreatableTopic(name="t", num_partitions=1))
    [(code, _)] = create_partitions(
        h, CreatePartitionsTopic(name="t", count=1 + MAX_PARTITIONS_PER_BATCH), validate_only=True
    )
    assert code is ErrorCode.NONE


def test_create_partitions_bound_counts_every_topic_of_the_request() -> None:
    h = harness()
    create_topics(h, CreatableTopic(name="a", num_partitions=1))
    create_topics(h, CreatableTopic(name="b", num_partitions=1))
    half = 1 + MAX_PARTITIONS_PER_BATCH // 2 + 1  # each adds 5,001
    codes = create_partitions(
        h, CreatePartitionsTopic(name="a", count=half), CreatePartitionsTopic(name="b", count=half)
    )
    assert [c for c, _ in codes] == [ErrorCode.POLICY_VIOLATION] * 2


def test_create_topics_adding_more_than_10000_partitions_per_request_is_policy_violation() -> None:
    h = harness()
    half = MAX_PARTITIONS_PER_BATCH // 2 + 1
    results = create_topics(
        h,
        CreatableTopic(name="a", num_partitions=half),
        CreatableTopic(name="b", num_partitions=half),
    )
    assert [c for c, _ in results] == [ErrorCode.POLICY_VIOLATION] * 2
    assert h.image.topic("a") is None and h.image.topic("b") is None


def test_create_topics_with_a_huge_partition_count_is_refused_without_placement() -> None:
    h = harness()
    [(code, _)] = create_topics(
        h, CreatableTopic(name="t", num_partitions=2**31 - 1), validate_only=True
    )
    assert code is ErrorCode.POLICY_VIOLATION


def test_create_topics_writing_more_than_10000_records_is_policy_violation() -> None:
    """10,000 one-partition topics add 10,000 partitions but write 20,000 records."""
    h = harness()
    topics = [CreatableTopic(name=f"t{i}", num_partitions=1) for i in range(10_000)]
    results = create_topics(h, *topics)
    assert {c for c, _ in results} == {ErrorCode.POLICY_VIOLATION}
    assert "metadata records" in results[0][1]


def test_manual_assignment_longer_than_the_registered_brokers_is_invalid() -> None:
    h = harness()
    [(code, message)] = create_topics(
        h, CreatableTopic(name="t", assignments=(tuple(range(1, 100_000)),))
    )
    assert code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert len(message) < 200


def test_delete_topics_of_more_than_10000_entries_is_policy_violation() -> None:
    h = harness()
    create_topics(h, CreatableTopic(name="keep", num_partitions=1))
    names = ("keep", *(f"x{i}" for i in range(MAX_RECORDS_PER_USER_OP)))
    response = h.run(h.core.handle_delete_topics_request, DeleteTopicsRequest(topic_names=names))
    assert {t.error_code for t in response.topics} == {ErrorCode.POLICY_VIOLATION}
    assert h.image.topic("keep") is not None


def test_alter_configs_of_more_than_10000_keys_is_policy_violation() -> None:
    h = harness()
    create_topics(h, CreatableTopic(name="t", num_partitions=1))
    configs = tuple(
        AlterableConfig(name="retention.ms", value=str(i))
        for i in range(MAX_RECORDS_PER_USER_OP + 1)
    )
    code, _ = alter_topic(h, "t", *configs)
    assert code is ErrorCode.POLICY_VIOLATION


def test_elect_leaders_naming_more_than_10000_partitions_is_policy_violation() -> None:
    h = harness()
    request = ElectLeadersRequest(
        partitions=tuple(TopicPartition("t", i) for i in range(MAX_RECORDS_PER_USER_OP + 1))
    )
    response = h.run(h.core.handle_elect_leaders_request, request)
    assert response.error_code is ErrorCode.POLICY_VIOLATION
    assert response.replica_election_results == ()


# -- config values ------------------------------------------------------------------------------


def test_a_config_value_longer_than_the_bound_is_invalid_config_and_not_echoed() -> None:
    """A 50 MB config value once blocked the loop for 1.3 s and came back in the error."""
    h = harness()
    value = "1" * BIG
    [(code, message)] = create_topics(
        h, CreatableTopic(name="t", num_partitions=1, configs={"retention.ms": value})
    )
    assert code is ErrorCode.INVALID_CONFIG
    assert len(message) < 200
    create_topics(h, CreatableTopic(name="t", num_partitions=1))
    for op in (AlterConfigOp.SET, AlterConfigOp.APPEND):
        code, message = alter_topic(
            h, "t", AlterableConfig(name="cleanup.policy", op=op, value=value)
        )
        assert code is ErrorCode.INVALID_CONFIG and len(message) < 200


def test_a_config_value_at_the_bound_is_validated_as_usual() -> None:
    h = harness()
    create_topics(h, CreatableTopic(name="t", num_partitions=1))
    code, message = alter_topic(
        h, "t", AlterableConfig(name="compression.type", value="x" * CONFIG_VALUE_MAX_CHARS)
    )
    assert code is ErrorCode.INVALID_CONFIG and "must be one of" in message
    assert len(message) < 300


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max.message.bytes", "0"),
        ("max.message.bytes", "-1"),
        ("max.message.bytes", "60"),
        ("retention.ms", "-2"),
        ("retention.bytes", "-5"),
        ("segment.bytes", "13"),
        ("min.insync.replicas", "0"),
        ("flush.messages", "0"),
        ("segment.ms", "0"),
    ],
)
def test_nonsensical_topic_configs_are_invalid_config(key: str, value: str) -> None:
    h = harness()
    [(code, _)] = create_topics(h, CreatableTopic(name="t", num_partitions=1, configs={key: value}))
    assert code is ErrorCode.INVALID_CONFIG
    create_topics(h, CreatableTopic(name="t", num_partitions=1))
    assert (
        alter_topic(h, "t", AlterableConfig(name=key, value=value))[0] is ErrorCode.INVALID_CONFIG
    )


def test_max_message_bytes_of_one_batch_header_is_accepted() -> None:
    h = harness()
    [(code, _)] = create_topics(
        h, CreatableTopic(name="t", num_partitions=1, configs={"max.message.bytes": "61"})
    )
    assert code is ErrorCode.NONE


# -- names in error messages ----------------------------------------------------------------------


def test_error_messages_quote_at_most_about_100_characters_of_a_name() -> None:
    h = harness()
    huge = "n" * BIG
    messages = [
        create_topics(h, CreatableTopic(name="bad!" + huge, num_partitions=1))[0][1],
        create_topics(h, CreatableTopic(name="t", num_partitions=1, configs={huge: "1"}))[0][1],
        create_partitions(h, CreatePartitionsTopic(name=huge, count=2))[0][1],
        h.run(
            h.core.handle_delete_topics_request,
            DeleteTopicsRequest(topic_names=(huge,), topic_ids=(huge,)),
        )
        .topics[1]
        .error_message,
        alter_topic(h, huge, AlterableConfig(name="retention.ms", value="1"))[1],
        h.run(
            h.core.handle_elect_leaders_request,
            ElectLeadersRequest(partitions=(TopicPartition(huge, 0),)),
        )
        .replica_election_results[0]
        .partition_results[0]
        .error_message,
    ]
    assert all(0 < len(m) < 300 for m in messages), [len(m) for m in messages]
