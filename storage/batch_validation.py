"""`validate_produced_batch`: what a partition leader checks of a client's batch before it
appends it (Kafka's ``LogValidator`` for magic 2 and ``AppendOrigin.CLIENT``, plus the CRC and
size checks of ``UnifiedLog.analyzeAndValidateRecords``).

Theory of operation
-------------------
A batch is stored and served as the bytes the producer sent (the leader only rewrites the base
offset and leader epoch, outside the CRC). So whatever a leader accepts, every replica keeps
and every consumer must decode. A CRC proves only that the bytes were not damaged in transit:
a buggy or hostile client computes a valid CRC over nonsense. The leader therefore checks, in
Kafka's order, and rejects the whole batch (nothing is appended) with Kafka's error code:

====================================================  =====================================
check                                                 error
====================================================  =====================================
exactly one whole batch in the produce                INVALID_RECORD (torn or several)
magic 2, sane header                                  CORRUPT_MESSAGE
size within ``max.message.bytes``                     MESSAGE_TOO_LARGE
CRC-32C                                               CORRUPT_MESSAGE
base offset 0 (the leader assigns offsets)            INVALID_RECORD
record count > 0 and == last offset delta + 1         INVALID_RECORD
a control batch only as a well-formed end-transaction   INVALID_RECORD
marker (the coordinator's; the broker's Produce entry
refuses clients' control batches); a transactional
batch has a producer id and sequence
idempotence fields all -1, or all set                 INVALID_RECORD
codec id 0-4 (ids 5-7 are not codecs)                UNSUPPORTED_COMPRESSION_TYPE
compressed records decompress (one frame, bounded)    CORRUPT_MESSAGE / MESSAGE_TOO_LARGE
each record parses exactly: length, varints, key,     INVALID_RECORD
value, headers (UTF-8 keys), no byte left over;
offset deltas 0..n-1; nothing after the last record
CreateTime timestamps >= 0 (or -1, none) and within   INVALID_TIMESTAMP / INVALID_RECORD
``message.timestamp.before/after.max.ms`` of now;
the header max timestamp is the records' maximum; a
client may not set LogAppendTime
====================================================  =====================================

The records are read once, without copying keys or values, and a compressed batch is
decompressed once, by `decompress_records`, the function every reader uses. A batch of
`SCAN_MIN_RECORDS` records or more is first scanned (`storage.record_scan.scan_records`:
runs of same-shaped records a byte column at a time), which accepts only what the walk record
by record would accept, with the same timestamps; a batch the scan cannot prove valid
(malformed, with headers to check, records that vary) is walked record by record (one-byte
varints inline, longer ones through ``storage.records._varint_at``, the decoder
`record_tuples` uses), and that walk gives every refusal.

NB (deviations from Kafka): Kafka rewrites a wrong header max timestamp instead of rejecting
it, re-assigns offsets of non-contiguous inner records, and reports record-level errors per
record (KIP-467); kraft has no client that writes such batches and keeps batches as sent, so it
rejects them. LogAppendTime topics are not implemented (``message.timestamp.type`` is
accepted and ignored).
"""

from __future__ import annotations

from typing import Final

from storage.compression import CODEC_NAMES, Compression, decompress_records, recompress_batch
from storage.config import LONG_MAX, LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from storage.record_scan import scan_records
from storage.records import (
    BATCH_HEADER_SIZE,
    NO_PRODUCER_ID,
    BatchHeader,
    TimestampType,
    _varint_at,
    compute_crc,
    read_header,
    record_tuples,
)

NO_TIMESTAMP = -1
"""Kafka's ``RecordBatch.NO_TIMESTAMP``: a record without a timestamp."""

SCAN_MIN_RECORDS: Final = 16
"""Batches of this many records or more are scanned (`storage.record_scan`) before they are
walked: below it the walk costs less than the scan's fixed cost (the first record's shape
parsed in Python, a few tens of calls into C); 64 records take the scan a quarter of the
walk's time, 600 a tenth (`kraft bench produce`'s batches)."""


def validate_produced_batch(records: bytes, config: LogConfig, now_ms: int) -> BatchHeader:
    """Check that ``records`` (one partition's data of a Produce) is exactly one valid v2
    batch a client may write, under the topic's ``config`` (``max.message.bytes``,
    ``message.timestamp.before/after.max.ms``) at the leader's clock ``now_ms``; see the
    module docstring for the checks and their codes.

    Returns:
        The batch's header.

    Raises:
        InvalidRecordError: not exactly one batch, or a batch a client must not write
            (counts, offsets, control/transactional bits, idempotence fields, records that do
            not parse).
        CorruptRecordError: a bad header, CRC mismatch, or compressed data that does not
            decompress.
        RecordTooLargeError: larger than ``max_message_bytes``, or inflating to more than
            `storage.compression.MAX_DECOMPRESSED_BYTES`.
        UnsupportedCompressionTypeError: an unknown codec id (5-7).
        InvalidTimestampError: a negative timestamp (other than -1), one out of the
            before/after bounds, or a LogAppendTime batch.
    """
    size = len(records)
    if size < BATCH_HEADER_SIZE:
        raise InvalidRecordError(f"a produce must hold exactly one record batch ({size} bytes)")
    header = read_header(records)  # CorruptRecordError: magic, impossible length or delta
    if header.size_bytes != size:
        raise InvalidRecordError(
            f"a produce must hold exactly one record batch (batch of {header.size_bytes} "
            f"bytes in {size})"
        )
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {size} bytes exceeds max.message.bytes={config.max_message_bytes}"
        )
    if compute_crc(records, 0, size) != header.crc:
        raise CorruptRecordError("CRC mismatch in batch")
    if header.base_offset != 0:  # as Kafka's LogValidator (found by `kraft interop diff`)
        raise InvalidRecordError(
            f"a produced batch's base offset must be 0, not {header.base_offset}"
        )
    count = header.record_count
    if count <= 0 or count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"record count {count} does not match last offset delta {header.last_offset_delta}"
        )
    if header.is_control:
        if not (
            header.is_transactional
            and count == 1
            and header.producer_id >= 0
            and header.producer_epoch >= 0
            and header.control_type in (0, 1)
        ):
            raise InvalidRecordError("a control batch must be one end-transaction marker")
    elif header.is_transactional and (header.producer_id < 0 or header.base_sequence < 0):
        raise InvalidRecordError("a transactional batch needs a producer id and a sequence")
    else:
        _check_producer_fields(header)
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        raise InvalidTimestampError("a producer must not set the timestamp type LogAppendTime")
    codec = header.compression  # UnsupportedCompressionTypeError for ids 5-7
    if codec is Compression.NONE:
        low, high = _read_records(records, BATCH_HEADER_SIZE, size, count)
    else:
        data = decompress_records(codec, memoryview(records)[BATCH_HEADER_SIZE:])
        low, high = _read_records(data, 0, len(data), count)
    base = header.base_timestamp_ms
    first, last = base + low, base + high
    if first < NO_TIMESTAMP:  # every timestamp is >= 0, or -1 (none)
        raise InvalidTimestampError(f"negative timestamp {first} in batch")
    if last != header.max_timestamp_ms:
        raise InvalidRecordError(
            f"max timestamp {header.max_timestamp_ms} is not the records' {last}"
        )
    _check_timestamp_bounds(records, first, last, config, now_ms)
    return header


def topic_codec(compression_type: str) -> Compression | None:
    """The codec a topic's ``compression.type`` stores batches in, or None for ``producer``
    (keep the producer's)."""
    if compression_type == "producer":
        return None
    return CODEC_NAMES["none" if compression_type == "uncompressed" else compression_type]


def convert_to_topic_codec(records: bytes, header: BatchHeader, config: LogConfig) -> bytes:
    """``records`` (one batch `validate_produced_batch` accepted) in the topic's codec:
    Kafka's ``LogValidator`` recompresses a batch whose codec differs from a topic's
    ``compression.type`` (any value but ``producer``). Offsets, timestamps and the producer
    fields are kept; the length and CRC are recomputed. Returns ``records`` itself when no
    conversion is needed.

    Raises:
        RecordTooLargeError: the converted batch exceeds ``max.message.bytes`` (Kafka checks
            the size after conversion too).
    """
    target = topic_codec(config.compression_type)
    if target is None or header.attributes & 0x07 == target:
        return records
    out = recompress_batch(records, target)
    if len(out) > config.max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {len(out)} bytes after conversion to {config.compression_type} exceeds "
            f"max.message.bytes={config.max_message_bytes}"
        )
    return out


def check_keys_for_compaction(records: bytes, header: BatchHeader, config: LogConfig) -> None:
    """Kafka's ``LogValidator``: a compacted topic (``cleanup.policy`` includes ``compact``)
    refuses a record without a key, which the cleaner could not keep or remove by key.

    Raises:
        InvalidRecordError: ``config`` compacts and a record of ``records`` has no key.
    """
    if not config.compact:
        return
    for offset, _ts, key, _value, _headers in record_tuples(records):
        if key is None:
            raise InvalidRecordError(
                "compacted topic cannot accept a record without a key (record "
                f"{offset - header.base_offset} of the batch)"
            )


def apply_topic_policy(records: bytes, header: BatchHeader, config: LogConfig) -> bytes:
    """What a leader appends for a batch `validate_produced_batch` accepted: keys checked on
    a compacted topic (`check_keys_for_compaction`), then the batch in the topic's codec
    (`convert_to_topic_codec`).

    Raises:
        InvalidRecordError, RecordTooLargeError: as those two.
    """
    check_keys_for_compaction(records, header, config)
    return convert_to_topic_codec(records, header, config)


def _check_timestamp_bounds(
    records: bytes, first: int, last: int, config: LogConfig, now_ms: int
) -> None:
    """``message.timestamp.before.max.ms`` and ``after.max.ms`` (KIP-937), as Kafka's
    ``LogValidator.validateTimestamp``: records without a timestamp (-1) are exempt."""
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    if last == NO_TIMESTAMP or (before == LONG_MAX and after == LONG_MAX):
        return
    if first == NO_TIMESTAMP:  # rare: -1 among real timestamps; find the smallest real one
        first = min(t for _, t, _, _, _ in record_tuples(records) if t != NO_TIMESTAMP)
    if now_ms - first > before or last - now_ms > after:
        bad = first if now_ms - first > before else last
        raise InvalidTimestampError(
            f"timestamp {bad} is out of range: it must be within [{now_ms - before}, "
            f"{now_ms + after}] (message.timestamp.before/after.max.ms)"
        )


def _check_producer_fields(header: BatchHeader) -> None:
    """Kafka's "Invalid sequence number" check, and kraft's: a producer id comes with an
    epoch and a sequence (KIP-98). Without a producer id (-1) the epoch and sequence mean
    nothing and are not checked, as Kafka does not: aiokafka's plain (non-idempotent)
    producer writes base sequence 0 there."""
    pid, epoch, sequence = header.producer_id, header.producer_epoch, header.base_sequence
    if pid == NO_PRODUCER_ID:
        return
    if pid < 0 or epoch < 0 or sequence < 0:
        raise InvalidRecordError(f"invalid producer id {pid}, epoch {epoch} or sequence {sequence}")


def _read_records(data: bytes, p: int, stop: int, count: int) -> tuple[int, int]:
    """`_walk_records`'s answer: from the scan when it proves the records valid, else
    from the walk (which raises what is wrong)."""
    if count >= SCAN_MIN_RECORDS:
        bounds = scan_records(data, p, stop, count)
        if bounds is not None:
            return bounds
    return _walk_records(data, p, stop, count)


def _walk_records(data: bytes, p: int, stop: int, count: int) -> tuple[int, int]:
    """Parse ``count`` records in ``data[p:stop]`` exactly (nothing left over), with offset
    deltas 0..count-1, without copying keys or values.

    Returns:
        The smallest and largest timestamp delta.

    Raises:
        InvalidRecordError: a record does not parse.
    """
    varint = _varint_at
    low = 1 << 63
    high = -(1 << 63)
    i = 0
    try:
        for i in range(count):
            b = data[p]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), p + 1
            elif (b2 := data[p + 1]) < 0x80:  # two bytes: a 64..8191-byte record
                z = (b & 0x7F) | (b2 << 7)
                length, p = (z >> 1) ^ -(z & 1), p + 2
            else:
                length, p = varint(data, p)
            end = p + length
            if length < 6 or end > stop:  # attributes + 5 one-byte fields at least
                raise InvalidRecordError(f"record {i} has an invalid length {length}")
            p += 1  # attributes: unused in v2
            b = data[p]
            if b < 0x80:
                delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                delta, p = varint(data, p)
            if delta < low:
                low = delta
            if delta > high:
                high = delta
            b = data[p]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
            elif (b2 := data[p + 1]) < 0x80:  # records 64..8191 of a batch
                z = (b & 0x7F) | (b2 << 7)
                offset_delta, p = (z >> 1) ^ -(z & 1), p + 2
            else:
                offset_delta, p = varint(data, p)
            if offset_delta != i:
                raise InvalidRecordError(f"record {i} has offset delta {offset_delta}")
            b = data[p]  # key length
            if b < 0x80:
                n, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                n, p = varint(data, p)
            if n >= 0:
                p += n
            elif n != -1:
                raise InvalidRecordError(f"record {i} has a key length of {n}")
            b = data[p]  # value length
            if b < 0x80:
                n, p = (b >> 1) ^ -(b & 1), p + 1
            elif (b2 := data[p + 1]) < 0x80:  # a 64..8191-byte value
                z = (b & 0x7F) | (b2 << 7)
                n, p = (z >> 1) ^ -(z & 1), p + 2
            else:
                n, p = varint(data, p)
            if n >= 0:
                p += n
            elif n != -1:
                raise InvalidRecordError(f"record {i} has a value length of {n}")
            if data[p] == 0:  # no headers: the common case
                p += 1
            else:
                p = _walk_headers(data, p, end, i)
            if p != end:
                raise InvalidRecordError(f"record {i}'s fields do not fill its length {length}")
    except (IndexError, CorruptRecordError):  # ran off the data; a varint over 10 bytes
        raise InvalidRecordError(f"record {i} is truncated or has a bad varint") from None
    if p != stop:
        raise InvalidRecordError(f"{stop - p} bytes after the last of {count} records")
    return low, high


def _walk_headers(data: bytes, p: int, end: int, i: int) -> int:
    count, p = _varint_at(data, p)
    if count < 0 or count > (end - p) // 2:  # a header takes 2 bytes at least
        raise InvalidRecordError(f"record {i} has a header count of {count}")
    for _ in range(count):
        n, p = _varint_at(data, p)
        if n < 0 or p + n > end:
            raise InvalidRecordError(f"record {i} has a header key length of {n}")
        try:
            data[p : p + n].decode()
        except UnicodeDecodeError:
            raise InvalidRecordError(f"record {i} has a header key that is not UTF-8") from None
        p += n
        n, p = _varint_at(data, p)
        if n >= 0:
            p += n
        elif n != -1:
            raise InvalidRecordError(f"record {i} has a header value length of {n}")
    return p


__all__ = [
    "NO_TIMESTAMP",
    "SCAN_MIN_RECORDS",
    "apply_topic_policy",
    "check_keys_for_compaction",
    "convert_to_topic_codec",
    "topic_codec",
    "validate_produced_batch",
]
