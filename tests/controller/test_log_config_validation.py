"""The controller validates topic log settings with the log's own rules (`storage.config`), at
create and at alter time, for topics and for the cluster-wide dynamic defaults: a value it
accepts is one every broker's log takes (none is skipped later with ``log_config_ignored``)."""

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
from storage.config import SEGMENT_BYTES_MIN, LogConfig, validate_log_property
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness
from tests.metadata.builders import ImageBuilder

# Values the controller used to accept but the log rejects (segment.bytes in [14, 60]), and
# values outside every range.
REJECTED_BY_THE_LOG = [
    ("segment.bytes", "14"),
    ("segment.bytes", str(SEGMENT_BYTES_MIN - 1)),
    ("retention.bytes", "-2"),
]


def _create(configs: dict[str, str]) -> tuple[ErrorCode, str]:
    h = ControllerHarness()
    h.start_brokers(1)
    response = h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(topics=(CreatableTopic(name="t", configs=configs),)),
    )
    result = response.topics[0]
    return result.error_code, result.error_message


def _alter(resource_type: ConfigResourceType, name: str, key: str, value: str) -> ErrorCode:
    image = ImageBuilder().with_brokers(1).with_topic("t").build()
    request = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=(AlterableConfig(name=key, value=value),),
            ),
        )
    )
    result = handle_incremental_alter_configs(image, request)
    code = result.response.responses[0].error_code
    assert (code is ErrorCode.NONE) == bool(result.records)
    return code


@pytest.mark.parametrize(("key", "value"), REJECTED_BY_THE_LOG)
def test_create_topic_rejects_a_log_setting_the_log_would_reject(key: str, value: str) -> None:
    assert validate_log_property(key, value) is not None
    code, message = _create({key: value})
    assert code is ErrorCode.INVALID_CONFIG
    assert key in message


@pytest.mark.parametrize(("key", "value"), REJECTED_BY_THE_LOG)
def test_alter_topic_config_rejects_a_log_setting_the_log_would_reject(
    key: str, value: str
) -> None:
    assert _alter(ConfigResourceType.TOPIC, "t", key, value) is ErrorCode.INVALID_CONFIG


def test_the_cluster_default_is_validated_by_the_log_under_its_broker_key() -> None:
    too_small = str(SEGMENT_BYTES_MIN - 1)
    assert _alter(ConfigResourceType.BROKER, "", "log.segment.bytes", too_small) is (
        ErrorCode.INVALID_CONFIG
    )
    assert _alter(ConfigResourceType.BROKER, "", "log.segment.bytes", str(SEGMENT_BYTES_MIN)) is (
        ErrorCode.NONE
    )


def test_the_smallest_segment_the_log_takes_is_accepted() -> None:
    assert _create({"segment.bytes": str(SEGMENT_BYTES_MIN)})[0] is ErrorCode.NONE
    assert _alter(ConfigResourceType.TOPIC, "t", "segment.bytes", str(SEGMENT_BYTES_MIN)) is (
        ErrorCode.NONE
    )
    assert LogConfig.from_properties({"segment.bytes": str(SEGMENT_BYTES_MIN)})
