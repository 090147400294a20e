"""DescribeConfigs: every key of a topic or a broker, its effective value and its source (pure).

Kafka's DescribeConfigs (with KIP-226's sources) answered from a committed `MetadataImage`, the
way ``kafka-configs.sh --describe [--all]`` shows it. A value comes from the first of:

=================================  ===========================================================
source                             where
=================================  ===========================================================
``DYNAMIC_TOPIC_CONFIG`` (1)       the topic's own config (``kraft topics alter-config``)
``DYNAMIC_BROKER_CONFIG`` (2)      a broker resource's config (broker resource ``"101"``)
``DYNAMIC_DEFAULT_BROKER_CONFIG``  the cluster-wide broker default (broker resource ``""``);
(3)                                for a topic key, under its broker synonym
                                   (``log.retention.ms`` for ``retention.ms``)
``DEFAULT_CONFIG`` (5)             the config registry's default
=================================  ===========================================================

NB: Kafka's ``STATIC_BROKER_CONFIG`` (4), a broker's properties file, is not reported: the
controller answers and has never seen those files. A broker started with, say,
``log.retention.ms`` in its file uses that value for topics without an override while this
answer says DEFAULT_CONFIG.

With ``include_synonyms`` each entry lists every layer that has a value, most specific first
(Kafka's ``--all`` output prints them as ``synonyms={...}``).
"""

from __future__ import annotations

from collections.abc import Mapping

from kraft.controller.messages import (
    ConfigSource,
    DescribeConfigsEntry,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kraft.metadata.configs import CLUSTER_DEFAULT_RESOURCE, config_defs, quoted
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import ConfigResourceType
from storage.config_registry import TOPIC_KEYS
from storage.errors import ErrorCode

MAX_RESOURCES_PER_REQUEST = 1000
"""Resources one DescribeConfigs may name (the answer is built on the controller's loop)."""


def describe_configs(
    image: MetadataImage, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    """The answer to ``request`` from ``image`` (never raises for a bad resource: it gets an
    error entry, UNKNOWN_TOPIC_OR_PARTITION or INVALID_REQUEST)."""
    if len(request.resources) > MAX_RESOURCES_PER_REQUEST:
        return DescribeConfigsResponse(
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=f"more than {MAX_RESOURCES_PER_REQUEST} resources in one request",
        )
    return DescribeConfigsResponse(
        results=tuple(_describe(image, r, request.include_synonyms) for r in request.resources)
    )


def _describe(
    image: MetadataImage, resource: DescribeConfigsResource, synonyms: bool
) -> DescribeConfigsResult:
    rtype, name = resource.resource_type, resource.resource_name

    def error(code: ErrorCode, message: str) -> DescribeConfigsResult:
        return DescribeConfigsResult(
            resource_type=rtype, resource_name=name, error_code=code, error_message=message
        )

    if rtype is ConfigResourceType.TOPIC:
        if image.topic(name) is None:
            return error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {quoted(name)}")
    elif rtype is ConfigResourceType.BROKER:
        if name != CLUSTER_DEFAULT_RESOURCE and not name.isdigit():
            return error(
                ErrorCode.INVALID_REQUEST, f"broker resource {quoted(name)} is not a broker id"
            )
    else:  # pragma: no cover - the enum has two members
        return error(ErrorCode.INVALID_REQUEST, f"unknown resource type {int(rtype)}")
    keys = config_defs(rtype)
    wanted = sorted(keys) if resource.config_names is None else list(resource.config_names)
    entries = []
    for key in wanted:
        definition = keys.get(key)
        if definition is None:
            continue  # as Kafka: an unknown name is left out
        layers = _layers(image, rtype, name, key)
        value, source = layers[0][1], layers[0][2]
        entries.append(
            DescribeConfigsEntry(
                name=key,
                value=value,
                source=source,
                synonyms=tuple(
                    DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in layers
                )
                if synonyms
                else (),
                documentation=definition.doc,
            )
        )
    return DescribeConfigsResult(resource_type=rtype, resource_name=name, configs=tuple(entries))


def _layers(
    image: MetadataImage, rtype: ConfigResourceType, name: str, key: str
) -> list[tuple[str, str, ConfigSource]]:
    """(name, value, source) of every layer with a value for ``key``, most specific first;
    the last is always the default."""
    out: list[tuple[str, str, ConfigSource]] = []
    broker_key = key
    if rtype is ConfigResourceType.TOPIC:
        topic_value = image.dynamic_configs(rtype, name).get(key)
        if topic_value is not None:
            out.append((key, topic_value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        broker_key = TOPIC_KEYS[key].synonym or ""
    elif name != CLUSTER_DEFAULT_RESOURCE:
        own = image.dynamic_configs(ConfigResourceType.BROKER, name).get(key)
        if own is not None:
            out.append((key, own, ConfigSource.DYNAMIC_BROKER_CONFIG))
    cluster: Mapping[str, str] = image.dynamic_configs(
        ConfigResourceType.BROKER, CLUSTER_DEFAULT_RESOURCE
    )
    if broker_key and broker_key in cluster:
        out.append((broker_key, cluster[broker_key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    default = config_defs(rtype)[key].default or ""
    out.append((broker_key or key, default, ConfigSource.DEFAULT_CONFIG))
    return out


__all__ = [
    "describe_configs",
]
