"""Metadata records: the entries of the controller's Raft log (KIP-631).

Every change to cluster metadata is one of these records; the `MetadataImage` is their fold.
The active controller *produces* them (always in atomic batches, see `kraft.controller`), Raft
replicates them, and every controller and broker *replays* them in log order.

The records follow Kafka's ``metadata/src/main/resources/common/metadata/*.json`` schemas, with
Kafka's ``apiKey`` as the type tag (`RECORD_TYPE_IDS`) and snake_case field names. Differences:

- "no change" in `PartitionChangeRecord` is ``None`` instead of Kafka's sentinels (-2 for the
  leader, a null array for the ISR);
- `FenceBrokerRecord` / `UnfenceBrokerRecord` exist as in KIP-631, but the controller writes
  `BrokerRegistrationChangeRecord` (KIP-841 era), which can also flip ``in_controlled_shutdown``.

Invariant (checked by the image on replay): a `PartitionChangeRecord` that sets ``leader`` bumps
the leader epoch, and *every* `PartitionChangeRecord` bumps the partition epoch (KIP-380's
"partition epoch", KIP-841 relies on it to reject stale AlterPartition requests).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, TypeAlias

from kraft.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

NO_LEADER: Final = -1
"""``leader`` of an offline partition (Kafka's ``LeaderConstants.NO_LEADER``)."""


class LeaderRecoveryState(enum.IntEnum):
    """KIP-704: a leader elected uncleanly is RECOVERING until it tells the controller otherwise.

    While RECOVERING the ISR is exactly ``[leader]`` and may not grow; the leader sends an
    AlterPartition with RECOVERED once its log is consistent again.
    """

    RECOVERED = 0
    RECOVERING = 1


class ConfigResourceType(enum.IntEnum):
    """Kafka's ``ConfigResource.Type`` numbers."""

    TOPIC = 2
    BROKER = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """One broker listener (KIP-631 ``RegisterBrokerRecord.EndPoints``)."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerFeature:
    """A feature level range a broker runs (KIP-584; ``RegisterBrokerRecord.Features``): the
    controller finalizes no level outside the range of any registered broker."""

    name: str
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRecord:
    """A broker (re-)registered. ``broker_epoch`` is the offset of this record in the metadata log,
    so a new incarnation always gets a larger epoch (KIP-631). Brokers register fenced."""

    broker_id: int
    incarnation_id: str
    broker_epoch: int
    listeners: tuple[Endpoint, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    features: tuple[BrokerFeature, ...] = ()
    """The feature ranges it runs (none: a broker of a version without them, which Kafka takes
    as supporting level 0 only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerRecord:
    """A broker was removed from the cluster (only the matching epoch is removed)."""

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FenceBrokerRecord:
    """KIP-631's fence record; kept for compatibility, the controller writes
    `BrokerRegistrationChangeRecord` instead."""

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UnfenceBrokerRecord:
    """KIP-631's unfence record; see `FenceBrokerRecord`."""

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationChangeRecord:
    """A registered broker's fenced / controlled-shutdown flags changed (``None`` = unchanged)."""

    broker_id: int
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord:
    """A topic was created; its partitions follow as `PartitionRecord` in the same batch."""

    name: str
    topic_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRecord:
    """The full state of one partition (creation, and in snapshots)."""

    topic_id: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    offline_replicas: tuple[int, ...] = ()
    """Replicas whose broker reported their log offline (see `PartitionChangeRecord`)."""
    adding_replicas: tuple[int, ...] = ()
    """KIP-455: the replicas a reassignment in progress adds (a subset of ``replicas``)."""
    removing_replicas: tuple[int, ...] = ()
    """KIP-455: the replicas a reassignment in progress removes (a subset of ``replicas``)."""
    eligible_leader_replicas: tuple[int, ...] = ()
    """KIP-966's ELR: replicas outside the ISR that still hold every committed record (see
    `kraft.controller.eligible_leaders`)."""
    last_known_elr: tuple[int, ...] = ()
    """KIP-966's LastKnownElr: the last leader of a partition whose ISR and ELR emptied."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionChangeRecord:
    """A delta to one partition; ``None`` fields are unchanged.

    Setting ``leader`` (even to the same broker, or to `NO_LEADER`) bumps the leader epoch; every
    change record bumps the partition epoch.
    """

    topic_id: str
    partition: int
    isr: tuple[int, ...] | None = None
    leader: int | None = None
    replicas: tuple[int, ...] | None = None
    leader_recovery_state: LeaderRecoveryState | None = None
    offline_replicas: tuple[int, ...] | None = None
    """The replicas whose broker reports their log offline (a disk error): they may not lead
    and leave the ISR (KIP-858's offline log directories, kept per replica here)."""
    adding_replicas: tuple[int, ...] | None = None
    """KIP-455: the replicas a reassignment adds (``()``: none, the reassignment ended)."""
    removing_replicas: tuple[int, ...] | None = None
    """KIP-455: the replicas a reassignment removes (``()``: none)."""
    leader_epoch: int | None = None
    """Quorum-mode partitions only, with ``leader``: the leader epoch to record instead of a
    bump, the Raft epoch the leader won (never below the current one). The Raft group, not the
    controller, numbers a quorum partition's epochs."""
    eligible_leader_replicas: tuple[int, ...] | None = None
    """KIP-966: the new ELR (see `PartitionRecord`)."""
    last_known_elr: tuple[int, ...] | None = None
    """KIP-966: the new LastKnownElr (see `PartitionRecord`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveTopicRecord:
    """A topic was deleted, with its partitions and its configs."""

    topic_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRecord:
    """A dynamic config was set (``value``) or deleted (``value is None``).

    For brokers, ``resource_name`` is the broker id as a string, or ``""`` for the cluster-wide
    default (Kafka's convention).
    """

    resource_type: ConfigResourceType
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdsRecord:
    """A block of producer ids was handed to a broker; ``next_producer_id`` is the first id of the
    next block (KIP-730)."""

    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureLevelRecord:
    """A feature's finalized level (Kafka's ``FeatureLevelRecord``, KIP-584/KIP-778): the
    active controller writes it for a new cluster (`kraft.controller.periodic`) and on
    UpdateFeatures (`kraft.controller.feature_control`); brokers advertise the finalized levels
    in ApiVersions. Level 0 leaves the feature finalized at 0 (off)."""

    name: str
    feature_level: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NoOpRecord:
    """Changes nothing; lets a new leader commit an entry of its own epoch (KIP-835)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessControlEntryRecord:
    """An ACL was created (Kafka's ``AccessControlEntryRecord``, KIP-801); ``acl_id`` (a UUID)
    names it for its removal. ACLs live in the log, so every controller and broker authorizes
    with the same set (`kraft.security.authorizer`)."""

    acl_id: str
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    @staticmethod
    def of(acl_id: str, binding: AclBinding) -> AccessControlEntryRecord:
        return AccessControlEntryRecord(
            acl_id=acl_id,
            resource_type=binding.resource_type,
            resource_name=binding.resource_name,
            pattern_type=binding.pattern_type,
            principal=binding.principal,
            host=binding.host,
            operation=binding.operation,
            permission_type=binding.permission_type,
        )

    def binding(self) -> AclBinding:
        return AclBinding(
            resource_type=self.resource_type,
            resource_name=self.resource_name,
            pattern_type=self.pattern_type,
            principal=self.principal,
            host=self.host,
            operation=self.operation,
            permission_type=self.permission_type,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveAccessControlEntryRecord:
    """The ACL ``acl_id`` was deleted (Kafka's ``RemoveAccessControlEntryRecord``)."""

    acl_id: str


MetadataRecord: TypeAlias = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | BrokerRegistrationChangeRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | ConfigRecord
    | ProducerIdsRecord
    | FeatureLevelRecord
    | NoOpRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
)

RECORD_TYPE_IDS: Final[dict[type[MetadataRecord], int]] = {
    # Kafka's MetadataRecordType apiKeys (metadata/src/main/resources/common/metadata).
    RegisterBrokerRecord: 0,
    UnregisterBrokerRecord: 1,
    TopicRecord: 2,
    PartitionRecord: 3,
    ConfigRecord: 4,
    PartitionChangeRecord: 5,
    FenceBrokerRecord: 7,
    UnfenceBrokerRecord: 8,
    RemoveTopicRecord: 9,
    FeatureLevelRecord: 12,
    ProducerIdsRecord: 15,
    BrokerRegistrationChangeRecord: 17,
    AccessControlEntryRecord: 18,
    RemoveAccessControlEntryRecord: 19,
    NoOpRecord: 20,
}

RECORD_TYPES_BY_ID: Final[dict[int, type[MetadataRecord]]] = {
    type_id: cls for cls, type_id in RECORD_TYPE_IDS.items()
}

__all__ = [
    "NO_LEADER",
    "RECORD_TYPES_BY_ID",
    "RECORD_TYPE_IDS",
    "AccessControlEntryRecord",
    "BrokerFeature",
    "BrokerRegistrationChangeRecord",
    "ConfigRecord",
    "ConfigResourceType",
    "Endpoint",
    "FeatureLevelRecord",
    "FenceBrokerRecord",
    "LeaderRecoveryState",
    "MetadataRecord",
    "NoOpRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "RegisterBrokerRecord",
    "RemoveAccessControlEntryRecord",
    "RemoveTopicRecord",
    "TopicRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
]
