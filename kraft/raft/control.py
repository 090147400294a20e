"""Control batches the Raft core writes itself (KIP-595 ``LeaderChangeMessage``).

A new leader opens its epoch with a leader-change control batch: its offset is the epoch's
start offset, and nothing commits until a majority has fetched past it (Raft §5.4.2, the
no-op entry of Raft thesis §6.4). Key: version (int16) and control type (int16, 2 = leader
change), as in Kafka's ``ControlRecordType``; value: version, leader id and voter ids.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kraft.types import Epoch, NodeId, Offset
from storage.records import SimpleRecord, build_batch, iter_records, read_header

LEADER_CHANGE_TYPE = 2
_KEY = struct.Struct(">hh")
_VALUE_HEAD = struct.Struct(">hii")  # version, leader id, voter count


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderChange:
    leader_id: NodeId
    voters: tuple[NodeId, ...]


def build_leader_change_batch(
    *, epoch: Epoch, leader_id: NodeId, voters: frozenset[NodeId], base_offset: Offset, now_ms: int
) -> bytes:
    ids = sorted(voters)
    value = _VALUE_HEAD.pack(0, leader_id, len(ids)) + b"".join(struct.pack(">i", v) for v in ids)
    record = SimpleRecord(key=_KEY.pack(0, LEADER_CHANGE_TYPE), value=value)
    return build_batch(
        [record],
        timestamp_ms=now_ms,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        is_control=True,
    )


def parse_leader_change(batch: bytes) -> LeaderChange | None:
    """The leader change in a control batch, or None for any other batch."""
    if not read_header(batch).is_control:
        return None
    for record in iter_records(batch):
        if record.key is None or record.value is None or len(record.key) != _KEY.size:
            continue
        _, kind = _KEY.unpack(record.key)
        if kind != LEADER_CHANGE_TYPE:
            continue
        _, leader, count = _VALUE_HEAD.unpack_from(record.value)
        voters = struct.unpack_from(f">{count}i", record.value, _VALUE_HEAD.size)
        return LeaderChange(leader_id=NodeId(leader), voters=tuple(NodeId(v) for v in voters))
    return None


__all__ = ["LeaderChange", "build_leader_change_batch", "parse_leader_change"]
