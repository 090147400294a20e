"""Control batches: the commit and abort markers of transactions (KIP-98).

A marker is a batch with the control and transactional bits set, the producer id and epoch
of the transaction it ends, no sequence, and one record whose key is Kafka's
``ControlRecordType`` (int16 version 0, int16 type: 0 abort, 1 commit) and whose value is
Kafka's ``EndTransactionMarker`` (int16 version 0, int32 coordinator epoch). Consumers skip
control batches; a read_committed consumer drops the aborted transactions' records.
"""

from __future__ import annotations

import enum
import struct

from storage.records import SimpleRecord, build_batch

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    """Kafka's ``ControlRecordType`` (the value `BatchHeader.control_type` holds)."""

    ABORT = 0
    COMMIT = 1


def build_marker_batch(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
) -> bytes:
    """One end-transaction marker, as the transaction coordinator's WriteTxnMarkers writes it."""
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    record = SimpleRecord(key=_KEY.pack(0, kind), value=_VALUE.pack(0, coordinator_epoch))
    return build_batch(
        [record],
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_control=True,
        is_transactional=True,
    )


def marker_coordinator_epoch(value: bytes | None) -> int:
    """The coordinator epoch of an end-transaction marker's value (-1 if unreadable)."""
    if value is None or len(value) < _VALUE.size:
        return -1
    return int(_VALUE.unpack_from(value, 0)[1])


__all__ = ["ControlType", "build_marker_batch", "marker_coordinator_epoch"]
