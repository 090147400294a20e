"""The metrics of a broker, a controller and a Raft node, named after Kafka's MBeans, and
their values computed from what the node knows (its metadata image, its Raft state).

The state gauges are pure functions of the image: a broker reports the partitions it leads
(``LeaderCount``), those of them whose ISR is short of the replicas
(``UnderReplicatedPartitions``) or of ``min.insync.replicas`` (``UnderMinIsrPartitionCount``);
the active controller reports ``ActiveControllerCount`` 1 (the others 0), the partitions with
no leader (``OfflinePartitionsCount``) and its fenced and active brokers. The broker that
coordinates a consumer group reports the group's committed offset and lag per partition
(``kafka_consumergroup_current_offset`` and ``kafka_consumergroup_lag``, kafka-exporter's
names: Kafka's brokers have no such metric, its consumers' ``records-lag`` and tools such as
Burrow fill the gap). Every name, with its meaning and a sample alert, is in
``docs/operations.md`` ("Metrics").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

from kraft.metadata.image import MetadataImage
from kraft.metadata.records import NO_LEADER
from kraft.metrics.registry import GaugeSpec, GaugeValue

UNDER_REPLICATED: Final = "kafka_server_replicamanager_underreplicatedpartitions"
UNDER_MIN_ISR: Final = "kafka_server_replicamanager_underminisrpartitioncount"
LEADER_COUNT: Final = "kafka_server_replicamanager_leadercount"
PARTITION_COUNT: Final = "kafka_server_replicamanager_partitioncount"
ISR_SHRINKS: Final = "kafka_server_replicamanager_isrshrinks_total"
ISR_EXPANDS: Final = "kafka_server_replicamanager_isrexpands_total"
MESSAGES_IN: Final = "kafka_server_brokertopicmetrics_messagesin_total"
BYTES_IN: Final = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT: Final = "kafka_server_brokertopicmetrics_bytesout_total"

ACTIVE_CONTROLLER: Final = "kafka_controller_kafkacontroller_activecontrollercount"
OFFLINE_PARTITIONS: Final = "kafka_controller_kafkacontroller_offlinepartitionscount"
FENCED_BROKERS: Final = "kafka_controller_kafkacontroller_fencedbrokercount"
ACTIVE_BROKERS: Final = "kafka_controller_kafkacontroller_activebrokercount"
TOPIC_COUNT: Final = "kafka_controller_kafkacontroller_globaltopiccount"
GLOBAL_PARTITIONS: Final = "kafka_controller_kafkacontroller_globalpartitioncount"

FETCH_SESSIONS: Final = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
FETCH_SESSION_PARTITIONS: Final = (
    "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"
)
FETCH_SESSION_EVICTIONS: Final = (
    "kafka_server_fetchsessioncache_incrementalfetchsessionevictionspersec_count"
)
FETCH_SESSION_REQUESTS: Final = "kraft_fetchsessioncache_requests_count"

GROUP_LAG: Final = "kafka_consumergroup_lag"
GROUP_OFFSET: Final = "kafka_consumergroup_current_offset"

RAFT_LEADER: Final = "kafka_server_raftmetrics_current_leader"
RAFT_EPOCH: Final = "kafka_server_raftmetrics_current_epoch"
RAFT_HIGH_WATERMARK: Final = "kafka_server_raftmetrics_high_watermark"
RAFT_LOG_END: Final = "kafka_server_raftmetrics_log_end_offset"

BROKER_GAUGES: Final = (
    GaugeSpec(UNDER_REPLICATED, "partitions this broker leads whose ISR is short of replicas"),
    GaugeSpec(UNDER_MIN_ISR, "partitions this broker leads whose ISR is below min.insync"),
    GaugeSpec(LEADER_COUNT, "partitions this broker leads"),
    GaugeSpec(PARTITION_COUNT, "partitions this broker holds a replica of"),
)
CONTROLLER_GAUGES: Final = (
    GaugeSpec(ACTIVE_CONTROLLER, "1 on the active controller, 0 on the others"),
    GaugeSpec(OFFLINE_PARTITIONS, "partitions without a leader (active controller only)"),
    GaugeSpec(FENCED_BROKERS, "registered brokers that are fenced (active controller only)"),
    GaugeSpec(ACTIVE_BROKERS, "registered brokers that are unfenced (active controller only)"),
    GaugeSpec(TOPIC_COUNT, "topics (active controller only)"),
    GaugeSpec(GLOBAL_PARTITIONS, "partitions (active controller only)"),
)
FETCH_SESSION_GAUGES: Final = (
    GaugeSpec(FETCH_SESSIONS, "incremental fetch sessions (KIP-227) this broker keeps"),
    GaugeSpec(FETCH_SESSION_PARTITIONS, "partitions over this broker's fetch sessions"),
    GaugeSpec(FETCH_SESSION_EVICTIONS, "fetch sessions evicted to make room for a new one"),
    GaugeSpec(
        FETCH_SESSION_REQUESTS,
        "Kafka clients' fetches since the broker started, by how their session took them "
        "(full, incremental, sessionless, error) and how they name topics (id: Fetch v13+)",
        ("kind", "topics"),
    ),
)
GROUP_LABELS: Final = ("consumergroup", "topic", "partition")
GROUP_GAUGES: Final = (
    GaugeSpec(
        GROUP_LAG,
        "records between a group's committed offset and the partition's high watermark "
        "(on the group's coordinator)",
        GROUP_LABELS,
    ),
    GaugeSpec(GROUP_OFFSET, "a group's committed offset (on its coordinator)", GROUP_LABELS),
)
RAFT_GAUGES: Final = (
    GaugeSpec(RAFT_LEADER, "the metadata quorum's leader as this node knows it (-1: none)"),
    GaugeSpec(RAFT_EPOCH, "the metadata quorum's epoch on this node"),
    GaugeSpec(RAFT_HIGH_WATERMARK, "the metadata log's high watermark on this node"),
    GaugeSpec(RAFT_LOG_END, "the metadata log's end offset on this node"),
)


def broker_values(
    image: MetadataImage, node_id: int, min_insync_replicas: Callable[[str], int]
) -> dict[str, GaugeValue]:
    """The broker gauges of ``node_id`` (``min_insync_replicas(topic)``: the topic's
    effective value)."""
    leading = under = under_min = held = 0
    for topic in image.topics_by_id.values():
        for registration in topic.partitions.values():
            if node_id in registration.replicas:
                held += 1
            if registration.leader != node_id:
                continue
            leading += 1
            # Kafka's OngoingReassignmentState: the adding replicas do not count yet.
            if len(registration.isr) < len(registration.replicas) - len(
                registration.adding_replicas
            ):
                under += 1
            if len(registration.isr) < min_insync_replicas(topic.name):
                under_min += 1
    return {
        UNDER_REPLICATED: under,
        UNDER_MIN_ISR: under_min,
        LEADER_COUNT: leading,
        PARTITION_COUNT: held,
    }


def controller_values(image: MetadataImage, *, active: bool) -> dict[str, GaugeValue]:
    """The controller gauges: only ``ActiveControllerCount`` unless ``active`` (as in Kafka,
    only the active controller reports the cluster-wide counts)."""
    if not active:
        return {ACTIVE_CONTROLLER: 0}
    partitions = [p for t in image.topics_by_id.values() for p in t.partitions.values()]
    fenced = sum(1 for b in image.brokers.values() if b.fenced)
    return {
        ACTIVE_CONTROLLER: 1,
        OFFLINE_PARTITIONS: sum(1 for p in partitions if p.leader == NO_LEADER),
        FENCED_BROKERS: fenced,
        ACTIVE_BROKERS: len(image.brokers) - fenced,
        TOPIC_COUNT: len(image.topics_by_id),
        GLOBAL_PARTITIONS: len(partitions),
    }


def group_values(
    committed: Iterable[tuple[str, str, int, int]],
    high_watermark: Callable[[str, int], int | None],
) -> dict[str, GaugeValue]:
    """The consumer-group gauges from ``(group, topic, partition, committed offset)`` of the
    groups this broker coordinates. Lag is ``high_watermark(topic, partition) - committed``
    (at least 0, as a high watermark seen by a follower may trail a commit); a partition whose
    high watermark this broker does not know (None) has no lag sample."""
    offsets: dict[tuple[str, ...], float] = {}
    lags: dict[tuple[str, ...], float] = {}
    for group, topic, partition, offset in committed:
        labels = (group, topic, str(partition))
        offsets[labels] = offset
        end = high_watermark(topic, partition)
        if end is not None:
            lags[labels] = max(0, end - offset)
    return {GROUP_OFFSET: offsets, GROUP_LAG: lags}


def fetch_session_values(
    sessions: int, partitions: int, evictions: int, requests: Mapping[tuple[str, str], int]
) -> dict[str, GaugeValue]:
    """The fetch-session gauges (``requests``: fetches by kind and ``id`` or ``name``)."""
    return {
        FETCH_SESSIONS: sessions,
        FETCH_SESSION_PARTITIONS: partitions,
        FETCH_SESSION_EVICTIONS: evictions,
        FETCH_SESSION_REQUESTS: {labels: float(n) for labels, n in requests.items()},
    }


def raft_values(
    leader_id: int | None, epoch: int, high_watermark: int, log_end_offset: int
) -> dict[str, GaugeValue]:
    return {
        RAFT_LEADER: -1 if leader_id is None else leader_id,
        RAFT_EPOCH: epoch,
        RAFT_HIGH_WATERMARK: high_watermark,
        RAFT_LOG_END: log_end_offset,
    }


__all__ = [
    "BROKER_GAUGES",
    "CONTROLLER_GAUGES",
    "FETCH_SESSION_GAUGES",
    "GROUP_GAUGES",
    "RAFT_GAUGES",
    "broker_values",
    "controller_values",
    "fetch_session_values",
    "group_values",
    "raft_values",
]
