"""DescribeConfigs (with KIP-226's sources): request, response and the sources of a value.

The controller answers it from its committed image (`kraft.controller.config_describe`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kraft.metadata.records import ConfigResourceType
from storage.errors import ErrorCode


class ConfigSource(enum.IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigSource`` numbers."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResource:
    resource_type: ConfigResourceType
    resource_name: str
    config_names: tuple[str, ...] | None = None
    """None: every key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsRequest:
    resources: tuple[DescribeConfigsResource, ...] = ()
    include_synonyms: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsSynonym:
    name: str
    value: str
    source: ConfigSource


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsEntry:
    name: str
    value: str
    source: ConfigSource
    read_only: bool = False
    synonyms: tuple[DescribeConfigsSynonym, ...] = ()
    documentation: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResult:
    resource_type: ConfigResourceType
    resource_name: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    configs: tuple[DescribeConfigsEntry, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    results: tuple[DescribeConfigsResult, ...] = ()
    node_id: int = -1
    """The controller that answered (set by the server, as DescribeCluster's)."""
    controller_id: int = -1
    """The active controller it knows of: a client that must read its own writes
    (``require_active``) goes on until the two are the same."""


__all__ = [
    "ConfigSource",
    "DescribeConfigsEntry",
    "DescribeConfigsRequest",
    "DescribeConfigsResource",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "DescribeConfigsSynonym",
]
