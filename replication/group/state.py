"""The coordinator's persistent state and the fold of one record into it (Kafka's ``replay``).

Every field here is rebuilt from the records alone; timers are not (they are volatile, in the
coordinator). Each record creates what it names if missing and a tombstone never creates, so
replaying a compacted partition (latest value per key, in any order of keys) gives the same
state as replaying the whole history.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    OFFSET_COMMIT,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    Assignment,
    CurrentMemberAssignmentValue,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitValue,
    RecordKey,
    RecordValue,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue,
)
from .types import MemberState

EMPTY: Assignment = ()

INITIAL_EPOCH = 1
"""The group epoch and the assignment epoch of a consumer group that no record has moved yet.
As Kafka 4.4 (``ModernGroup``'s constructor sets the group epoch to 1, and
``TargetAssignmentMetadata.INITIAL`` has epoch 1): in memory only, never written. So the
first member that subscribes to something moves the group to epoch 2, and a member that
subscribes to nothing joins at epoch 1 without a group epoch bump."""


def canonical(parts: Mapping[str, Iterable[int]]) -> Assignment:
    """The one canonical form of an assignment: topics sorted, partitions sorted, no empties."""
    return tuple((topic_id, tuple(sorted(set(ps)))) for topic_id, ps in sorted(parts.items()) if ps)


def as_dict(a: Assignment) -> dict[str, set[int]]:
    return {topic_id: set(ps) for topic_id, ps in a}


def partitions_of(a: Assignment) -> set[tuple[str, int]]:
    return {(topic_id, p) for topic_id, ps in a for p in ps}


@dataclass(slots=True)
class Member:
    """``ConsumerGroupMember``: metadata (record 5) plus current assignment (record 8)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    assigned: Assignment = EMPTY
    pending_revocation: Assignment = EMPTY

    def metadata_value(self) -> MemberMetadataValue:
        return MemberMetadataValue(
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
        )

    def assignment_value(self) -> CurrentMemberAssignmentValue:
        return CurrentMemberAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=self.state.value,
            assigned_partitions=self.assigned,
            partitions_pending_revocation=self.pending_revocation,
        )


@dataclass(slots=True)
class Group:
    """``ConsumerGroup`` plus the group's committed offsets."""

    group_id: str
    has_metadata: bool = False  # a group metadata record exists
    group_epoch: int = INITIAL_EPOCH
    subscription_metadata: tuple[tuple[str, str, int], ...] = ()
    assignment_epoch: int = INITIAL_EPOCH  # a record exists when not INITIAL_EPOCH
    members: dict[str, Member] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    offsets: dict[tuple[str, int], OffsetCommitValue] = field(default_factory=dict)

    def clone(self) -> Group:
        """A copy a write may change (members' fields are immutable values: a shallow copy of
        each member is a deep one)."""
        return Group(
            group_id=self.group_id,
            has_metadata=self.has_metadata,
            group_epoch=self.group_epoch,
            subscription_metadata=self.subscription_metadata,
            assignment_epoch=self.assignment_epoch,
            members={k: copy.copy(m) for k, m in self.members.items()},
            target=dict(self.target),
            offsets=dict(self.offsets),
        )

    def is_vacant(self) -> bool:
        return not (
            self.has_metadata
            or self.assignment_epoch != INITIAL_EPOCH
            or self.members
            or self.target
            or self.offsets
        )

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def partition_owners(self, exclude: str | None = None) -> dict[tuple[str, int], int]:
        """(topic id, partition) -> epoch of the member holding it (assigned or still being
        revoked): Kafka's ``currentPartitionEpoch``. Partitions not in the map are free."""
        owners: dict[tuple[str, int], int] = {}
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            for tp in partitions_of(m.assigned) | partitions_of(m.pending_revocation):
                owners[tp] = m.member_epoch
        return owners


def apply(groups: dict[str, Group], key: RecordKey, value: RecordValue | None) -> None:
    """Fold one decoded record into ``groups`` (one record of any group)."""
    group = groups.get(key.group_id)
    if group is None:
        if value is None:
            return  # a tombstone never creates
        group = groups[key.group_id] = Group(key.group_id)
    apply_to_group(group, key, value)
    if group.is_vacant():
        del groups[key.group_id]


def apply_to_group(group: Group, key: RecordKey, value: RecordValue | None) -> None:
    kind = key.type
    if kind == OFFSET_COMMIT:
        tp = (key.topic, key.partition)
        if value is None:
            group.offsets.pop(tp, None)
        else:
            assert isinstance(value, OffsetCommitValue)
            group.offsets[tp] = value
    elif kind == GROUP_METADATA:
        if value is None:
            group.has_metadata = False
            group.group_epoch = INITIAL_EPOCH
            group.subscription_metadata = ()
        else:
            assert isinstance(value, GroupMetadataValue)
            group.has_metadata = True
            group.group_epoch = value.epoch
            group.subscription_metadata = value.subscription_metadata
    elif kind == TARGET_ASSIGNMENT_METADATA:
        if value is None:
            group.assignment_epoch = INITIAL_EPOCH
        else:
            assert isinstance(value, TargetAssignmentMetadataValue)
            group.assignment_epoch = value.assignment_epoch
    elif kind == TARGET_ASSIGNMENT_MEMBER:
        if value is None:
            group.target.pop(key.member_id, None)
        else:
            assert isinstance(value, TargetAssignmentMemberValue)
            group.target[key.member_id] = value.partitions
    elif kind == MEMBER_METADATA:
        if value is None:
            group.members.pop(key.member_id, None)  # the member leaves for good
            return
        assert isinstance(value, MemberMetadataValue)
        m = group.members.setdefault(key.member_id, Member(key.member_id))
        m.client_id = value.client_id
        m.client_host = value.client_host
        m.subscribed_topic_names = value.subscribed_topic_names
        m.rebalance_timeout_ms = value.rebalance_timeout_ms
        m.server_assignor = value.server_assignor
    elif kind == CURRENT_MEMBER_ASSIGNMENT:
        existing = group.members.get(key.member_id)
        if value is None:
            if existing is not None:  # as Kafka: the member is leaving, its epoch is -1
                existing.member_epoch = -1
                existing.previous_member_epoch = -1
                existing.state = MemberState.UNKNOWN
                existing.assigned = EMPTY
                existing.pending_revocation = EMPTY
            return
        assert isinstance(value, CurrentMemberAssignmentValue)
        m = existing or group.members.setdefault(key.member_id, Member(key.member_id))
        m.member_epoch = value.member_epoch
        m.previous_member_epoch = value.previous_member_epoch
        m.state = MemberState(value.state)
        m.assigned = value.assigned_partitions
        m.pending_revocation = value.partitions_pending_revocation
    else:  # pragma: no cover - decode_key admits only the kinds above
        raise AssertionError(f"unknown record type {kind}")
