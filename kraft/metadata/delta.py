"""`MetadataDelta`: replays records on top of an image and builds the next image.

Kafka's ``MetadataDelta`` shape: the delta starts from an immutable base image, copies a map the
first time a record touches it (copy-on-write, once per batch), and `build` freezes the result
into a new `MetadataImage`. The base image is never modified.

Replay is where the record invariants are enforced. A committed record that contradicts the
image (a partition of an unknown topic, an ISR outside the replicas, a stale broker epoch...) is
a controller bug, not an operating error, so it raises `InvariantViolation`: a node must not
keep going with an image that differs from its peers'.
"""

from __future__ import annotations

from dataclasses import replace
from typing import assert_never, final

from kraft.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from kraft.metadata.partition_index import PartitionIndexBuilder
from kraft.metadata.records import (
    NO_LEADER,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    LeaderRecoveryState,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from kraft.security.acls import AclBinding
from storage.errors import InvariantViolation


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise InvariantViolation(message)


def check_partition(p: PartitionRegistration, where: str) -> None:
    """Assert the `PartitionRegistration` invariants.

    NB: on the controller's hot path (every record of a 10,000-partition change), so the
    messages are built only when a check fails.
    """
    replicas, isr, leader = p.replicas, p.isr, p.leader
    replica_set = set(replicas)
    if len(replica_set) != len(replicas):
        raise InvariantViolation(f"{where}: duplicate replicas {replicas}")
    if len(set(isr)) != len(isr):
        raise InvariantViolation(f"{where}: duplicate ISR members {isr}")
    if not replica_set.issuperset(isr):
        raise InvariantViolation(f"{where}: ISR {isr} not within {replicas}")
    if leader != NO_LEADER and leader not in isr:
        raise InvariantViolation(f"{where}: leader {leader} not in ISR {isr}")
    offline = p.offline_replicas
    if offline and (not replica_set.issuperset(offline) or leader in offline):
        raise InvariantViolation(
            f"{where}: offline replicas {offline} not within {replicas} or leading"
        )
    adding, removing = p.adding_replicas, p.removing_replicas
    if (adding or removing) and (
        not replica_set.issuperset(adding)
        or not replica_set.issuperset(removing)
        or not set(adding).isdisjoint(removing)
        or len(set(adding)) != len(adding)
        or len(set(removing)) != len(removing)
        or len(removing) >= len(replicas)
    ):
        raise InvariantViolation(
            f"{where}: adding {adding} / removing {removing} not disjoint subsets of {replicas}"
        )
    # KIP-704: a RECOVERING partition has exactly one ISR member, its (possibly offline) leader
    # (none once ELR moved a fenced last member out of the ISR).
    if p.leader_recovery_state is not LeaderRecoveryState.RECOVERED and not (
        (len(isr) == 1 and leader in (NO_LEADER, isr[0])) or (not isr and leader == NO_LEADER)
    ):
        raise InvariantViolation(
            f"{where}: RECOVERING partition must have ISR == [leader], got {isr}"
        )
    elr, last_known = p.elr, p.last_known_elr
    # KIP-966: the ELR is outside the ISR, and both lists are replicas, without repeats.
    if (elr or last_known) and (
        len(set(elr)) != len(elr)
        or not replica_set.issuperset(elr)
        or not replica_set.issuperset(last_known)
        or not set(elr).isdisjoint(isr)
    ):
        raise InvariantViolation(
            f"{where}: ELR {elr} / last known ELR {last_known} not within {replicas} "
            f"outside ISR {isr}"
        )


def merge_partition_change(
    current: PartitionRegistration, change: PartitionChangeRecord
) -> PartitionRegistration:
    """Kafka's ``PartitionRegistration.merge``: apply a change record to a partition.

    Setting ``leader`` bumps the leader epoch (or sets the ``leader_epoch`` the record names:
    a quorum partition's Raft epoch); every change bumps the partition epoch.
    """
    leader, leader_epoch = current.leader, current.leader_epoch
    if change.leader is not None:
        leader = change.leader
        leader_epoch = (
            current.leader_epoch + 1 if change.leader_epoch is None else change.leader_epoch
        )
    replicas = current.replicas if change.replicas is None else change.replicas
    offline = change.offline_replicas
    if offline is None:
        offline = current.offline_replicas
    elr = (
        current.elr if change.eligible_leader_replicas is None else change.eligible_leader_replicas
    )
    last_known = current.last_known_elr if change.last_known_elr is None else change.last_known_elr
    return PartitionRegistration(
        replicas=replicas,
        isr=current.isr if change.isr is None else change.isr,
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=current.partition_epoch + 1,
        leader_recovery_state=(
            current.leader_recovery_state
            if change.leader_recovery_state is None
            else change.leader_recovery_state
        ),
        # NB: a replica moved off the partition (reassignment) takes its offline mark along.
        offline_replicas=tuple(r for r in offline if r in replicas),
        adding_replicas=(
            current.adding_replicas if change.adding_replicas is None else change.adding_replicas
        ),
        removing_replicas=(
            current.removing_replicas
            if change.removing_replicas is None
            else change.removing_replicas
        ),
        elr=tuple(r for r in elr if r in replicas),
        last_known_elr=tuple(r for r in last_known if r in replicas),
    )


@final
class MetadataDelta:
    """Accumulates records over a base image; `build` returns the resulting image."""

    def __init__(self, base: MetadataImage) -> None:
        self._base = base
        self._brokers: dict[int, BrokerRegistration] | None = None
        self._topics: dict[str, TopicImage] | None = None
        self._names: dict[str, str] | None = None
        # Partition maps copied for this delta, by topic id; folded into _topics by build().
        self._partitions: dict[str, dict[int, PartitionRegistration]] = {}
        self._configs: dict[tuple[ConfigResourceType, str], dict[str, str]] | None = None
        self._next_producer_id = base.next_producer_id
        self._acls: dict[str, AclBinding] | None = None
        self._features: dict[str, int] | None = None
        self._index = PartitionIndexBuilder(base.partition_index)
        self._built = False

    # -- copy-on-write accessors --------------------------------------------------------------

    def _w_brokers(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self._base.brokers)
        return self._brokers

    def _w_topics(self) -> dict[str, TopicImage]:
        if self._topics is None:
            self._topics = dict(self._base.topics_by_id)
        return self._topics

    def _w_names(self) -> dict[str, str]:
        if self._names is None:
            self._names = dict(self._base.topic_ids_by_name)
        return self._names

    def _w_partitions(self, topic_id: str) -> dict[int, PartitionRegistration]:
        partitions = self._partitions.get(topic_id)
        if partitions is None:
            topic = self._w_topics().get(topic_id)
            _check(topic is not None, f"partition of unknown topic id {topic_id}")
            assert topic is not None
            partitions = dict(topic.partitions)
            self._partitions[topic_id] = partitions
        return partitions

    def _w_configs(self) -> dict[tuple[ConfigResourceType, str], dict[str, str]]:
        if self._configs is None:
            self._configs = {k: dict(v) for k, v in self._base.configs.items()}
        return self._configs

    def _w_acls(self) -> dict[str, AclBinding]:
        if self._acls is None:
            self._acls = dict(self._base.acls)
        return self._acls

    def _registration(self, broker_id: int, broker_epoch: int, what: str) -> BrokerRegistration:
        current = self._w_brokers().get(broker_id)
        _check(current is not None, f"{what} for unregistered broker {broker_id}")
        assert current is not None
        _check(
            current.broker_epoch == broker_epoch,
            f"{what} for broker {broker_id} epoch {broker_epoch}, "
            f"registered epoch is {current.broker_epoch}",
        )
        return current

    # -- replay -------------------------------------------------------------------------------

    def replay(self, record: MetadataRecord) -> None:
        """Fold one record into the delta.

        Raises:
            InvariantViolation: the record contradicts the state so far.
        """
        assert not self._built, "a MetadataDelta is single-use: its maps now belong to an image"
        match record:
            case RegisterBrokerRecord():
                self._w_brokers()[record.broker_id] = BrokerRegistration(
                    broker_id=record.broker_id,
                    incarnation_id=record.incarnation_id,
                    broker_epoch=record.broker_epoch,
                    listeners=record.listeners,
                    rack=record.rack,
                    fenced=record.fenced,
                    in_controlled_shutdown=record.in_controlled_shutdown,
                    features=record.features,
                )
            case UnregisterBrokerRecord():
                self._registration(record.broker_id, record.broker_epoch, "unregister")
                del self._w_brokers()[record.broker_id]
            case FenceBrokerRecord() | UnfenceBrokerRecord():
                current = self._registration(record.broker_id, record.broker_epoch, "fence")
                fenced = isinstance(record, FenceBrokerRecord)
                self._w_brokers()[record.broker_id] = replace(current, fenced=fenced)
            case BrokerRegistrationChangeRecord():
                current = self._registration(record.broker_id, record.broker_epoch, "change")
                self._w_brokers()[record.broker_id] = replace(
                    current,
                    fenced=current.fenced if record.fenced is None else record.fenced,
                    in_controlled_shutdown=(
                        current.in_controlled_shutdown
                        if record.in_controlled_shutdown is None
                        else record.in_controlled_shutdown
                    ),
                )
            case TopicRecord():
                _check(record.name not in self._w_names(), f"topic {record.name} exists")
                _check(record.topic_id not in self._w_topics(), f"id {record.topic_id} exists")
                self._w_names()[record.name] = record.topic_id
                self._w_topics()[record.topic_id] = TopicImage(
                    name=record.name, topic_id=record.topic_id, partitions={}
                )
            case PartitionRecord():
                registration = PartitionRegistration(
                    replicas=record.replicas,
                    isr=record.isr,
                    leader=record.leader,
                    leader_epoch=record.leader_epoch,
                    partition_epoch=record.partition_epoch,
                    leader_recovery_state=record.leader_recovery_state,
                    offline_replicas=record.offline_replicas,
                    adding_replicas=record.adding_replicas,
                    removing_replicas=record.removing_replicas,
                    elr=record.eligible_leader_replicas,
                    last_known_elr=record.last_known_elr,
                )
                check_partition(registration, f"{record.topic_id}-{record.partition}")
                partitions = self._w_partitions(record.topic_id)
                self._index.update(
                    (record.topic_id, record.partition),
                    partitions.get(record.partition),
                    registration,
                )
                partitions[record.partition] = registration
            case PartitionChangeRecord():
                partitions = self._w_partitions(record.topic_id)
                current_partition = partitions.get(record.partition)
                where = f"{record.topic_id}-{record.partition}"
                _check(current_partition is not None, f"change to unknown partition {where}")
                assert current_partition is not None
                _check(
                    record.leader_epoch is None
                    or (
                        record.leader is not None
                        and record.leader_epoch >= current_partition.leader_epoch
                    ),
                    f"{where}: leader epoch {record.leader_epoch} without a leader or below "
                    f"{current_partition.leader_epoch}",
                )
                merged = merge_partition_change(current_partition, record)
                check_partition(merged, where)
                self._index.update((record.topic_id, record.partition), current_partition, merged)
                partitions[record.partition] = merged
            case RemoveTopicRecord():
                topic = self._w_topics().pop(record.topic_id, None)
                _check(topic is not None, f"remove of unknown topic id {record.topic_id}")
                assert topic is not None
                del self._w_names()[topic.name]
                written = self._partitions.pop(record.topic_id, None)
                for index, partition in (topic.partitions if written is None else written).items():
                    self._index.update((record.topic_id, index), partition, None)
                self._w_configs().pop((ConfigResourceType.TOPIC, topic.name), None)
            case ConfigRecord():
                key = (record.resource_type, record.resource_name)
                configs = self._w_configs()
                if record.value is None:
                    values = configs.get(key)
                    if values is not None:
                        values.pop(record.name, None)
                        if not values:
                            del configs[key]  # NB: no empty maps, so snapshots compare equal
                else:
                    configs.setdefault(key, {})[record.name] = record.value
            case ProducerIdsRecord():
                _check(
                    record.next_producer_id > self._next_producer_id,
                    f"producer ids went backwards: {record.next_producer_id} "
                    f"<= {self._next_producer_id}",
                )
                self._next_producer_id = record.next_producer_id
            case AccessControlEntryRecord():
                acls = self._w_acls()
                _check(record.acl_id not in acls, f"ACL id {record.acl_id} created twice")
                acls[record.acl_id] = record.binding()
            case RemoveAccessControlEntryRecord():
                removed = self._w_acls().pop(record.acl_id, None)
                _check(removed is not None, f"remove of unknown ACL id {record.acl_id}")
            case FeatureLevelRecord():
                _check(record.feature_level >= 0, f"negative level of {record.name}")
                if self._features is None:
                    self._features = dict(self._base.features)
                self._features[record.name] = record.feature_level
            case NoOpRecord():
                pass
            case _:
                assert_never(record)

    def build(self, *, last_offset: int, last_epoch: int) -> MetadataImage:
        """The image with every replayed record applied (call once)."""
        assert not self._built, "a MetadataDelta is single-use"
        self._built = True
        base = self._base
        topics: dict[str, TopicImage] | None = self._topics
        if self._partitions:
            topics = self._w_topics()
            for topic_id, partitions in self._partitions.items():
                topics[topic_id] = replace(topics[topic_id], partitions=partitions)
        return MetadataImage(
            brokers=base.brokers if self._brokers is None else self._brokers,
            topics_by_id=base.topics_by_id if topics is None else topics,
            topic_ids_by_name=base.topic_ids_by_name if self._names is None else self._names,
            configs=base.configs if self._configs is None else self._configs,
            next_producer_id=self._next_producer_id,
            acls=base.acls if self._acls is None else self._acls,
            features=base.features if self._features is None else self._features,
            features_epoch=base.features_epoch if self._features is None else last_offset,
            last_offset=last_offset,
            last_epoch=last_epoch,
            index=self._index.build(),
        )


__all__ = ["MetadataDelta", "check_partition", "merge_partition_change"]
