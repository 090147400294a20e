"""`MetadataImage`: the cluster metadata as the fold of the metadata log (KIP-631).

Theory of operation
-------------------
The image is **immutable**. ``image.apply(record, offset)`` returns a *new* image and leaves the
old one untouched; unchanged parts (brokers, untouched topics and their partition maps) are
shared between the two, so keeping an old image around is free. This is what lets the
controller hold a *committed* image and a *pending* one (committed + its not-yet-committed
records) and roll back on a leader change by dropping a reference (see `kraft.controller`).

Batches are applied through a `MetadataDelta` (``kraft.metadata.delta``), which copies each
touched map once per batch, so ``apply_batch`` of n records costs O(touched state), not
O(n x image), just like Kafka's ``MetadataDelta`` -> ``MetadataImage``.

Nothing in the image may be mutated after construction: mappings are typed `Mapping` and are
owned by exactly one image (or shared read-only).

Snapshots (KIP-630) are the image written back as records: ``to_records()`` gives the minimal
record list that rebuilds the image, and ``to_snapshot()`` wraps them with the offset and epoch
of the last applied record. ``MetadataImage.from_snapshot(image.to_snapshot()) == image``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kraft.metadata.codec import record_from_dict, record_to_dict
from kraft.metadata.configs import CLUSTER_DEFAULT_RESOURCE, TOPIC_CONFIGS, resolve_topic_configs
from kraft.metadata.partition_index import PartitionIndex
from kraft.metadata.records import (
    NO_LEADER,
    AccessControlEntryRecord,
    BrokerFeature,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    LeaderRecoveryState,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from kraft.security.acls import AclBinding
from kraft.types import TopicPartition
from storage.errors import InvalidRecordError, UnsupportedVersionError

SNAPSHOT_FORMAT_VERSION: Final = 1


class BrokerState(enum.Enum):
    """A registered broker's lifecycle state as the image sees it (Kafka's BrokerRegistration)."""

    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistration:
    """One registered broker."""

    broker_id: int
    incarnation_id: str
    broker_epoch: int
    listeners: tuple[Endpoint, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    features: tuple[BrokerFeature, ...] = ()
    """The feature ranges it registered with (KIP-584)."""

    @property
    def state(self) -> BrokerState:
        if self.fenced:
            return BrokerState.FENCED
        if self.in_controlled_shutdown:
            return BrokerState.CONTROLLED_SHUTDOWN
        return BrokerState.UNFENCED

    @property
    def is_active(self) -> bool:
        """Unfenced and not shutting down: may lead, may join an ISR (KIP-841)."""
        return not self.fenced and not self.in_controlled_shutdown

    @property
    def address(self) -> str:
        """``host:port`` of the first listener, or ``""`` when it declared none."""
        return self.listeners[0].address if self.listeners else ""

    def endpoint(self, listener: str = "") -> Endpoint | None:
        """The endpoint named ``listener``, or the first (inter-broker) one when it is empty."""
        if not listener:
            return self.listeners[0] if self.listeners else None
        return next((e for e in self.listeners if e.name == listener), None)

    def to_record(self) -> RegisterBrokerRecord:
        return RegisterBrokerRecord(
            broker_id=self.broker_id,
            incarnation_id=self.incarnation_id,
            broker_epoch=self.broker_epoch,
            listeners=self.listeners,
            rack=self.rack,
            fenced=self.fenced,
            in_controlled_shutdown=self.in_controlled_shutdown,
            features=self.features,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRegistration:
    """One partition's replication state, owned by the controller.

    Invariants: ``isr`` is a duplicate-free subset of ``replicas``; ``leader`` is `NO_LEADER`
    or a member of ``isr``; while RECOVERING (KIP-704) the ISR is one broker, the leader (which may
    be offline). ``offline_replicas`` (a subset of ``replicas``) holds the replicas whose broker
    reports their log offline after a disk error; the leader is never one of them, and one is
    in the ISR only as its last member (KIP-841's rule for fenced brokers).

    KIP-966: ``elr`` (eligible leader replicas) holds replicas outside the ISR that have every
    committed record (they left the ISR while it was below ``min.insync.replicas``, so the
    high watermark could not move past them); it is disjoint from the ISR. With ELR the ISR
    may be empty (its last member moved to the ELR). ``last_known_elr`` is the last leader
    of a partition whose ISR emptied, elected again only when ISR and ELR are both empty.
    Both are subsets of ``replicas`` (`kraft.controller.eligible_leaders`).
    """

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    offline_replicas: tuple[int, ...] = ()
    # KIP-455: a reassignment in progress. ``replicas`` is then the union of the original and
    # the target replicas (target first); the target is ``replicas`` minus ``removing_replicas``,
    # the original is ``replicas`` minus ``adding_replicas`` (`kraft.controller.reassignment`).
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @property
    def is_online(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    @property
    def is_reassigning(self) -> bool:
        """A reassignment (KIP-455) is in progress."""
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment in progress completes (``replicas`` if none)."""
        removing = self.removing_replicas
        return tuple(r for r in self.replicas if r not in removing) if removing else self.replicas

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment in progress (``replicas`` if none)."""
        adding = self.adding_replicas
        return tuple(r for r in self.replicas if r not in adding) if adding else self.replicas

    def to_record(self, topic_id: str, partition: int) -> PartitionRecord:
        return PartitionRecord(
            topic_id=topic_id,
            partition=partition,
            replicas=self.replicas,
            isr=self.isr,
            leader=self.leader,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            leader_recovery_state=self.leader_recovery_state,
            offline_replicas=self.offline_replicas,
            adding_replicas=self.adding_replicas,
            removing_replicas=self.removing_replicas,
            eligible_leader_replicas=self.elr,
            last_known_elr=self.last_known_elr,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionDescription:
    """What a client needs to route to a partition (the Metadata API's partition entry)."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    """KIP-455: the replicas a reassignment in progress adds."""
    removing_replicas: tuple[int, ...] = ()
    """KIP-455: the replicas a reassignment in progress removes."""
    elr: tuple[int, ...] = ()
    """KIP-966's eligible leader replicas (kafka-topics' ``Elr``)."""
    last_known_elr: tuple[int, ...] = ()
    """KIP-966's ``LastKnownElr``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: tuple[PartitionDescription, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataImage:
    """The cluster metadata as of ``last_offset``; build one with `MetadataImage.empty()`."""

    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics_by_id: Mapping[str, TopicImage] = field(default_factory=dict)
    topic_ids_by_name: Mapping[str, str] = field(default_factory=dict)
    configs: Mapping[tuple[ConfigResourceType, str], Mapping[str, str]] = field(
        default_factory=dict
    )
    next_producer_id: int = 0
    acls: Mapping[str, AclBinding] = field(default_factory=dict)
    """Every ACL by its id (KIP-801's StandardAuthorizer data)."""
    features: Mapping[str, int] = field(default_factory=dict)
    """The finalized feature levels (KIP-584), by feature name (`FeatureLevelRecord`)."""
    features_epoch: int = field(default=-1, compare=False)
    """ApiVersions' ``finalized_features_epoch``: the last offset of the batch that last
    changed ``features`` (-1 before any; an image loaded from a snapshot takes the snapshot's
    offset, a later one: clients only compare epochs to see a change)."""
    # The offset and epoch of the last applied record (-1 before the first one).
    last_offset: int = -1
    last_epoch: int = -1
    index: PartitionIndex | None = field(default=None, compare=False, repr=False)
    """Partitions by broker (`kraft.metadata.partition_index`), derived from ``topics_by_id``:
    kept by `MetadataDelta`, or built on first use (`partition_index`) for an image made
    directly."""

    @staticmethod
    def empty() -> MetadataImage:
        return MetadataImage()

    @property
    def partition_index(self) -> PartitionIndex:
        """Which partitions each broker leads, is in the ISR / ELR / offline replicas of, and
        the leaderless and reassigning ones (`kraft.metadata.partition_index`)."""
        index = self.index
        if index is None:
            index = PartitionIndex.of(self.topics_by_id)
            object.__setattr__(self, "index", index)  # NB: derived state, built once
        return index

    # -- applying records ---------------------------------------------------------------------

    def apply(self, record: MetadataRecord, offset: int, epoch: int | None = None) -> MetadataImage:
        """The image after ``record`` (committed at ``offset`` in ``epoch``).

        Raises:
            InvariantViolation: the record contradicts the image (a controller bug).
        """
        return self.apply_batch((record,), base_offset=offset, epoch=epoch)

    def apply_batch(
        self, records: Sequence[MetadataRecord], base_offset: int, epoch: int | None = None
    ) -> MetadataImage:
        """The image after ``records``, which sit at ``base_offset``, ``base_offset + 1``, ..."""
        # NB: imported here because delta.py builds MetadataImage objects (an import cycle).
        from kraft.metadata.delta import MetadataDelta

        if not records:
            return self
        assert base_offset > self.last_offset, (base_offset, self.last_offset)
        delta = MetadataDelta(self)
        for record in records:
            delta.replay(record)
        return delta.build(
            last_offset=base_offset + len(records) - 1,
            last_epoch=self.last_epoch if epoch is None else epoch,
        )

    # -- brokers ------------------------------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def is_active_broker(self, broker_id: int) -> bool:
        """Registered, unfenced and not in controlled shutdown (an eligible leader/ISR member)."""
        registration = self.brokers.get(broker_id)
        return registration is not None and registration.is_active

    def active_broker_ids(self) -> list[int]:
        return sorted(b for b, reg in self.brokers.items() if reg.is_active)

    def unfenced_broker_ids(self) -> list[int]:
        return sorted(b for b, reg in self.brokers.items() if not reg.fenced)

    # -- topics and partitions ----------------------------------------------------------------

    def topic(self, name: str) -> TopicImage | None:
        topic_id = self.topic_ids_by_name.get(name)
        return None if topic_id is None else self.topics_by_id[topic_id]

    def topic_by_id(self, topic_id: str) -> TopicImage | None:
        return self.topics_by_id.get(topic_id)

    def partition(self, topic_id: str, partition: int) -> PartitionRegistration | None:
        topic = self.topics_by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition)

    def partition_by_name(self, tp: TopicPartition) -> PartitionRegistration | None:
        topic = self.topic(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def iter_partitions(self) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
        """Every partition, topics by name and partitions by index (a deterministic order)."""
        for name in sorted(self.topic_ids_by_name):
            topic = self.topics_by_id[self.topic_ids_by_name[name]]
            for index in sorted(topic.partitions):
                yield topic, index, topic.partitions[index]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return self._named(self.partition_index.led_by(broker_id))

    def offline_partitions(self) -> list[TopicPartition]:
        """Partitions without a leader (Kafka's OfflinePartitionsCount)."""
        return self._named(self.partition_index.leaderless())

    def _named(self, keys: Iterable[tuple[str, int]]) -> list[TopicPartition]:
        """Index keys as topic partitions, in `iter_partitions` order."""
        topics = self.topics_by_id
        return sorted(TopicPartition(topics[t].name, i) for t, i in keys)

    def describe_topic(self, name: str) -> TopicDescription | None:
        """Leader, leader epoch, replicas and ISR of every partition of ``name``."""
        topic = self.topic(name)
        if topic is None:
            return None
        partitions = tuple(
            PartitionDescription(
                partition=index,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                replicas=p.replicas,
                isr=p.isr,
                offline_replicas=tuple(
                    r for r in p.replicas if not self._is_unfenced(r) or r in p.offline_replicas
                ),
                adding_replicas=p.adding_replicas,
                removing_replicas=p.removing_replicas,
                elr=p.elr,
                last_known_elr=p.last_known_elr,
            )
            for index, p in sorted(topic.partitions.items())
        )
        return TopicDescription(name=topic.name, topic_id=topic.topic_id, partitions=partitions)

    def describe_topics(self) -> list[TopicDescription]:
        out = []
        for name in sorted(self.topic_ids_by_name):
            description = self.describe_topic(name)
            assert description is not None
            out.append(description)
        return out

    def _is_unfenced(self, broker_id: int) -> bool:
        registration = self.brokers.get(broker_id)
        return registration is not None and not registration.fenced

    # -- configs ------------------------------------------------------------------------------

    def dynamic_configs(self, resource_type: ConfigResourceType, name: str) -> Mapping[str, str]:
        """The explicitly set configs of one resource (no defaults)."""
        return self.configs.get((resource_type, name), {})

    def topic_configs(self, name: str) -> dict[str, str]:
        """Every topic config key with its effective value (see `kraft.metadata.configs`)."""
        return resolve_topic_configs(
            self.dynamic_configs(ConfigResourceType.TOPIC, name),
            self.dynamic_configs(ConfigResourceType.BROKER, CLUSTER_DEFAULT_RESOURCE),
        )

    def topic_config(self, name: str, key: str) -> str:
        """One effective topic config value, e.g. ``topic_config("t", "min.insync.replicas")``
        (the same precedence as `topic_configs`, without resolving every key: elections ask
        this once per partition).

        Raises:
            KeyError: ``key`` is not a topic config.
        """
        own = self.dynamic_configs(ConfigResourceType.TOPIC, name).get(key)
        if own is not None:
            return own
        definition = TOPIC_CONFIGS[key]
        if definition.synonym is not None:
            cluster = self.dynamic_configs(ConfigResourceType.BROKER, CLUSTER_DEFAULT_RESOURCE)
            value = cluster.get(definition.synonym)
            if value is not None:
                return value
        assert definition.default is not None, key
        return definition.default

    # -- snapshots (KIP-630) ------------------------------------------------------------------

    def to_records(self) -> list[MetadataRecord]:
        """The records that rebuild this image from empty, in a deterministic order."""
        records: list[MetadataRecord] = [self.brokers[b].to_record() for b in sorted(self.brokers)]
        for name in sorted(self.topic_ids_by_name):
            topic = self.topics_by_id[self.topic_ids_by_name[name]]
            records.append(TopicRecord(name=topic.name, topic_id=topic.topic_id))
            records.extend(
                topic.partitions[i].to_record(topic.topic_id, i) for i in sorted(topic.partitions)
            )
        for (resource_type, resource_name), values in sorted(self.configs.items()):
            records.extend(
                ConfigRecord(
                    resource_type=resource_type,
                    resource_name=resource_name,
                    name=key,
                    value=values[key],
                )
                for key in sorted(values)
            )
        records.extend(
            AccessControlEntryRecord.of(acl_id, self.acls[acl_id]) for acl_id in sorted(self.acls)
        )
        records.extend(
            FeatureLevelRecord(name=name, feature_level=level)
            for name, level in sorted(self.features.items())
        )
        if self.next_producer_id:
            records.append(
                ProducerIdsRecord(
                    broker_id=-1, broker_epoch=-1, next_producer_id=self.next_producer_id
                )
            )
        return records

    def to_snapshot(self) -> bytes:
        """Serialize the image; `from_snapshot` inverts it exactly."""
        doc: dict[str, Any] = {
            "format": SNAPSHOT_FORMAT_VERSION,
            "last_offset": self.last_offset,
            "last_epoch": self.last_epoch,
            "records": [record_to_dict(r) for r in self.to_records()],
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @staticmethod
    def from_snapshot(data: bytes) -> MetadataImage:
        """Rebuild an image written by `to_snapshot`.

        Raises:
            InvalidRecordError: the bytes are not a snapshot or hold a malformed record.
            UnsupportedVersionError: the snapshot format is newer than this code.
        """
        from kraft.metadata.delta import MetadataDelta

        try:
            doc = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidRecordError(f"metadata snapshot is not valid JSON: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
            raise InvalidRecordError("metadata snapshot must be an object with a records list")
        if doc.get("format") != SNAPSHOT_FORMAT_VERSION:
            raise UnsupportedVersionError(f"unknown snapshot format {doc.get('format')!r}")
        last_offset, last_epoch = doc.get("last_offset"), doc.get("last_epoch")
        if not isinstance(last_offset, int) or not isinstance(last_epoch, int):
            raise InvalidRecordError("metadata snapshot has no last_offset/last_epoch")
        delta = MetadataDelta(MetadataImage.empty())
        for raw in doc["records"]:
            if not isinstance(raw, dict):
                raise InvalidRecordError("metadata snapshot record must be an object")
            delta.replay(record_from_dict(raw))
        return delta.build(last_offset=last_offset, last_epoch=last_epoch)


__all__ = [
    "SNAPSHOT_FORMAT_VERSION",
    "BrokerRegistration",
    "BrokerState",
    "MetadataImage",
    "PartitionDescription",
    "PartitionRegistration",
    "TopicDescription",
    "TopicImage",
]
