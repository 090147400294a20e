"""A consumer group's offsets in the simulated cluster's replicated ``__consumer_offsets``
partition, committed inside transactions as Kafka commits them (KIP-98 TxnOffsetCommit,
KIP-447).

- `txn_offset_commit_batch`: what the group coordinator appends for a TxnOffsetCommit: the
  group's offset commit records (kraft's records, `replication.group.offsets.commit_offsets`)
  in one *transactional* batch of the producer's id and epoch. The partition was added to the
  producer's transaction by AddOffsetsToTxn (`OFFSETS_PARTITION`), so the transaction
  coordinator writes its commit or abort marker here too.
- `GroupOffsetsLog`: the committed offsets, folded from the partition's records as a
  read_committed reader sees them: a transactional batch's offsets are pending until its
  producer's marker; a commit marker makes them visible, an abort marker drops them; per
  (group, topic, partition) key the record at the highest log offset wins (a tombstone
  deletes). Nothing else is kept: a new leader answers from its own log, so the offsets
  survive a leader failover exactly when their records and marker were committed.
- `offset_fetch`: OffsetFetch at the partition's leader, from that fold of its committed
  records; `committed_batches`: the batches of a replica below its high watermark.

NB: kraft's own group coordinator keeps a transaction's offsets as pending records of its own
(`replication.group.txn_offsets`) and writes the commit on the marker; the simulator writes
Kafka's form (transactional records ended by the marker) so that the partition's producer
state, last stable offset and markers are the broker's code paths under the faults.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Final, final

from kraft.types import OFFSETS_TOPIC, TopicPartition
from replication.group.hashing import partition_for_group
from replication.group.offsets import commit_offsets
from replication.group.records import OFFSET_COMMIT, OffsetCommitValue, decode_key, decode_value
from replication.group.types import OffsetCommitPartition, OffsetCommitRequest
from storage.control import ControlType
from storage.errors import ErrorCode
from storage.records import SimpleRecord, build_batch, iter_batches, read_header, record_tuples

if TYPE_CHECKING:
    from replication.sim.replica import SimReplica

OFFSETS_PARTITIONS: Final = 1
"""``offsets.topic.num.partitions`` of the simulated cluster."""


def offsets_partition(group_id: str) -> TopicPartition:
    """The ``__consumer_offsets`` partition of ``group_id`` (Kafka's ``partitionFor``)."""
    return TopicPartition(OFFSETS_TOPIC, partition_for_group(group_id, OFFSETS_PARTITIONS))


def txn_offset_commit_batch(
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    *,
    producer_id: int,
    producer_epoch: int,
    now_ms: int,
) -> bytes:
    """The transactional batch of a TxnOffsetCommit of ``offsets`` (the next offset to read
    of each partition) for ``group_id`` (a group without members: generation -1, KIP-447).
    Its sequence is 0: a transaction commits its offsets once, under its own epoch (KIP-890
    part 2), and a retry is a duplicate the leader answers with the first append."""
    request = OffsetCommitRequest(
        group_id=group_id,
        partitions=tuple(
            OffsetCommitPartition(topic=tp.topic, partition=tp.partition, offset=offset)
            for tp, offset in sorted(offsets.items())
        ),
    )
    records = commit_offsets({}, request, now_ms).records
    assert len(records) == len(offsets), "offsets the coordinator refused"
    return build_batch(
        [SimpleRecord(key=key, value=value) for key, value in records],
        timestamp_ms=now_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=0,
        is_transactional=True,
    )


_Key = tuple[str, str, int]
"""(group, topic, partition) of an offset commit record."""


@final
class GroupOffsetsLog:
    """The groups' committed offsets in one ``__consumer_offsets`` partition, folded batch by
    batch in log order (module docstring)."""

    def __init__(self) -> None:
        self._committed: dict[_Key, tuple[int, int]] = {}
        """key -> (log offset of its record, the committed offset)."""
        self._pending: dict[int, list[tuple[int, _Key, int | None]]] = {}
        """producer id -> its open transaction's records: (log offset, key, offset or None)."""

    def replay(self, batch: bytes) -> None:
        """Fold in one batch (its bytes, base offset assigned)."""
        header = read_header(batch)
        if header.is_control:
            if header.control_type in (ControlType.COMMIT, ControlType.ABORT):
                pending = self._pending.pop(header.producer_id, [])
                if header.control_type == ControlType.COMMIT:
                    for record in pending:
                        self._apply(*record)
            return  # (a quorum partition's Raft control records too)
        records = []
        for offset, _, key, value, _ in record_tuples(batch):
            if key is None or struct.unpack_from(">H", key)[0] != OFFSET_COMMIT:
                continue
            k = decode_key(key)
            committed = None
            if value is not None:
                decoded = decode_value(OFFSET_COMMIT, value)
                assert isinstance(decoded, OffsetCommitValue)
                committed = decoded.offset
            records.append((offset, (k.group_id, k.topic, k.partition), committed))
        if header.is_transactional:
            self._pending.setdefault(header.producer_id, []).extend(records)
        else:
            for record in records:
                self._apply(*record)

    def _apply(self, log_offset: int, key: _Key, offset: int | None) -> None:
        before = self._committed.get(key)
        if before is not None and before[0] > log_offset:
            return  # a later record (by log offset) of this key is committed already
        if offset is None:
            self._committed.pop(key, None)
        else:
            self._committed[key] = (log_offset, offset)

    def committed(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets (the next offset to read per partition)."""
        return {
            TopicPartition(topic, partition): offset
            for (group, topic, partition), (_, offset) in sorted(self._committed.items())
            if group == group_id
        }

    def pending(self, group_id: str) -> bool:
        """Whether an open transaction holds offsets of the group (OffsetFetch with
        ``require_stable`` answers UNSTABLE_OFFSET_COMMIT then, KIP-447)."""
        return any(k[0] == group_id for records in self._pending.values() for _, k, _ in records)


def offset_fetch(
    replica: SimReplica | None, group_id: str
) -> tuple[ErrorCode, dict[TopicPartition, int]]:
    """OffsetFetch with ``require_stable`` (KIP-447) at the replica of the group's partition:
    NOT_COORDINATOR unless it leads; COORDINATOR_LOAD_IN_PROGRESS until it has committed its
    whole log (the coordinator's load); UNSTABLE_OFFSET_COMMIT while a transaction holding
    offsets of the group is open; else NONE and the group's committed offsets."""
    if replica is None or not replica.driver.is_leader:
        return ErrorCode.NOT_COORDINATOR, {}
    if replica.high_watermark < replica.log.log_end_offset:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, {}
    log = GroupOffsetsLog()
    for batch in committed_batches(replica):
        log.replay(batch)
    if log.pending(group_id):
        return ErrorCode.UNSTABLE_OFFSET_COMMIT, {}
    return ErrorCode.NONE, log.committed(group_id)


def committed_batches(replica: SimReplica) -> Iterator[bytes]:
    """The batches of ``replica`` from its log start to its high watermark, in order."""
    high_watermark = replica.high_watermark
    offset = replica.log.log_start_offset
    while offset < high_watermark:
        data = replica.read(offset, 1 << 20, high_watermark)
        if not data:
            return
        for pos, header in iter_batches(data):
            yield data[pos : pos + header.size_bytes]
            offset = header.next_offset


__all__ = [
    "OFFSETS_PARTITIONS",
    "GroupOffsetsLog",
    "committed_batches",
    "offset_fetch",
    "offsets_partition",
    "txn_offset_commit_batch",
]
