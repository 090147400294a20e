"""The classic group's one record in ``__consumer_offsets``: the group metadata (type 2).

Like Kafka's ``GroupMetadataKey``/``GroupMetadataValue``: one record per group, keyed by the
group id, latest wins, a tombstone deletes the group. Its key uses the encoding of
`replication.group.records` (2-byte big-endian type + canonical JSON array of the key
fields), so the two coordinators' records share one partition and one compaction rule;
`is_classic_record` tells the shell which coordinator replays a record.

The value is kraft's own (JSON after a 2-byte version; bytes as base64). It differs from
Kafka's in two ways, both so that a replay rebuilds exactly what the coordinator had:

* it carries the group ``state`` (Empty, CompletingRebalance or Stable): kraft writes the
  record when a join phase completes too, not only when the leader's assignment is stored,
  so a new coordinator resumes a generation that was handed out and never reuses its id;
* it keeps every protocol a member offered, not only the chosen one's subscription.
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass
from typing import Any, Final

from storage.errors import CorruptRecordError

from .types import ClassicGroupState, Protocol, Record

CLASSIC_GROUP_METADATA: Final = 2
VALUE_VERSION: Final = 0
PERSISTED_STATES: Final = frozenset(
    {
        ClassicGroupState.EMPTY,
        ClassicGroupState.COMPLETING_REBALANCE,
        ClassicGroupState.STABLE,
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: tuple[Protocol, ...]
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupValue:
    """The persisted image of a group (members sorted by member id)."""

    protocol_type: str | None
    generation_id: int
    protocol_name: str | None
    leader: str | None
    state: ClassicGroupState
    state_timestamp_ms: int
    members: tuple[MemberValue, ...]

    def __post_init__(self) -> None:
        assert self.state in PERSISTED_STATES, self.state


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise ValueError("bytes must be base64 text")
    return base64.b64decode(text.encode("ascii"), validate=True)


def _opt_str(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("expected a string or null")
    return value


def encode_key(group_id: str) -> bytes:
    return struct.pack(">H", CLASSIC_GROUP_METADATA) + _dumps([group_id])


def is_classic_record(key: bytes) -> bool:
    """Whether a record of ``__consumer_offsets`` is the classic coordinator's to replay."""
    return len(key) >= 2 and struct.unpack_from(">H", key)[0] == CLASSIC_GROUP_METADATA


def decode_key(key: bytes) -> str:
    """The group id of a classic record key (CorruptRecordError if it is not one)."""
    try:
        if not is_classic_record(key):
            raise ValueError("not a classic group record")
        fields = json.loads(key[2:])
        if not (isinstance(fields, list) and len(fields) == 1 and isinstance(fields[0], str)):
            raise ValueError("bad group key")
        return fields[0]
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptRecordError(f"undecodable classic group key: {str(e)[:100]}") from e


def encode_value(value: GroupValue) -> bytes:
    body = {
        "protocol_type": value.protocol_type,
        "generation_id": value.generation_id,
        "protocol_name": value.protocol_name,
        "leader": value.leader,
        "state": value.state.value,
        "state_timestamp_ms": value.state_timestamp_ms,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "session_timeout_ms": m.session_timeout_ms,
                "protocols": [[p.name, _b64(p.metadata)] for p in m.protocols],
                "assignment": _b64(m.assignment),
            }
            for m in value.members
        ],
    }
    return struct.pack(">H", VALUE_VERSION) + _dumps(body)


def decode_value(data: bytes) -> GroupValue:
    try:
        (version,) = struct.unpack_from(">H", data)
        if version != VALUE_VERSION:
            raise ValueError(f"unknown value version {version}")
        b = json.loads(data[2:])
        members = tuple(
            MemberValue(
                member_id=str(m["member_id"]),
                group_instance_id=_opt_str(m["group_instance_id"]),
                client_id=str(m["client_id"]),
                client_host=str(m["client_host"]),
                rebalance_timeout_ms=int(m["rebalance_timeout_ms"]),
                session_timeout_ms=int(m["session_timeout_ms"]),
                protocols=tuple(
                    Protocol(name=str(name), metadata=_unb64(meta)) for name, meta in m["protocols"]
                ),
                assignment=_unb64(m["assignment"]),
            )
            for m in b["members"]
        )
        state = ClassicGroupState(b["state"])
        if state not in PERSISTED_STATES:
            raise ValueError(f"state {state.value} is never persisted")
        return GroupValue(
            protocol_type=_opt_str(b["protocol_type"]),
            generation_id=int(b["generation_id"]),
            protocol_name=_opt_str(b["protocol_name"]),
            leader=_opt_str(b["leader"]),
            state=state,
            state_timestamp_ms=int(b["state_timestamp_ms"]),
            members=members,
        )
    except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError) as e:
        raise CorruptRecordError(f"undecodable classic group value: {str(e)[:100]}") from e


def record(group_id: str, value: GroupValue | None) -> Record:
    """The (key, value or None) pair the shell appends."""
    return encode_key(group_id), None if value is None else encode_value(value)
