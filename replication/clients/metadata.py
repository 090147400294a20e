"""The clients' metadata cache: topics -> partitions -> leader and leader epoch, and brokers.

Kafka's ``Metadata`` / ``Cluster``, reduced to what a producer and a consumer route by. It is
filled from `MetadataResponse`s (the Metadata RPC, answered by any broker) and refreshed on
demand: a client calls `request_update` when a response says its picture is stale
(NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, fenced epochs) or a
partition has no leader, and the shell fetches new metadata when `needs_update` says so, at
most once per ``retry.backoff.ms``.

A leader hint from a response (KIP-951's ``current_leader``) is applied at once by
`update_leader`, when its epoch is newer than the cached one, so a produce retry can go to the
new leader before the next Metadata round trip.

Leader epochs never go back (KIP-320, Kafka's ``Metadata.updateLatestMetadata``): a Metadata
response may come from a broker whose own image is behind (one that was cut from the
controllers and still believes it leads at an older epoch). A partition it reports at an
older leader epoch than the newest seen keeps the newest seen, even if a response in between
reported the topic in error. Taking the older one would send fetches to the stale leader
with its own old epoch, which it accepts and answers from its old log: a consumer position
past that log's end comes back OFFSET_OUT_OF_RANGE and is reset by ``auto.offset.reset``. A
topic whose id changed (deleted and created again) starts afresh.

Readers see an immutable `ClusterSnapshot` swapped in whole, so lookups need no lock; the
writers (the shells' I/O paths) serialise on a lock of their own.

Pure: time comes in as ``now_ms``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import final

from kraft.types import TopicPartition
from replication.messages import (
    READ_UNCOMMITTED,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
    MetadataResponse,
)
from storage.errors import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionInfo:
    partition: int
    leader_id: int
    """-1: no leader right now."""
    leader_epoch: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSnapshot:
    """One immutable view of the cluster (Kafka's ``Cluster``)."""

    brokers: Mapping[int, str] = field(default_factory=dict)
    """Broker id -> ``host:port``."""
    racks: Mapping[int, str] = field(default_factory=dict)
    """Broker id -> ``broker.rack``, for the brokers that have one."""
    topics: Mapping[str, tuple[PartitionInfo, ...]] = field(default_factory=dict)
    """Partitions of each known topic, indexed by partition number."""
    topic_errors: Mapping[str, ErrorCode] = field(default_factory=dict)
    """Topics the last response reported an error for (e.g. UNKNOWN_TOPIC_OR_PARTITION)."""
    cluster_id: str = ""
    controller_id: int = -1

    def partition_count(self, topic: str) -> int | None:
        parts = self.topics.get(topic)
        return None if parts is None else len(parts)

    def available_partitions(self, topic: str) -> list[int]:
        return [p.partition for p in self.topics.get(topic, ()) if p.leader_id >= 0]

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        parts = self.topics.get(tp.topic)
        if parts is None or not 0 <= tp.partition < len(parts):
            return None
        return parts[tp.partition]

    def leader_for(self, tp: TopicPartition) -> int | None:
        """The leader's broker id, if known and its address too."""
        info = self.partition(tp)
        if info is None or info.leader_id < 0 or info.leader_id not in self.brokers:
            return None
        return info.leader_id

    def list_offsets_request(
        self, queries: Mapping[TopicPartition, int], *, isolation_level: int = READ_UNCOMMITTED
    ) -> ListOffsetsRequest:
        """ListOffsets for ``{partition: timestamp}`` (-2 earliest, -1 latest, else a time),
        each fenced with the leader epoch this snapshot knows (KIP-320)."""
        topics: dict[str, list[ListOffsetsPartition]] = {}
        for tp, timestamp in queries.items():
            info = self.partition(tp)
            topics.setdefault(tp.topic, []).append(
                ListOffsetsPartition(
                    partition_index=tp.partition,
                    current_leader_epoch=info.leader_epoch if info else -1,
                    timestamp=timestamp,
                )
            )
        return ListOffsetsRequest(
            isolation_level=isolation_level,
            topics=tuple(
                ListOffsetsTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()
            ),
        )


def snapshot_from_response(response: MetadataResponse) -> ClusterSnapshot:
    """A snapshot of everything a Metadata response says."""
    topics: dict[str, tuple[PartitionInfo, ...]] = {}
    errors: dict[str, ErrorCode] = {}
    for topic in response.topics:
        if topic.error_code is not ErrorCode.NONE:
            errors[topic.name] = topic.error_code
            continue
        ordered = sorted(topic.partitions, key=lambda p: p.partition_index)
        topics[topic.name] = tuple(
            PartitionInfo(
                partition=p.partition_index,
                leader_id=p.leader_id if p.error_code is ErrorCode.NONE else -1,
                leader_epoch=p.leader_epoch,
                replicas=p.replica_nodes,
                isr=p.isr_nodes,
                offline_replicas=p.offline_replicas,
            )
            for p in ordered
        )
    return ClusterSnapshot(
        brokers={b.node_id: b.address for b in response.brokers},
        racks={b.node_id: b.rack for b in response.brokers if b.rack},
        topics=topics,
        topic_errors=errors,
        cluster_id=response.cluster_id,
        controller_id=response.controller_id,
    )


@final
class MetadataCache:
    """The current `ClusterSnapshot`, plus when to refresh it.

    Args:
        refresh_backoff_ms: the least time between two refreshes (``retry.backoff.ms``).
        max_age_ms: refresh at least this often (``metadata.max.age.ms``).
    """

    def __init__(self, *, refresh_backoff_ms: int = 100, max_age_ms: int = 300_000) -> None:
        self.snapshot = ClusterSnapshot()
        self.refresh_backoff_ms = refresh_backoff_ms
        self.max_age_ms = max_age_ms
        self._lock = threading.Lock()
        self._topics: set[str] = set()
        self._update_requested = True
        self._last_refresh_ms: int | None = None
        self.version = 0
        """Incremented by every applied response: waiters compare it."""
        self._seen: dict[TopicPartition, tuple[str, PartitionInfo]] = {}
        """The partition info at the newest leader epoch seen, with its topic's id."""

    @property
    def topics(self) -> frozenset[str]:
        """The topics the client uses: what a refresh asks for."""
        return frozenset(self._topics)

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track more topics; True (and an update requested) if any is new."""
        with self._lock:
            new = set(topics) - self._topics
            if new:
                self._topics |= new
                self._update_requested = True
            return bool(new)

    def request_update(self) -> None:
        self._update_requested = True

    def needs_update(self, now_ms: int) -> bool:
        """Should the shell fetch metadata now?"""
        last = self._last_refresh_ms
        if last is None:
            return True
        if now_ms - last < self.refresh_backoff_ms:
            return False
        return self._update_requested or now_ms - last >= self.max_age_ms

    def time_to_next_update_ms(self, now_ms: int) -> int:
        last = self._last_refresh_ms
        if last is None:
            return 0
        if self._update_requested:
            return max(0, last + self.refresh_backoff_ms - now_ms)
        return max(0, last + self.max_age_ms - now_ms)

    def update(self, response: MetadataResponse, now_ms: int) -> ClusterSnapshot:
        """Apply a Metadata response (it replaces the picture of the topics it names, except
        partitions it reports at an older leader epoch than seen before: see the module
        docstring)."""
        fresh = snapshot_from_response(response)
        topic_ids = {t.name: t.topic_id for t in response.topics}
        with self._lock:
            old = self.snapshot
            topics = dict(old.topics)
            errors = dict(old.topic_errors)
            for name in {t.name for t in response.topics}:
                topics.pop(name, None)
                errors.pop(name, None)
            for name, parts in fresh.topics.items():
                topics[name] = tuple(self._newest(name, topic_ids[name], p) for p in parts)
            errors.update(fresh.topic_errors)
            self.snapshot = replace(fresh, topics=topics, topic_errors=errors)
            self._last_refresh_ms = now_ms
            self._update_requested = any(
                p.leader_id < 0 for parts in fresh.topics.values() for p in parts
            ) or any(t in errors for t in self._topics)
            self.version += 1
            return self.snapshot

    def update_leader(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> bool:
        """Apply a KIP-951 leader hint if it is newer than what is cached; True if applied."""
        with self._lock:
            snap = self.snapshot
            info = snap.partition(tp)
            if info is None or leader_epoch <= info.leader_epoch or leader_id < 0:
                return False
            if leader_id not in snap.brokers:
                self._update_requested = True  # a leader we cannot reach yet
                return False
            parts = list(snap.topics[tp.topic])
            parts[tp.partition] = replace(info, leader_id=leader_id, leader_epoch=leader_epoch)
            seen = self._seen.get(tp)
            self._seen[tp] = ("" if seen is None else seen[0], parts[tp.partition])
            self.snapshot = replace(snap, topics={**snap.topics, tp.topic: tuple(parts)})
            self.version += 1
            return True

    def _newest(self, topic: str, topic_id: str, info: PartitionInfo) -> PartitionInfo:
        """``info``, unless it is at an older leader epoch than the newest seen for this
        partition of the same topic id: then that one. KIP-320, as Kafka's
        ``Metadata.updateLatestMetadata`` ("Got metadata for an older epoch ..., not
        updating"); the newest seen survives a response that reported the topic in error."""
        tp = TopicPartition(topic, info.partition)
        seen = self._seen.get(tp)
        if info.leader_epoch < 0:  # no epoch to compare (Kafka: forget the last seen one)
            self._seen.pop(tp, None)
            return info
        if seen is not None and seen[0] == topic_id and info.leader_epoch < seen[1].leader_epoch:
            return seen[1]
        self._seen[tp] = (topic_id, info)
        return info


__all__ = ["ClusterSnapshot", "MetadataCache", "PartitionInfo", "snapshot_from_response"]
