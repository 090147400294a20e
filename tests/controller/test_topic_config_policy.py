"""Topic configs the controller refuses rather than store: values kraft does not implement yet,
and a ``min.insync.replicas`` its topic's replication factor can never meet (issue #14)."""

from __future__ import annotations

import pytest

from kraft.controller import (
    AlterableConfig,
    AlterConfigsResource,
    CreatableTopic,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
)
from kraft.controller.config_control import handle_incremental_alter_configs
from kraft.metadata import ConfigResourceType
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness
from tests.metadata.builders import ImageBuilder


def _create(topic: CreatableTopic, brokers: int = 3) -> tuple[ErrorCode, str]:
    h = ControllerHarness()
    h.start_brokers(*range(1, brokers + 1))
    response = h.run(h.core.handle_create_topics_request, CreateTopicsRequest(topics=(topic,)))
    result = response.topics[0]
    assert (result.error_code is ErrorCode.NONE) == (h.image.topic("t") is not None)
    return result.error_code, result.error_message


def _alter_topic(rf: int, key: str, value: str) -> tuple[ErrorCode, str]:
    image = ImageBuilder().with_brokers(1, 2, 3).with_topic("t", partitions=2, rf=rf).build()
    request = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=ConfigResourceType.TOPIC,
                resource_name="t",
                configs=(AlterableConfig(name=key, value=value),),
            ),
        )
    )
    result = handle_incremental_alter_configs(image, request)
    response = result.response.responses[0]
    assert (response.error_code is ErrorCode.NONE) == bool(result.records)
    return response.error_code, response.error_message


UNSUPPORTED = [
    ("message.timestamp.type", "LogAppendTime"),
]
SUPPORTED = [
    ("cleanup.policy", "delete"),
    ("cleanup.policy", "compact"),
    ("cleanup.policy", "compact,delete"),
    ("message.timestamp.type", "CreateTime"),
    ("compression.type", "producer"),
    ("compression.type", "lz4"),
    ("compression.type", "uncompressed"),
]


@pytest.mark.parametrize(("key", "value"), UNSUPPORTED)
def test_create_topic_refuses_a_config_value_kraft_would_ignore(key: str, value: str) -> None:
    code, message = _create(CreatableTopic(name="t", configs={key: value}))
    assert code is ErrorCode.INVALID_CONFIG
    assert key in message and "not supported yet" in message


@pytest.mark.parametrize(("key", "value"), UNSUPPORTED)
def test_alter_topic_config_refuses_a_value_kraft_would_ignore(key: str, value: str) -> None:
    code, message = _alter_topic(1, key, value)
    assert code is ErrorCode.INVALID_CONFIG
    assert key in message and "not supported yet" in message


@pytest.mark.parametrize(("key", "value"), SUPPORTED)
def test_the_values_that_work_are_still_accepted(key: str, value: str) -> None:
    assert _create(CreatableTopic(name="t", configs={key: value}))[0] is ErrorCode.NONE
    assert _alter_topic(1, key, value)[0] is ErrorCode.NONE


def test_create_topic_refuses_min_insync_replicas_above_the_replication_factor() -> None:
    code, message = _create(
        CreatableTopic(
            name="t", num_partitions=2, replication_factor=3, configs={"min.insync.replicas": "5"}
        )
    )
    assert code is ErrorCode.INVALID_CONFIG
    assert "min.insync.replicas=5" in message and "replication factor 3" in message


def test_create_topic_with_manual_assignments_checks_their_replica_count() -> None:
    code, _ = _create(
        CreatableTopic(name="t", assignments=((1, 2), (2, 3)), configs={"min.insync.replicas": "3"})
    )
    assert code is ErrorCode.INVALID_CONFIG


def test_min_insync_replicas_equal_to_the_replication_factor_is_accepted() -> None:
    topic = CreatableTopic(
        name="t", num_partitions=1, replication_factor=3, configs={"min.insync.replicas": "3"}
    )
    assert _create(topic)[0] is ErrorCode.NONE
    assert _alter_topic(3, "min.insync.replicas", "3")[0] is ErrorCode.NONE


def test_alter_topic_config_refuses_min_insync_replicas_above_the_replication_factor() -> None:
    code, message = _alter_topic(2, "min.insync.replicas", "3")
    assert code is ErrorCode.INVALID_CONFIG
    assert "replication factor 2" in message
