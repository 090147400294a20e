"""The transaction coordinator's records in ``__transaction_state``: one per transactional id,
latest wins, a tombstone (value None) when the id expires.

Kafka keeps the same fact in ``TransactionLogKey`` / ``TransactionLogValue`` (producer id and
epoch, timeout, state, partitions, timestamps; since KIP-890 part 2 the client's transaction
version and the next producer id; records without them read as version 0 and none). kraft
encodes it as its group records are (`replication.group.records`): key = 2-byte big-endian
type + canonical JSON array of the key fields; value = 2-byte big-endian version + JSON object.
"""

from __future__ import annotations

import json
import struct
from typing import Final

from kraft.types import TopicPartition
from storage.errors import CorruptRecordError

from .state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnMetadata, TxnState

Record = tuple[bytes, bytes | None]

TRANSACTION_METADATA: Final = 0
VALUE_VERSION: Final = 0
_HEAD = struct.Struct(">H")


def metadata_key(transactional_id: str) -> bytes:
    return _HEAD.pack(TRANSACTION_METADATA) + json.dumps([transactional_id]).encode()


def metadata_record(meta: TxnMetadata) -> Record:
    value = {
        "producer_id": meta.producer_id,
        "producer_epoch": meta.producer_epoch,
        "last_producer_epoch": meta.last_producer_epoch,
        "timeout_ms": meta.timeout_ms,
        "state": meta.state.value,
        "partitions": sorted([tp.topic, tp.partition] for tp in meta.partitions),
        "start_ms": meta.start_ms,
        "last_update_ms": meta.last_update_ms,
        "client_transaction_version": meta.client_transaction_version,
        "next_producer_id": meta.next_producer_id,
        "previous_producer_id": meta.previous_producer_id,
    }
    body = json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
    return metadata_key(meta.transactional_id), _HEAD.pack(VALUE_VERSION) + body


def tombstone(transactional_id: str) -> Record:
    return metadata_key(transactional_id), None


def decode_key(key: bytes) -> str:
    """The transactional id of a record key.

    Raises:
        CorruptRecordError: not a transaction record key.
    """
    try:
        (kind,) = _HEAD.unpack_from(key, 0)
        fields = json.loads(key[_HEAD.size :])
    except (struct.error, ValueError) as e:
        raise CorruptRecordError(f"bad transaction record key: {e}") from e
    if kind != TRANSACTION_METADATA or not isinstance(fields, list) or len(fields) != 1:
        raise CorruptRecordError(f"unknown transaction record key type {kind}")
    if not isinstance(fields[0], str):
        raise CorruptRecordError("a transactional id must be a string")
    return fields[0]


def decode_metadata(transactional_id: str, value: bytes) -> TxnMetadata:
    """The metadata a record value holds.

    Raises:
        CorruptRecordError: a value this version cannot read.
    """
    try:
        (version,) = _HEAD.unpack_from(value, 0)
        v = json.loads(value[_HEAD.size :])
        if version != VALUE_VERSION:
            raise CorruptRecordError(f"unknown transaction record version {version}")
        return TxnMetadata(
            transactional_id=transactional_id,
            producer_id=int(v["producer_id"]),
            producer_epoch=int(v["producer_epoch"]),
            last_producer_epoch=int(v.get("last_producer_epoch", NO_PRODUCER_EPOCH)),
            timeout_ms=int(v["timeout_ms"]),
            state=TxnState(int(v["state"])),
            partitions=frozenset(TopicPartition(str(t), int(p)) for t, p in v["partitions"]),
            start_ms=int(v["start_ms"]),
            last_update_ms=int(v["last_update_ms"]),
            client_transaction_version=int(v.get("client_transaction_version", 0)),
            next_producer_id=int(v.get("next_producer_id", NO_PRODUCER_ID)),
            previous_producer_id=int(v.get("previous_producer_id", NO_PRODUCER_ID)),
        )
    except (struct.error, ValueError, KeyError, TypeError) as e:
        raise CorruptRecordError(f"bad transaction record value: {e}") from e


__all__ = [
    "Record",
    "decode_key",
    "decode_metadata",
    "metadata_key",
    "metadata_record",
    "tombstone",
]
