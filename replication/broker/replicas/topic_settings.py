"""A topic's effective settings on this broker: its `ReplicationConfig` and its `LogConfig`, and
its replication mode (``replication.mode``, fixed at the topic's creation, and
``quorum.write.caching``, read when a replica opens).

Theory of operation
-------------------
Kafka resolves every topic config per key, first match wins, and applies a change live
(``ConfigAdminManager`` -> ``TopicConfigHandler`` -> ``Partition`` / ``UnifiedLog.updateConfig``):

1. the topic's own dynamic config (``ConfigRecord(TOPIC, name, key)`` in the metadata image);
2. the cluster-wide dynamic broker default (``ConfigRecord(BROKER, "", synonym)``, e.g.
   ``log.retention.ms`` for ``retention.ms``, ``min.insync.replicas`` for itself);
3. this broker's static property (``min.insync.replicas``, ``log.segment.bytes``, ...);
4. the built-in default (`ReplicationConfig`, `LogConfig`).

NB: the metadata image's ``topic_configs`` fills step 4 from the controller's table, which would
hide step 3; this module reads only the explicitly set values of steps 1 and 2.

The broker resolves both configs for every topic it replicates after each metadata change
(`ReplicaManager.reconcile`) and hands them to each replica, which passes a changed
``min.insync.replicas`` to its leader core and a changed `LogConfig` to its open log: no
restart and no leader change needed. Nothing here runs on the produce or fetch path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from kraft.metadata import CLUSTER_DEFAULT_RESOURCE, MetadataImage
from kraft.metadata.configs import MIN_INSYNC_REPLICAS, QUORUM_MODE, REPLICATION_MODE, parse_bool
from kraft.metadata.records import ConfigResourceType
from replication.broker.config import BrokerNodeConfig
from replication.broker.replicas.retention import (
    resolve_log_config,
    topic_keys_of_dynamic_broker_defaults,
)
from replication.core import ReplicationConfig
from replication.driver import ReplicationMode
from storage.config import LogConfig

_log = structlog.get_logger("replication.broker.replicas.topic_settings")

QUORUM_WRITE_CACHING = "quorum.write.caching"


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicSettings:
    """The effective settings of one topic's replicas on this broker."""

    replication: ReplicationConfig
    log: LogConfig
    mode: ReplicationMode = ReplicationMode.ISR
    """``replication.mode``: picks the partition driver (`open_partition_driver`)."""
    write_caching: bool = False
    """``quorum.write.caching`` (quorum mode): acknowledge before the fsync."""


def resolve_min_insync_replicas(
    topic_configs: Mapping[str, str],
    cluster_defaults: Mapping[str, str],
    broker_default: int,
    *,
    context: str = "",
) -> int:
    """``min.insync.replicas``: the topic's, else the cluster-wide dynamic default, else this
    broker's property (``broker_default``). A value that is not a positive integer (the
    controller rejects those) is skipped with a warning."""
    for layer in (topic_configs, cluster_defaults):
        raw = layer.get(MIN_INSYNC_REPLICAS)
        if raw is None:
            continue
        try:
            value = int(raw.strip())
        except ValueError:
            value = 0
        if value >= 1:
            return value
        _log.warning("min_insync_replicas_ignored", value=raw, at=context)
    return broker_default


def resolve_topic_settings(
    image: MetadataImage, topic: str, broker: BrokerNodeConfig
) -> TopicSettings:
    """``topic``'s settings from ``image`` and this broker's config (see the module doc)."""
    topic_configs = image.dynamic_configs(ConfigResourceType.TOPIC, topic)
    cluster_defaults = image.dynamic_configs(ConfigResourceType.BROKER, CLUSTER_DEFAULT_RESOURCE)
    min_isr = resolve_min_insync_replicas(
        topic_configs,
        cluster_defaults,
        broker.replication.min_insync_replicas,
        context=topic,
    )
    quorum = topic_configs.get(REPLICATION_MODE) == QUORUM_MODE
    return TopicSettings(
        mode=ReplicationMode.QUORUM if quorum else ReplicationMode.ISR,
        write_caching=quorum and parse_bool(topic_configs.get(QUORUM_WRITE_CACHING, "false")),
        replication=dataclasses.replace(broker.replication, min_insync_replicas=min_isr),
        log=resolve_log_config(
            broker.log_defaults,
            topic_keys_of_dynamic_broker_defaults(cluster_defaults),
            topic_configs,
            context=topic,
        ),
    )


__all__ = [
    "MIN_INSYNC_REPLICAS",
    "TopicSettings",
    "resolve_min_insync_replicas",
    "resolve_topic_settings",
]
