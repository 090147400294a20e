"""Transactional offset commits (KIP-98 TxnOffsetCommit, KIP-447): offsets a transactional
producer commits for a group, pending until its transaction ends.

A TxnOffsetCommit is validated as an OffsetCommit is (the group's generation or member epoch and
member id, KIP-447) and its offset records are written as *pending* records of the producer:
the offset commit's own key behind a prefix of type `PENDING_TXN_OFFSET` and the producer id.
They change no committed offset. When the transaction ends, the commit or abort marker lands on
the same ``__consumer_offsets`` partition; then

- live, the broker that wrote the marker asks the group coordinator to `complete` the
  producer's transaction: the records it returns are the offset commits (on commit) and
  tombstones of the pending records, written like any other;
- on a load, `replay_marker` applies the marker itself (the completion's records may not have
  been written before a failover), so the state after a replay is the same.

Kafka keeps the pending offsets as the offset commit records of a transactional batch; kraft's
prefix keeps its coordinator's batches non-transactional (the partition's producer state never
sees them) with the same outcome.
"""

from __future__ import annotations

import struct
from typing import Final

from .records import decode_key
from .types import Record

PENDING_TXN_OFFSET: Final = 20
"""The key type of a pending transactional offset (kraft's; Kafka has no such record)."""
_HEAD = struct.Struct(">Hq")  # type, producer id


def pending_record(producer_id: int, commit: Record) -> Record:
    """The pending form of an offset commit record of ``producer_id``'s transaction."""
    key, value = commit
    return _HEAD.pack(PENDING_TXN_OFFSET, producer_id) + key, value


def is_pending_record(key: bytes) -> bool:
    return len(key) >= _HEAD.size and struct.unpack_from(">H", key)[0] == PENDING_TXN_OFFSET


class PendingTxnOffsets:
    """The pending offsets of one offsets partition, by producer id (pure)."""

    def __init__(self) -> None:
        self._pending: dict[int, dict[bytes, bytes]] = {}

    def replay(self, key: bytes, value: bytes | None) -> None:
        _, producer_id = _HEAD.unpack_from(key, 0)
        commit_key = key[_HEAD.size :]
        pending = self._pending.setdefault(producer_id, {})
        if value is None:
            pending.pop(commit_key, None)
        else:
            pending[commit_key] = value
        if not pending:
            del self._pending[producer_id]

    def has(self, producer_id: int) -> bool:
        return producer_id in self._pending

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """The (topic, partition)s of ``group_id`` with an offset pending in an open
        transaction: what an OffsetFetch with ``require_stable`` must not answer yet."""
        keys = (decode_key(k) for pending in self._pending.values() for k in pending)
        return {(k.topic, k.partition) for k in keys if k.group_id == group_id}

    def outcome(self, producer_id: int, commit: bool) -> list[Record]:
        """What the transaction's end commits: its offset commit records (none if aborted)."""
        if not commit:
            return []
        return list(self._pending.get(producer_id, {}).items())

    def complete(self, producer_id: int, commit: bool) -> list[Record]:
        """The records that end the transaction: `outcome`, then tombstones of the pending."""
        pending = self._pending.get(producer_id, {})
        return [
            *self.outcome(producer_id, commit),
            *((_HEAD.pack(PENDING_TXN_OFFSET, producer_id) + k, None) for k in pending),
        ]

    def forget(self, producer_id: int) -> None:
        self._pending.pop(producer_id, None)

    def snapshot_records(self) -> list[Record]:
        return [
            pending_record(pid, (key, value))
            for pid, pending in sorted(self._pending.items())
            for key, value in sorted(pending.items())
        ]


__all__ = ["PENDING_TXN_OFFSET", "PendingTxnOffsets", "is_pending_record", "pending_record"]
