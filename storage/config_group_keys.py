"""The consumer-group node keys of the config registry: the offsets topic and the group
coordinator (KIP-848 groups and classic groups), Kafka's ``GroupCoordinatorConfig``.

`storage.config_node_keys` splices `GROUP_NODE_KEYS` into `NODE_REGISTRY` where the docs'
broker table lists them; the broker reads them into `BrokerNodeConfig` fields.
"""

from __future__ import annotations

from typing import Final

from storage.config_key import INT_MAX, ConfigKey, ConfigType, Reader
from storage.config_key import node_key as _node

_B = frozenset({Reader.BROKER})
_T = ConfigType
_BROKER = "BrokerNodeConfig"

GROUP_NODE_KEYS: Final[tuple[ConfigKey, ...]] = (
    _node(
        "offsets.topic.num.partitions",
        _T.INT,
        "50",
        "partitions of `__consumer_offsets`, created on the first FindCoordinator (a group "
        "lives on partition `abs(hashCode(group.id)) % this`)",
        readers=_B,
        owner=_BROKER,
        field="offsets_topic_num_partitions",
        min_value=1,
    ),
    _node(
        "offsets.topic.replication.factor",
        _T.INT,
        "3",
        "replication factor of `__consumer_offsets` (capped at the number of live brokers)",
        readers=_B,
        owner=_BROKER,
        field="offsets_topic_replication_factor",
        min_value=1,
    ),
    _node(
        "offsets.retention.minutes",
        _T.INT,
        "10080",
        "the committed offsets of a group that has been empty this long are deleted",
        readers=_B,
        owner=_BROKER,
        field="offsets_retention_minutes",
        min_value=1,
    ),
    _node(
        "group.consumer.session.timeout.ms",
        _T.INT,
        "45000",
        "a member that sends no heartbeat for this long is removed from its group",
        readers=_B,
        owner=_BROKER,
        field="group_consumer_session_timeout_ms",
        min_value=1,
    ),
    _node(
        "group.consumer.heartbeat.interval.ms",
        _T.INT,
        "5000",
        "the heartbeat interval the coordinator gives members",
        readers=_B,
        owner=_BROKER,
        field="group_consumer_heartbeat_interval_ms",
        min_value=1,
    ),
    _node(
        "group.consumer.max.size",
        _T.INT,
        str(INT_MAX),
        "members one consumer group may have (GROUP_MAX_SIZE_REACHED beyond)",
        readers=_B,
        owner=_BROKER,
        field="group_consumer_max_size",
        min_value=1,
    ),
    _node(
        "group.min.session.timeout.ms",
        _T.INT,
        "6000",
        "the shortest session a classic group member may ask for (INVALID_SESSION_TIMEOUT)",
        readers=_B,
        owner=_BROKER,
        field="group_min_session_timeout_ms",
        min_value=1,
    ),
    _node(
        "group.max.session.timeout.ms",
        _T.INT,
        "1800000",
        "the longest session a classic group member may ask for (INVALID_SESSION_TIMEOUT)",
        readers=_B,
        owner=_BROKER,
        field="group_max_session_timeout_ms",
        min_value=1,
    ),
    _node(
        "group.initial.rebalance.delay.ms",
        _T.INT,
        "3000",
        "how long a new classic group waits for more members before its first rebalance ends",
        readers=_B,
        owner=_BROKER,
        field="group_initial_rebalance_delay_ms",
        min_value=0,
    ),
    _node(
        "group.max.size",
        _T.INT,
        str(INT_MAX),
        "members one classic group may have (GROUP_MAX_SIZE_REACHED beyond)",
        readers=_B,
        owner=_BROKER,
        field="group_max_size",
        min_value=1,
    ),
    _node(
        "group.consumer.assignors",
        _T.LIST,
        "uniform,range",
        "the server-side assignors (`uniform`, `range`); the first is the default, a member "
        "may ask for another with `group.remote.assignor`",
        readers=_B,
        owner=_BROKER,
        field="group_consumer_assignors",
    ),
    _node(
        "group.coordinator.snapshot.interval.records",
        _T.INT,
        "1000",
        "after this many records appended to a `__consumer_offsets` partition, its coordinator "
        "writes a snapshot of its state and moves the log start offset past the older records",
        readers=_B,
        owner=_BROKER,
        field="group_coordinator_snapshot_interval_records",
        min_value=1,
        kraft_only=True,
    ),
)
"""The consumer-group keys, in the order of the docs' broker table."""


__all__ = ["GROUP_NODE_KEYS"]
