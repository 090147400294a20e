"""DescribeConfigs from the committed image: effective values and their sources, as
kafka-configs.sh --describe --all shows them."""

from __future__ import annotations

from kraft.controller.config_describe import describe_configs
from kraft.controller.messages import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigSource,
    CreatableTopic,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kraft.metadata.records import ConfigResourceType
from kraft.transport.controller_codec import decode, encode
from storage.config_registry import TOPIC_KEYS
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness


def _set(h: ControllerHarness, rtype: ConfigResourceType, name: str, **configs: str) -> None:
    h.run(
        h.core.handle_incremental_alter_configs_request,
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=rtype,
                    resource_name=name,
                    configs=tuple(
                        AlterableConfig(name=k.replace("_", "."), op=AlterConfigOp.SET, value=v)
                        for k, v in configs.items()
                    ),
                ),
            )
        ),
    )


def _describe(h: ControllerHarness, rtype: ConfigResourceType, name: str) -> dict[str, object]:
    request = DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type=rtype, resource_name=name),),
        include_synonyms=True,
    )
    (result,) = describe_configs(h.image, request).results
    assert result.error_code is ErrorCode.NONE, result
    return {e.name: e for e in result.configs}


def test_each_topic_key_shows_the_value_of_its_most_specific_layer() -> None:
    h = ControllerHarness()
    h.start_brokers(1)
    h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(topics=(CreatableTopic(name="t"),)),
    )
    _set(h, ConfigResourceType.TOPIC, "t", retention_ms="1000")
    _set(h, ConfigResourceType.BROKER, "", log_retention_ms="5000", log_segment_bytes="2000000")
    entries = _describe(h, ConfigResourceType.TOPIC, "t")
    assert set(entries) == set(TOPIC_KEYS)
    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", TOPIC_KEYS["retention.ms"].default, ConfigSource.DEFAULT_CONFIG),
    ]
    segment = entries["segment.bytes"]
    assert (segment.value, segment.source) == (
        "2000000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    mir = entries["min.insync.replicas"]
    assert (mir.value, mir.source) == ("1", ConfigSource.DEFAULT_CONFIG)


def test_a_broker_shows_its_own_value_over_the_cluster_default() -> None:
    h = ControllerHarness()
    _set(h, ConfigResourceType.BROKER, "", log_retention_ms="5000")
    _set(h, ConfigResourceType.BROKER, "101", log_retention_ms="7000")
    own = _describe(h, ConfigResourceType.BROKER, "101")["log.retention.ms"]
    assert (own.value, own.source) == ("7000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    other = _describe(h, ConfigResourceType.BROKER, "102")["log.retention.ms"]
    assert (other.value, other.source) == ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)


def test_an_unknown_topic_or_a_bad_broker_name_is_an_error_entry_not_a_crash() -> None:
    h = ControllerHarness()
    request = DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(resource_type=ConfigResourceType.TOPIC, resource_name="nope"),
            DescribeConfigsResource(resource_type=ConfigResourceType.BROKER, resource_name="x"),
        )
    )
    codes = [r.error_code for r in describe_configs(h.image, request).results]
    assert codes == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_REQUEST]


def test_describe_configs_messages_survive_the_wire_codec() -> None:
    h = ControllerHarness()
    _set(h, ConfigResourceType.BROKER, "", log_retention_ms="5000")
    request = DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(resource_type=ConfigResourceType.BROKER, resource_name=""),
        ),
        include_synonyms=True,
    )
    assert decode(encode(request), DescribeConfigsRequest) == request
    response = describe_configs(h.image, request)
    assert decode(encode(response), type(response)) == response
