"""The config registry: every key kraft's topics, brokers and controllers read, each once.

A key is a `ConfigKey`: Kafka's dotted name, its type, its default (a string, as Kafka stores
configs), its validator (range, allowed values, values not supported yet), which layer reads
it, its broker synonym when it is a topic key, the snake_case field it fills, and its doc line.
Everything else is derived from `REGISTRY`:

- ``storage.config.PROPERTY_KEYS`` (the log settings of `LogConfig`) and `LogConfig`'s ranges;
- the broker's static log defaults (``log.retention.ms`` -> ``retention.ms``: `BROKER_LOG_KEYS`)
  and the controller's dynamic broker keys (`DYNAMIC_BROKER_KEYS`, the synonyms);
- the controller's topic-config validation (`validate`, via ``kraft.metadata.configs``);
- the field tables of `RaftConfig`, `ReplicationConfig`, `ControllerConfig` and the node
  configs (`node_property_fields`);
- the keys a listener may set for itself (`PER_LISTENER_KEYS`, `listener_key`:
  ``listener.name.<listener>.ssl.keystore.location``, as Kafka's listener prefix);
- the configuration tables of ``docs/operations.md`` (`storage.config_docs`; a test holds them
  equal).

`LogConfig` takes its defaults from here too. `RaftConfig`, `ReplicationConfig`,
`ControllerConfig` and the node configs keep a literal default on each field (a frozen
dataclass reads best that way), and ``tests/test_config_registry.py`` holds every one equal to
the registry's, and every field of theirs to a registry key. The `ConfigKey` class and its
validator are in `storage.config_key`; the keys themselves are declared in
`storage.config_topic_keys` (`TOPIC_REGISTRY`) and `storage.config_node_keys`
(`NODE_REGISTRY`), one home per key, and re-exported here.

Where it lives, and why here. Dependencies point ``storage <- kraft <- replication <- spark``
(``tests/test_contract.py``), and the lowest reader is storage's `LogConfig`, so the one table
sits at the bottom, as Kafka keeps ``TopicConfig`` and ``ConfigDef`` in its clients module, the
bottom of its own graph. The registry is data plus pure validation: it imports nothing of the
layers that read it, and names their config classes only as strings (``owner``).

Two namespaces, as in Kafka: *topic* keys (set per topic, or by default through their broker
synonym) and *node* keys (a broker's or a controller's properties file). A name is unique in its
namespace; a topic key's synonym may share its name (``min.insync.replicas``). The producer and
consumer settings keep their own dataclasses (``replication/clients/config.py``): they are a
third namespace (``compression.type`` means another thing there) and already derive their keys
from their fields.

Values Kafka has that kraft does not implement yet are refused (INVALID_CONFIG, "not supported
yet") rather than stored and ignored: ``message.timestamp.type=LogAppendTime``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from storage.config_key import (
    CONFIG_VALUE_MAX_CHARS,
    INT_MAX,
    LONG_MAX,
    SEGMENT_BYTES_MIN,
    ConfigKey,
    ConfigType,
    Reader,
    Scope,
    quoted,
    split_list,
)
from storage.config_node_keys import NODE_REGISTRY as _NODE_KEYS_BUT_TXN
from storage.config_topic_keys import TOPIC_REGISTRY
from storage.config_txn_keys import TXN_NODE_KEYS

_LOG = "LogConfig"

NODE_REGISTRY: Final[tuple[ConfigKey, ...]] = _NODE_KEYS_BUT_TXN + TXN_NODE_KEYS
"""Every node key (`storage.config_node_keys`, then the transactions' keys)."""

REGISTRY: Final[tuple[ConfigKey, ...]] = TOPIC_REGISTRY + NODE_REGISTRY
"""The one table."""

TOPIC_KEYS: Final[Mapping[str, ConfigKey]] = {k.name: k for k in TOPIC_REGISTRY}
NODE_KEYS: Final[Mapping[str, ConfigKey]] = {k.name: k for k in NODE_REGISTRY}

DYNAMIC_NODE_KEYS: Final = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
)
"""Node keys that IncrementalAlterConfigs also takes on a broker (per broker or the cluster
default ``""``), overriding the broker's properties at once (Kafka's dynamic broker configs)."""

DYNAMIC_BROKER_KEYS: Final[Mapping[str, ConfigKey]] = {
    **{name: NODE_KEYS[name] for name in DYNAMIC_NODE_KEYS},
    **{
        k.synonym: ConfigKey(
            name=k.synonym,
            scope=Scope.NODE,
            type=k.type,
            default=k.default,
            readers=k.readers,
            doc=f"the default of the topic key `{k.name}`",
            min_value=k.min_value,
            max_value=k.max_value,
            choices=k.choices,
            unsupported=k.unsupported,
            unsupported_reason=k.unsupported_reason,
            shown_default=k.shown_default,
        )
        for k in TOPIC_REGISTRY
        if k.synonym is not None
    },
}
"""The broker keys IncrementalAlterConfigs takes (per broker or the cluster default ``""``):
the topic keys' synonyms, validated as the topic key is, and `DYNAMIC_NODE_KEYS`."""

TOPIC_KEY_OF_SYNONYM: Final[Mapping[str, str]] = {
    k.synonym: k.name for k in TOPIC_REGISTRY if k.synonym is not None
}

BROKER_LOG_KEYS: Final[Mapping[str, str]] = {
    k.synonym: k.name for k in TOPIC_REGISTRY if k.synonym is not None and k.owner == _LOG
}
"""Broker key -> topic key of the log settings: a broker's static properties
(``log.retention.ms``, ...) are the default of every topic that sets none."""

LOG_PROPERTY_FIELDS: Final[Mapping[str, str]] = {
    k.name: k.field for k in TOPIC_REGISTRY if k.owner == _LOG and k.field is not None
}
"""Topic key -> `LogConfig` field (``storage.config.PROPERTY_KEYS``)."""


LISTENER_PREFIX: Final = "listener.name."
"""Kafka's prefix of a listener's own value of a node key (``ListenerName.configPrefix``)."""

PER_LISTENER_KEYS: Final[tuple[str, ...]] = tuple(k.name for k in NODE_REGISTRY if k.per_listener)
"""The node keys a listener may set for itself (the ``ssl.*`` keys)."""


def listener_key(listener: str, key: str) -> str:
    """Listener ``listener``'s own name of node key ``key``: ``listener.name.external.<key>``
    (the listener's name lower-cased, as Kafka matches it)."""
    return f"{LISTENER_PREFIX}{listener.lower()}.{key}"


def node_property_fields(owner: str) -> dict[str, str]:
    """Node property -> field of the config class ``owner`` (a topic key held by a node's
    config is read under its synonym: ``min.insync.replicas`` of `ReplicationConfig`)."""
    out = {k.name: k.field for k in NODE_REGISTRY if k.owner == owner and k.field is not None}
    for k in TOPIC_REGISTRY:
        if k.owner == owner and k.owner != _LOG and k.field is not None and k.synonym:
            out[k.synonym] = k.field
    return out


def validate(scope: Scope, key: str, value: str) -> str | None:
    """Why ``key=value`` is invalid, or None: a topic key on a topic, or a dynamic broker key
    (a topic key's synonym) on a broker resource."""
    keys = TOPIC_KEYS if scope is Scope.TOPIC else DYNAMIC_BROKER_KEYS
    definition = keys.get(key)
    if definition is None:
        kind = "topic" if scope is Scope.TOPIC else "broker"
        return f"unknown {kind} config {quoted(key)}"
    return definition.validate(value)


__all__ = [
    "BROKER_LOG_KEYS",
    "CONFIG_VALUE_MAX_CHARS",
    "DYNAMIC_BROKER_KEYS",
    "DYNAMIC_NODE_KEYS",
    "INT_MAX",
    "LISTENER_PREFIX",
    "LOG_PROPERTY_FIELDS",
    "LONG_MAX",
    "NODE_KEYS",
    "NODE_REGISTRY",
    "PER_LISTENER_KEYS",
    "REGISTRY",
    "SEGMENT_BYTES_MIN",
    "TOPIC_KEYS",
    "TOPIC_KEY_OF_SYNONYM",
    "TOPIC_REGISTRY",
    "ConfigKey",
    "ConfigType",
    "Reader",
    "Scope",
    "listener_key",
    "node_property_fields",
    "quoted",
    "split_list",
    "validate",
]
