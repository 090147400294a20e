"""Config definitions for the metadata layer: the topic keys and the dynamic broker keys.

The keys, their defaults, validators and synonyms live once, in the config registry
(`storage.config_registry`); this module is its view from the controller and the metadata image.

A topic's *effective* value is resolved the way Kafka does it, first match wins:

1. the topic's own dynamic config (``ConfigRecord(TOPIC, name, key)``);
2. the cluster-wide dynamic broker default (``ConfigRecord(BROKER, "", synonym)``), where the
   synonym is the broker key for the same setting (``retention.ms`` <- ``log.retention.ms``);
3. the static default in `TOPIC_CONFIGS`.

The registry's ranges are also `storage.config.LogConfig`'s, so the controller never accepts a
value a broker's log would have to skip. Values are stored as strings, as in Kafka;
`ConfigDef.validate` checks a value and the typed helpers (`parse_bool`, `parse_int`) read one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kraft.metadata.records import ConfigResourceType
from storage.config_registry import (
    CONFIG_VALUE_MAX_CHARS,
    DYNAMIC_BROKER_KEYS,
    TOPIC_KEY_OF_SYNONYM,
    TOPIC_KEYS,
    ConfigKey,
    ConfigType,
    Scope,
    quoted,
    split_list,
    validate,
)

ConfigDef = ConfigKey
"""One config key (the registry's `ConfigKey`)."""

TOPIC_CONFIGS: Final[Mapping[str, ConfigKey]] = TOPIC_KEYS
"""Topic-level keys kraft understands; any other topic key is INVALID_CONFIG."""

BROKER_CONFIGS: Final[Mapping[str, ConfigKey]] = DYNAMIC_BROKER_KEYS
"""Dynamic broker keys (per broker or cluster default): the synonyms of the topic keys."""

MIN_INSYNC_REPLICAS: Final = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION_ENABLE: Final = "unclean.leader.election.enable"
REPLICATION_MODE: Final = "replication.mode"
QUORUM_MODE: Final = "quorum"
"""``replication.mode=quorum``: each partition is a Raft group of its replicas (issue #12)."""

CLUSTER_DEFAULT_RESOURCE: Final = ""
"""``resource_name`` of the cluster-wide broker defaults (Kafka's convention)."""


def config_defs(resource_type: ConfigResourceType) -> Mapping[str, ConfigKey]:
    """The known keys of a resource type."""
    return TOPIC_CONFIGS if resource_type is ConfigResourceType.TOPIC else BROKER_CONFIGS


def validate_config(resource_type: ConfigResourceType, key: str, value: str) -> str | None:
    """Return why ``key=value`` is invalid for ``resource_type``, or ``None`` when valid."""
    scope = Scope.TOPIC if resource_type is ConfigResourceType.TOPIC else Scope.NODE
    return validate(scope, key, value)


def effective_min_isr(min_insync_replicas: int, replication_factor: int) -> int:
    """Kafka's ``Partition.effectiveMinIsr``: min.insync.replicas capped at the replica count.
    The broker's high watermark stops below it (KIP-966's strict min ISR), and the controller's
    ELR rules count with the same number (`kraft.controller.eligible_leaders`)."""
    return max(1, min(min_insync_replicas, replication_factor))


def check_min_insync_replicas(value: str | None, replication_factor: int) -> str | None:
    """Why a topic's ``min.insync.replicas`` cannot hold for its replication factor, or None.

    NB: Kafka accepts a value above the replication factor (KAFKA-4680 proposed refusing it
    and was not merged); its acks=all produces then fail with NOT_ENOUGH_REPLICAS, and
    ``Partition.effectiveMinIsr`` (KIP-966) caps it at the replica count for the high
    watermark. An operator who wants it refused in Kafka installs a ``CreateTopicPolicy`` /
    ``AlterConfigPolicy`` (KIP-108, KIP-133). kraft refuses it as INVALID_CONFIG at create and
    at alter (issue #14): a cap that changes the durability a user asked for must not be quiet.
    """
    if value is None or validate_config(ConfigResourceType.TOPIC, MIN_INSYNC_REPLICAS, value):
        return None  # absent, or refused by its own validation first
    if parse_int(value) > replication_factor:
        return (
            f"{MIN_INSYNC_REPLICAS}={parse_int(value)} is above the replication factor "
            f"{replication_factor}: acks=all could never succeed"
        )
    return None


def check_quorum_topic_config(key: str, value: str | None, mode: str) -> str | None:
    """Why ``key=value`` cannot be set on a topic whose ``replication.mode`` is ``mode``, or None.

    ``min.insync.replicas`` counts in-sync replicas, which a quorum topic does not have: its
    acks=all commits on a majority of the replicas, always. ``unclean.leader.election.enable``
    lets the controller elect a replica outside the ISR, and the controller elects no quorum
    leader: the Raft vote elects only a replica holding every committed record. Kafka refuses a
    config it cannot honour (INVALID_CONFIG) rather than storing it; so does kraft, rather than
    letting a user believe it changes durability or availability. Deleting one (``value``
    None) is allowed.
    """
    if mode != QUORUM_MODE or value is None:
        return None
    if key == MIN_INSYNC_REPLICAS:
        return (
            f"{MIN_INSYNC_REPLICAS} does not apply to a {REPLICATION_MODE}={QUORUM_MODE} topic: "
            "acks=all commits on a majority of its replicas (Raft)"
        )
    if key == UNCLEAN_LEADER_ELECTION_ENABLE:
        return (
            f"{UNCLEAN_LEADER_ELECTION_ENABLE} does not apply to a {REPLICATION_MODE}="
            f"{QUORUM_MODE} topic: its Raft group elects only a replica with every committed "
            "record"
        )
    return None


def check_replication_mode_change(current: str, new: str) -> str | None:
    """Why a topic's ``replication.mode`` cannot go from ``current`` to ``new``, or None.

    A topic's replication mode is chosen at creation: its partitions' logs, leader epochs and
    state are the mode's (a Raft group's election state, or an ISR), and kraft has no
    conversion between them. Setting the current value again is a no-op and allowed.
    """
    if new == current:
        return None
    return (
        f"{REPLICATION_MODE} of an existing topic cannot change ({quoted(current)} -> "
        f"{quoted(new)}): it is chosen when the topic is created"
    )


def resolve_topic_configs(
    topic_overrides: Mapping[str, str], cluster_defaults: Mapping[str, str]
) -> dict[str, str]:
    """Every topic key with its effective value (topic override > cluster default > default)."""
    out: dict[str, str] = {}
    for name, d in TOPIC_CONFIGS.items():
        assert d.default is not None, name
        out[name] = d.default
    for broker_key, value in cluster_defaults.items():
        topic_key = TOPIC_KEY_OF_SYNONYM.get(broker_key)
        if topic_key is not None:
            out[topic_key] = value
    out.update(topic_overrides)
    return out


def parse_bool(value: str) -> bool:
    return value.strip().lower() == "true"


def parse_int(value: str) -> int:
    return int(value.strip())


__all__ = [
    "BROKER_CONFIGS",
    "CLUSTER_DEFAULT_RESOURCE",
    "CONFIG_VALUE_MAX_CHARS",
    "MIN_INSYNC_REPLICAS",
    "QUORUM_MODE",
    "REPLICATION_MODE",
    "TOPIC_CONFIGS",
    "ConfigDef",
    "ConfigType",
    "check_min_insync_replicas",
    "check_quorum_topic_config",
    "check_replication_mode_change",
    "config_defs",
    "effective_min_isr",
    "parse_bool",
    "parse_int",
    "quoted",
    "resolve_topic_configs",
    "split_list",
    "validate_config",
]
