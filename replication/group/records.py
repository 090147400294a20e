"""The coordinator's records in ``__consumer_offsets``: keyed, latest-wins, tombstone = None.

One record kind per fact, as Kafka's group coordinator writes them (``CoordinatorRecordType``
numbers kept where kraft has the same record):

====  ==================================  ===========================================
type  key                                 value
====  ==================================  ===========================================
1     offset commit (group, topic, part)  offset, leader epoch, metadata, commit time
3     group metadata (group)              group epoch, subscribed topics' metadata
5     member metadata (group, member)     client id/host, subscription, timeouts
6     target assignment metadata (group)  assignment epoch
7     target assignment member            the member's target partitions
8     current member assignment           epochs, state, assigned, pending revocation
====  ==================================  ===========================================

Kafka keeps the subscribed topics' metadata in a record of its own (type 4); kraft folds it
into the group metadata value, which is what Kafka 4.1 does with its metadata hash.

Encoding: key = 2-byte big-endian type + canonical JSON array of the key fields; value =
2-byte big-endian version + JSON object. Canonical keys make "latest wins per key" (log
compaction) well defined: the same fact always has byte-identical keys.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any, Final

from storage.errors import CorruptRecordError

from .types import MemberState, Record

OFFSET_COMMIT: Final = 1
GROUP_METADATA: Final = 3
MEMBER_METADATA: Final = 5
TARGET_ASSIGNMENT_METADATA: Final = 6
TARGET_ASSIGNMENT_MEMBER: Final = 7
CURRENT_MEMBER_ASSIGNMENT: Final = 8
_TYPES: Final = frozenset(
    {
        OFFSET_COMMIT,
        GROUP_METADATA,
        MEMBER_METADATA,
        TARGET_ASSIGNMENT_METADATA,
        TARGET_ASSIGNMENT_MEMBER,
        CURRENT_MEMBER_ASSIGNMENT,
    }
)
VALUE_VERSION: Final = 0

Assignment = tuple[tuple[str, tuple[int, ...]], ...]
"""Partitions by topic id, sorted by topic id, each tuple sorted: one canonical form."""


@dataclass(frozen=True, slots=True)
class RecordKey:
    type: int
    group_id: str
    member_id: str = ""  # member records
    topic: str = ""  # offset commits
    partition: int = -1  # offset commits


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue:
    epoch: int
    # subscribed topics' metadata at the last epoch bump: (name, topic id, partitions), sorted
    subscription_metadata: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataValue:
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]  # sorted
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetAssignmentMemberValue:
    partitions: Assignment


@dataclass(frozen=True, slots=True, kw_only=True)
class CurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: str  # MemberState.value
    assigned_partitions: Assignment
    partitions_pending_revocation: Assignment


RecordValue = (
    OffsetCommitValue
    | GroupMetadataValue
    | MemberMetadataValue
    | TargetAssignmentMetadataValue
    | TargetAssignmentMemberValue
    | CurrentMemberAssignmentValue
)

_VALUE_TYPES: Final[dict[int, type[RecordValue]]] = {
    OFFSET_COMMIT: OffsetCommitValue,
    GROUP_METADATA: GroupMetadataValue,
    MEMBER_METADATA: MemberMetadataValue,
    TARGET_ASSIGNMENT_METADATA: TargetAssignmentMetadataValue,
    TARGET_ASSIGNMENT_MEMBER: TargetAssignmentMemberValue,
    CURRENT_MEMBER_ASSIGNMENT: CurrentMemberAssignmentValue,
}


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def encode_key(key: RecordKey) -> bytes:
    fields: list[Any]
    if key.type == OFFSET_COMMIT:
        fields = [key.group_id, key.topic, key.partition]
    elif key.type in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT):
        fields = [key.group_id, key.member_id]
    else:
        fields = [key.group_id]
    return struct.pack(">H", key.type) + _dumps(fields)


def decode_key(data: bytes) -> RecordKey:
    try:
        (kind,) = struct.unpack_from(">H", data)
        fields = json.loads(data[2:])
        if kind not in _TYPES or not isinstance(fields, list) or not fields:
            raise ValueError("unknown record type or key")
        if kind == OFFSET_COMMIT:
            group_id, topic, partition = fields
            if not (isinstance(topic, str) and isinstance(partition, int)):
                raise ValueError("bad offset commit key")
            key = RecordKey(kind, group_id, topic=topic, partition=partition)
        elif kind in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT):
            group_id, member_id = fields
            if not isinstance(member_id, str):
                raise ValueError("bad member key")
            key = RecordKey(kind, group_id, member_id=member_id)
        else:
            (group_id,) = fields
            key = RecordKey(kind, group_id)
        if not isinstance(group_id, str):
            raise ValueError("bad group id")
        return key
    except (ValueError, struct.error, TypeError, UnicodeDecodeError) as e:
        raise CorruptRecordError(f"undecodable group record key: {str(e)[:100]}") from e


def _assignment_to_json(a: Assignment) -> list[Any]:
    return [[topic_id, list(parts)] for topic_id, parts in a]


def _assignment_from_json(raw: Any) -> Assignment:
    return tuple((str(t), tuple(int(p) for p in parts)) for t, parts in raw)


def encode_value(value: RecordValue) -> bytes:
    body: dict[str, Any]
    match value:
        case OffsetCommitValue():
            body = {
                "offset": value.offset,
                "leader_epoch": value.leader_epoch,
                "metadata": value.metadata,
                "commit_timestamp_ms": value.commit_timestamp_ms,
            }
        case GroupMetadataValue():
            body = {
                "epoch": value.epoch,
                "subscription_metadata": [list(t) for t in value.subscription_metadata],
            }
        case MemberMetadataValue():
            body = {
                "client_id": value.client_id,
                "client_host": value.client_host,
                "subscribed_topic_names": list(value.subscribed_topic_names),
                "rebalance_timeout_ms": value.rebalance_timeout_ms,
                "server_assignor": value.server_assignor,
            }
        case TargetAssignmentMetadataValue():
            body = {"assignment_epoch": value.assignment_epoch}
        case TargetAssignmentMemberValue():
            body = {"partitions": _assignment_to_json(value.partitions)}
        case CurrentMemberAssignmentValue():
            body = {
                "member_epoch": value.member_epoch,
                "previous_member_epoch": value.previous_member_epoch,
                "state": value.state,
                "assigned_partitions": _assignment_to_json(value.assigned_partitions),
                "partitions_pending_revocation": _assignment_to_json(
                    value.partitions_pending_revocation
                ),
            }
    return struct.pack(">H", VALUE_VERSION) + _dumps(body)


def decode_value(kind: int, data: bytes) -> RecordValue:
    try:
        (version,) = struct.unpack_from(">H", data)
        if version != VALUE_VERSION:
            raise ValueError(f"unknown value version {version}")
        b = json.loads(data[2:])
        value: RecordValue
        if kind == OFFSET_COMMIT:
            value = OffsetCommitValue(
                offset=int(b["offset"]),
                leader_epoch=int(b["leader_epoch"]),
                metadata=str(b["metadata"]),
                commit_timestamp_ms=int(b["commit_timestamp_ms"]),
            )
        elif kind == GROUP_METADATA:
            value = GroupMetadataValue(
                epoch=int(b["epoch"]),
                subscription_metadata=tuple(
                    (str(n), str(i), int(p)) for n, i, p in b["subscription_metadata"]
                ),
            )
        elif kind == MEMBER_METADATA:
            assignor = b["server_assignor"]
            value = MemberMetadataValue(
                client_id=str(b["client_id"]),
                client_host=str(b["client_host"]),
                subscribed_topic_names=tuple(str(t) for t in b["subscribed_topic_names"]),
                rebalance_timeout_ms=int(b["rebalance_timeout_ms"]),
                server_assignor=None if assignor is None else str(assignor),
            )
        elif kind == TARGET_ASSIGNMENT_METADATA:
            value = TargetAssignmentMetadataValue(assignment_epoch=int(b["assignment_epoch"]))
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            value = TargetAssignmentMemberValue(partitions=_assignment_from_json(b["partitions"]))
        elif kind == CURRENT_MEMBER_ASSIGNMENT:
            value = CurrentMemberAssignmentValue(
                member_epoch=int(b["member_epoch"]),
                previous_member_epoch=int(b["previous_member_epoch"]),
                state=MemberState(str(b["state"])).value,
                assigned_partitions=_assignment_from_json(b["assigned_partitions"]),
                partitions_pending_revocation=_assignment_from_json(
                    b["partitions_pending_revocation"]
                ),
            )
        else:
            raise ValueError(f"unknown record type {kind}")
        return value
    except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError) as e:
        raise CorruptRecordError(f"undecodable group record value: {str(e)[:100]}") from e


def record(key: RecordKey, value: RecordValue | None) -> Record:
    """The (key bytes, value bytes or None) pair the shell appends."""
    return encode_key(key), None if value is None else encode_value(value)


def decode(key: bytes, value: bytes | None) -> tuple[RecordKey, RecordValue | None]:
    k = decode_key(key)
    return k, None if value is None else decode_value(k.type, value)
