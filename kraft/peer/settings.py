"""The properties of an Apache Kafka peer cluster's nodes: Kafka's keys, kraft's values.

Pure: node ids and addresses in, ``{key: value}`` out. Where kraft's default differs from
Kafka's, the peer takes kraft's, read from kraft's config registry (one home per fact), so the
same workload meets the same settings on both:

- ``log.segment.bytes``: kraft's 64 MiB (Kafka: 1 GiB);
- ``log.flush.interval.messages`` / ``log.flush.interval.ms``: never fsync on a count or a
  clock, as both default (replication is the durability; the OS flushes);
- ``broker.session.timeout.ms``: kraft's 3000 (Kafka: 9000), and so
  ``broker.heartbeat.interval.ms``: kraft's 500 (Kafka: 2000, which must be at most half);
- ``log.message.timestamp.after.max.ms``: kraft's "never" (Kafka 4.0: one hour);
- ``message.max.bytes``, ``replica.lag.time.max.ms``, ``unclean.leader.election.enable``,
  ``offsets.topic.replication.factor``, ``num.partitions``: equal on both, written anyway;
- a local cluster's ``offsets.topic.num.partitions`` (6) and
  ``group.consumer.heartbeat.interval.ms`` (500 ms), as `LocalCluster` sets them;
- ``group.consumer.assignment.interval.ms``: 0, a new KIP-848 target assignment at every
  group epoch bump, as kraft (Kafka 4.4: at most one a second).

Two cluster defaults follow kraft's workload rather than its node defaults (1 and 1, as
Kafka's): ``default.replication.factor`` is 3 and ``min.insync.replicas`` 2 (capped by the
number of brokers), the replication that kraft's bench, demo and compare create their topics
with explicitly; so a topic that one of Kafka's tools creates implicitly (auto-creation, the
perf tests) is replicated as the bench's are. The transaction log, unused by kraft, is kept
small (``transaction.state.log.*``).
"""

from __future__ import annotations

from collections.abc import Mapping

from kraft.cluster.local import LOCAL_GROUP_HEARTBEAT_INTERVAL_MS, LOCAL_OFFSETS_TOPIC_PARTITIONS
from kraft.properties import format_voters
from storage.config_registry import NODE_KEYS, TOPIC_KEYS

CONTROLLER_LISTENER = "CONTROLLER"
BROKER_LISTENER = "PLAINTEXT"
WORKLOAD_REPLICATION_FACTOR = 3
WORKLOAD_MIN_INSYNC_REPLICAS = 2
LOCAL_TRANSACTION_LOG_PARTITIONS = 6


def _topic_default(key: str) -> str:
    default = TOPIC_KEYS[key].default
    assert default is not None, key
    return default


def _node_default(key: str) -> str:
    default = NODE_KEYS[key].default
    assert default is not None, key
    return default


def _replication(brokers: int) -> tuple[int, int]:
    """The workload's replication factor and min ISR, capped by the brokers there are."""
    replication = max(1, min(WORKLOAD_REPLICATION_FACTOR, brokers))
    return replication, min(WORKLOAD_MIN_INSYNC_REPLICAS, replication)


def shared_properties(brokers: int) -> dict[str, str]:
    """Topic defaults, which both roles read (the controller at creation and elections), and
    the broker heartbeat."""
    _, min_insync = _replication(brokers)
    return {
        "log.segment.bytes": _topic_default("segment.bytes"),
        "log.flush.interval.messages": _topic_default("flush.messages"),
        "log.flush.interval.ms": _topic_default("flush.ms"),
        "message.max.bytes": _topic_default("max.message.bytes"),
        "log.message.timestamp.after.max.ms": _topic_default("message.timestamp.after.max.ms"),
        "unclean.leader.election.enable": _topic_default("unclean.leader.election.enable"),
        "min.insync.replicas": str(min_insync),
        # At most half the controllers' broker.session.timeout.ms: Kafka checks it in both
        # roles' configs.
        "broker.heartbeat.interval.ms": _node_default("broker.heartbeat.interval.ms"),
    }


def controller_only_properties(brokers: int) -> dict[str, str]:
    """What Kafka 4.x reads in the controller role only."""
    replication, _ = _replication(brokers)
    return {
        "broker.session.timeout.ms": _node_default("broker.session.timeout.ms"),
        "num.partitions": _node_default("num.partitions"),
        "default.replication.factor": str(replication),
    }


def broker_only_properties(brokers: int) -> dict[str, str]:
    """What Kafka 4.x reads in the broker role only."""
    replication, min_insync = _replication(brokers)
    offsets_replication = min(int(_node_default("offsets.topic.replication.factor")), replication)
    return {
        "replica.lag.time.max.ms": _node_default("replica.lag.time.max.ms"),
        "offsets.topic.replication.factor": str(offsets_replication),
        "offsets.topic.num.partitions": str(LOCAL_OFFSETS_TOPIC_PARTITIONS),
        "group.consumer.heartbeat.interval.ms": str(LOCAL_GROUP_HEARTBEAT_INTERVAL_MS),
        # Kafka refuses an interval below its minimum (5 s by default).
        "group.consumer.min.heartbeat.interval.ms": str(LOCAL_GROUP_HEARTBEAT_INTERVAL_MS),
        # Classic groups: no 3 s wait for more members (kraft has none; Kafka's sample config
        # for a laptop says the same).
        "group.initial.rebalance.delay.ms": "0",
        # KIP-848 groups: a new target assignment at every group epoch bump, as kraft computes
        # it (Kafka 4.4 computes at most one a second by default, so a member that joins
        # within a second of the last one is answered at the old epoch; kraft interop diff).
        "group.consumer.assignment.interval.ms": "0",
        "transaction.state.log.replication.factor": str(replication),
        "transaction.state.log.min.isr": str(min_insync),
        "transaction.state.log.num.partitions": str(LOCAL_TRANSACTION_LOG_PARTITIONS),
    }


def _listener_map() -> str:
    return f"{CONTROLLER_LISTENER}:PLAINTEXT,{BROKER_LISTENER}:PLAINTEXT"


def controller_properties(
    node_id: int,
    voters: Mapping[int, str],
    log_dir: str,
    brokers: int,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A controller's properties: a static voter set (``controller.quorum.voters``)."""
    return {
        "process.roles": "controller",
        "node.id": str(node_id),
        "controller.quorum.voters": format_voters(voters),
        "listeners": f"{CONTROLLER_LISTENER}://{voters[node_id]}",
        "controller.listener.names": CONTROLLER_LISTENER,
        "listener.security.protocol.map": _listener_map(),
        "log.dirs": log_dir,
        **shared_properties(brokers),
        **controller_only_properties(brokers),
        **(extra or {}),
    }


def broker_properties(
    node_id: int,
    address: str,
    voters: Mapping[int, str],
    log_dir: str,
    brokers: int,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A broker's properties: one PLAINTEXT listener at ``address``, advertised as is."""
    return {
        "process.roles": "broker",
        "node.id": str(node_id),
        "controller.quorum.voters": format_voters(voters),
        "listeners": f"{BROKER_LISTENER}://{address}",
        "advertised.listeners": f"{BROKER_LISTENER}://{address}",
        "inter.broker.listener.name": BROKER_LISTENER,
        "controller.listener.names": CONTROLLER_LISTENER,
        "listener.security.protocol.map": _listener_map(),
        "log.dirs": log_dir,
        **shared_properties(brokers),
        **broker_only_properties(brokers),
        **(extra or {}),
    }


LOG4J2_PROPERTIES = """\
# Written by kraft: every Kafka node logs to its stdout, which kraft sends to DIR/logs/.
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
logger.state.name = state.change.logger
logger.state.level = warn
logger.request.name = kafka.request.logger
logger.request.level = warn
"""
"""Log4j2's configuration for the nodes (``-Dlog4j2.configurationFile``): ``{level}``."""


__all__ = [
    "BROKER_LISTENER",
    "CONTROLLER_LISTENER",
    "LOG4J2_PROPERTIES",
    "broker_only_properties",
    "broker_properties",
    "controller_only_properties",
    "controller_properties",
    "shared_properties",
]
