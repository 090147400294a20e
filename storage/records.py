"""Record batches in Kafka's v2 layout (magic 2), the one on-disk and on-wire format of kraft.

Theory of operation
-------------------
A batch is a 61-byte header followed by the records section::

    offset  size  field
    0       8     base_offset             \\  the "log overhead": rewritten by the leader,
    8       4     batch_length            /   batch_length counts every byte after itself
    12      4     partition_leader_epoch  stamped by the leader; outside the CRC
    16      1     magic (= 2)
    17      4     crc                     CRC-32C (Castagnoli) of bytes 21..end
    21      2     attributes              bits 0-2 compression, 3 timestamp type,
                                          4 transactional, 5 control, 6 delete horizon
    23      4     last_offset_delta
    27      8     base_timestamp          the records' timestamps are it plus their deltas
    35      8     max_timestamp
    43      8     producer_id
    51      2     producer_epoch
    53      4     base_sequence
    57      4     record_count
    61      ...   records (compressed as a whole when the codec is not none)

Each record is varint-framed: ``length, attributes(int8), timestamp_delta(varlong),
offset_delta(varint), key_length, key, value_length, value, header_count, headers...``, where
lengths of -1 mean null and every varint is zigzag-encoded, as in Kafka's ``DefaultRecord``.

The base timestamp is usually the first record's timestamp, but not always: a batch the log
cleaner rewrote with the *delete horizon* bit (KIP-534, `storage.compaction`) holds there the
time after which the cleaner may remove its tombstones, and its records' deltas are relative to
it (negative ones included). Every reader computes a record's timestamp as base plus delta, as
Kafka's ``DefaultRecordBatch`` does, so it never needs to know which.

Because the CRC starts at ``attributes``, a leader can assign offsets and stamp its epoch by
rewriting bytes 0..15 in place (`set_base_offset`, `set_partition_leader_epoch`) without
touching or re-checksumming the records: the broker treats a batch as bytes on its hot path.

The codecs (`Compression`, compressing a records section and its bounded inflation) live in
`storage.compression`; this module holds the layout, building, reading and the record walk.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import google_crc32c

from storage.compression import Compression, compress, decompress_records
from storage.errors import (
    CorruptRecordError,
    UnsupportedCompressionTypeError,
)

MAGIC = 2
BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12
"""Bytes before ``batch_length`` counts: base offset (8) and batch length (4)."""
CRC_START = 21
"""The CRC covers the batch from ``attributes`` (byte 21) to its end."""
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")  # base_offset, batch_length
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_ATTRIBUTES_TO_END = struct.Struct(">hiqqqhii")  # everything the CRC covers up to the records
assert _HEADER.size == BATCH_HEADER_SIZE

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40
"""Attributes bit 6 (KIP-534): the base timestamp is the batch's delete horizon."""


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class SimpleRecord:
    """A record to put into a batch; offsets and timestamp deltas are assigned by `build_batch`."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[Header, ...] = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """A record read back from a batch, with its absolute offset and timestamp."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """Every header field of a v2 batch, read without decoding its records."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp_ms: int
    max_timestamp_ms: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    control_type: int = -1
    """A control batch's type (0 abort, 1 commit: `storage.control`) when its record was in
    the buffer the header was read from; -1 otherwise."""
    coordinator_epoch: int = -1
    """An end-transaction marker's coordinator epoch (its record's value), when its record
    was in the buffer the header was read from; -1 otherwise."""

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> Compression:
        """The codec; raises `UnsupportedCompressionTypeError` for an unknown codec id (5-7)."""
        code = self.attributes & _COMPRESSION_MASK
        if code > Compression.ZSTD:
            raise UnsupportedCompressionTypeError(f"unknown compression codec id {code}")
        return Compression(code)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & _TIMESTAMP_TYPE_BIT
            else (TimestampType.CREATE_TIME)
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The time after which the log cleaner removes this batch's tombstones (KIP-534: the
        base timestamp when attributes bit 6 is set), or None when no cleaner set one."""
        if self.attributes & DELETE_HORIZON_BIT:
            return self.base_timestamp_ms
        return None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


# --- varints (zigzag, as protobuf's sint32/sint64 and Kafka's ByteUtils) -----------------------

_SMALL = 1 << 14


def _encode_unsigned(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_VARINTS: list[bytes] = [_encode_unsigned(z) for z in range(_SMALL)]
_ZIGZAG: list[int] = [(z >> 1) ^ -(z & 1) for z in range(_SMALL)]
"""The value of each one- and two-byte varint's 14 bits: a list index beats the arithmetic."""


def encode_unsigned_varint(n: int) -> bytes:
    """Unsigned varint of ``n`` >= 0 (Kafka's compact lengths and counts, KIP-482)."""
    return _SMALL_VARINTS[n] if n < _SMALL else _encode_unsigned(n)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of a signed 64-bit integer."""
    z = (value << 1) ^ (value >> 63)
    if z < _SMALL:
        return _SMALL_VARINTS[z]
    return _encode_unsigned(z)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Return ``(value, next_pos)``; raises `CorruptRecordError` on a truncated varint."""
    shift = 0
    result = 0
    try:
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 63:
                raise CorruptRecordError("varint longer than 10 bytes")
    except IndexError:
        raise CorruptRecordError("truncated varint") from None
    return (result >> 1) ^ -(result & 1), pos


_NULL = encode_varint(-1)


def _bytes_field(value: bytes | None) -> bytes:
    if value is None:
        return _NULL
    return encode_varint(len(value)) + value


# --- building ------------------------------------------------------------------------------------


def _encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[Header, ...],
) -> bytes:
    parts = [
        b"\x00",  # record attributes: unused in v2
        encode_varint(timestamp_delta),
        encode_varint(offset_delta),
        _bytes_field(key),
        _bytes_field(value),
        encode_varint(len(headers)),
    ]
    for hkey, hvalue in headers:
        parts.append(_bytes_field(hkey.encode()))
        parts.append(_bytes_field(hvalue))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _encode_value_record(offset_delta: int, timestamp_delta: int, value: bytes) -> bytes:
    """`_encode_record` for the common record: no key, no headers (fewer joins)."""
    ts = encode_varint(timestamp_delta)
    od = encode_varint(offset_delta)
    vl = encode_varint(len(value))
    # attributes (1) + null key (1) + header count (1) + the varints + the value
    length = 3 + len(ts) + len(od) + len(vl) + len(value)
    return b"".join((encode_varint(length), b"\x00", ts, od, b"\x01", vl, value, b"\x00"))


def build_batch(
    records: Iterable[SimpleRecord | bytes],
    *,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression: Compression = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_control: bool = False,
    is_transactional: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> bytes:
    """Encode records into one v2 batch.

    Args:
        records: `SimpleRecord`s, or plain ``bytes`` taken as values with no key.
        timestamp_ms: the timestamp of records that carry none (the caller's clock: cores
            pass their ``now_ms``).

    Raises:
        ValueError: on an empty batch.
    """
    encoded: list[bytes] = []
    base_ts: int | None = None
    max_ts = -1
    delta = 0
    for delta, rec in enumerate(records):
        if type(rec) is bytes:  # the hot path: a plain value
            if base_ts is None:
                base_ts = timestamp_ms
            if timestamp_ms > max_ts:
                max_ts = timestamp_ms
            encoded.append(_encode_value_record(delta, timestamp_ms - base_ts, rec))
            continue
        if isinstance(rec, bytes | bytearray | memoryview):
            ts = timestamp_ms
            key: bytes | None = None
            value: bytes | None = bytes(rec)
            headers: tuple[Header, ...] = ()
        else:
            ts = timestamp_ms if rec.timestamp_ms is None else rec.timestamp_ms
            key, value, headers = rec.key, rec.value, rec.headers
        if base_ts is None:
            base_ts = ts
        if ts > max_ts:
            max_ts = ts
        encoded.append(_encode_record(delta, ts - base_ts, key, value, headers))
    if base_ts is None:
        raise ValueError("a batch needs at least one record")
    count = len(encoded)
    body = compress(compression, b"".join(encoded))
    attributes = int(compression)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_BIT
    if is_transactional:
        attributes |= _TRANSACTIONAL_BIT
    if is_control:
        attributes |= _CONTROL_BIT
    covered = (
        _ATTRIBUTES_TO_END.pack(
            attributes,
            count - 1,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        + body
    )
    crc = google_crc32c.value(covered)
    prefix = struct.pack(
        ">qiibI",
        base_offset,
        len(covered) + 9,  # epoch (4) + magic (1) + crc (4) precede the covered bytes
        partition_leader_epoch,
        MAGIC,
        crc,
    )
    return prefix + covered


encode_record = _encode_record
"""One record's bytes with explicit deltas (the log cleaner re-encodes the records it keeps)."""


# --- reading -------------------------------------------------------------------------------------


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos`` without decoding records or checking the CRC.

    Raises:
        CorruptRecordError: if fewer than 61 bytes remain, the magic is not 2, or the batch
            length is impossible.
    """
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"truncated batch header at position {pos}")
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.attributes & _CONTROL_BIT:
        kind, coordinator_epoch = _control_fields(buf, pos + BATCH_HEADER_SIZE)
        header = replace(header, control_type=kind, coordinator_epoch=coordinator_epoch)
    if header.magic != MAGIC:
        raise CorruptRecordError(f"unsupported magic {header.magic} at position {pos}")
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or header.last_offset_delta < 0:
        raise CorruptRecordError(f"invalid batch length or offset delta at position {pos}")
    return header


def _control_fields(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """The type in the key of the control record at ``pos`` (Kafka's ``ControlRecordType``:
    key = int16 version, int16 type) and, for an end-transaction marker, the coordinator
    epoch in its value (int16 version, int32 epoch); -1 for what is not all in ``buf``."""
    try:
        _, pos = decode_varint(buf, pos)  # record length
        pos += 1  # attributes
        _, pos = decode_varint(buf, pos)  # timestamp delta
        _, pos = decode_varint(buf, pos)  # offset delta
        key_length, pos = decode_varint(buf, pos)
    except (CorruptRecordError, IndexError):
        return -1, -1
    if key_length < 4 or len(buf) < pos + 4:
        return -1, -1
    kind = int(struct.unpack_from(">h", buf, pos + 2)[0])
    try:
        value_length, pos = decode_varint(buf, pos + key_length)
    except (CorruptRecordError, IndexError):
        return kind, -1
    if kind not in (0, 1) or value_length < 6 or len(buf) < pos + 6:
        return kind, -1
    return kind, int(struct.unpack_from(">i", buf, pos + 2)[0])


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return int(google_crc32c.value(bytes(memoryview(buf)[pos + CRC_START : pos + size])))


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos`` and check that the whole batch is present and its CRC holds.

    Raises:
        CorruptRecordError: on a truncated batch, bad magic or CRC mismatch.
    """
    header = read_header(buf, pos)
    size = header.size_bytes
    if len(buf) - pos < size:
        raise CorruptRecordError(f"truncated batch at position {pos}: {len(buf) - pos} < {size}")
    if compute_crc(buf, pos, size) != header.crc:
        raise CorruptRecordError(f"CRC mismatch in batch at offset {header.base_offset}")
    return header


def iter_batches(
    buf: bytes | bytearray | memoryview, pos: int = 0
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each whole batch in ``buf``, stopping before an
    incomplete tail (a partial batch is not an error: a read may end mid-batch)."""
    end = len(buf)
    while end - pos >= BATCH_HEADER_SIZE:
        header = read_header(buf, pos)
        if end - pos < header.size_bytes:
            return
        yield pos, header
        pos += header.size_bytes


def split_batches(buf: bytes | bytearray | memoryview) -> list[bytes]:
    """The whole batches of a concatenation of batches, as separate ``bytes`` (a torn tail is
    dropped)."""
    view = memoryview(buf)
    return [bytes(view[pos : pos + h.size_bytes]) for pos, h in iter_batches(view)]


def _records_section(batch: bytes | bytearray | memoryview, header: BatchHeader) -> memoryview:
    body = memoryview(batch)[BATCH_HEADER_SIZE : header.size_bytes]
    if header.compression is Compression.NONE:
        return body
    return memoryview(decompress_records(header.compression, body))


RecordTuple = tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]
"""``(offset, timestamp_ms, key, value, headers)`` of one record (`record_tuples`)."""

_NO_HEADERS: tuple[Header, ...] = ()


def record_tuples(batch: bytes | bytearray | memoryview, pos: int = 0) -> list[RecordTuple]:
    """The records of the batch at ``pos`` in ``batch`` as tuples: `iter_records` without
    an object per record, for consumers (one record costs ~1 µs here, ~4 µs there).

    NB: one- and two-byte varints (deltas; lengths of 64..8191, as a 100-byte record's length
    and value length) are decoded inline, longer ones in `decode_varint`; slices of ``data``
    (``bytes``) are already ``bytes``, no copy of a copy.

    Raises:
        CorruptRecordError: if the records section is malformed.
    """
    header = read_header(batch, pos)
    if header.compression is Compression.NONE and isinstance(batch, bytes):
        data = batch
        p = pos + BATCH_HEADER_SIZE
        stop = pos + header.size_bytes
    else:
        data = bytes(_records_section(memoryview(batch)[pos:], header))
        p, stop = 0, len(data)
    base_offset, base_ts = header.base_offset, header.base_timestamp_ms
    fixed_ts = header.max_timestamp_ms if header.attributes & _TIMESTAMP_TYPE_BIT else None
    out: list[RecordTuple] = []
    append = out.append
    varint, zigzag = decode_varint, _ZIGZAG
    try:
        for _ in range(header.record_count):
            b = data[p]
            if b < 0x80:
                length, p = zigzag[b], p + 1
            elif (b2 := data[p + 1]) < 0x80:
                length, p = zigzag[(b & 0x7F) | (b2 << 7)], p + 2
            else:
                length, p = varint(data, p)
            end = p + length
            if end > stop or length < 0:
                raise CorruptRecordError("record extends past its batch")
            b = data[p + 1]  # after the attributes
            if b < 0x80:
                ts_delta, p = zigzag[b], p + 2
            else:
                ts_delta, p = varint(data, p + 1)
            b = data[p]
            if b < 0x80:
                offset_delta, p = zigzag[b], p + 1
            elif (b2 := data[p + 1]) < 0x80:
                offset_delta, p = zigzag[(b & 0x7F) | (b2 << 7)], p + 2
            else:
                offset_delta, p = varint(data, p)
            b = data[p]
            if b == 1:  # zigzag(-1): the common null key
                key, p = None, p + 1
            else:
                if b < 0x80:
                    n, p = zigzag[b], p + 1
                elif (b2 := data[p + 1]) < 0x80:
                    n, p = zigzag[(b & 0x7F) | (b2 << 7)], p + 2
                else:
                    n, p = varint(data, p)
                if n < 0:
                    key = None
                else:
                    if p + n > end:
                        raise CorruptRecordError("field extends past its record")
                    key = data[p : p + n]
                    p += n
            b = data[p]
            if b < 0x80:
                n, p = zigzag[b], p + 1
            elif (b2 := data[p + 1]) < 0x80:
                n, p = zigzag[(b & 0x7F) | (b2 << 7)], p + 2
            else:
                n, p = varint(data, p)
            if n < 0:
                value = None
            else:
                if p + n > end:
                    raise CorruptRecordError("field extends past its record")
                value = data[p : p + n]
                p += n
            if data[p] == 0:  # no headers: zigzag 0
                p += 1
                headers = _NO_HEADERS
            else:
                count, p = varint(data, p)
                found: list[Header] = []
                for _h in range(count):
                    hkey, p = _read_bytes(data, p)
                    hvalue, p = _read_bytes(data, p)
                    try:
                        found.append(((hkey or b"").decode(), hvalue))
                    except UnicodeDecodeError:
                        raise CorruptRecordError("header key is not UTF-8") from None
                headers = tuple(found)
            if p != end:
                raise CorruptRecordError("record length does not match its fields")
            append(
                (
                    base_offset + offset_delta,
                    base_ts + ts_delta if fixed_ts is None else fixed_ts,
                    key,
                    value,
                    headers,
                )
            )
    except IndexError:
        raise CorruptRecordError("record extends past its batch") from None
    return out


def iter_records(batch: bytes | bytearray | memoryview) -> Iterator[Record]:
    """Decode the records of one batch (positioned at 0) with absolute offsets and timestamps.

    Raises:
        CorruptRecordError: if the records section is malformed.
    """
    for offset, timestamp_ms, key, value, headers in record_tuples(batch):
        yield Record(
            offset=offset, timestamp_ms=timestamp_ms, key=key, value=value, headers=headers
        )


def _read_bytes(data: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = decode_varint(data, pos)
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(data):
        raise CorruptRecordError("field extends past its record")
    return bytes(data[pos:end]), end


def record_values(batch: bytes | bytearray | memoryview) -> list[bytes | None]:
    """The values of a batch's records, in order (a cheaper path for state machines)."""
    return [value for _, value in offset_values(batch)]


def _varint_at(data: bytes, pos: int) -> tuple[int, int]:
    b = data[pos]
    if b < 0x80:  # one byte: the common case, decoded inline
        return _ZIGZAG[b], pos + 1
    b2 = data[pos + 1]
    if b2 < 0x80:  # two bytes: 64..8191, as a 100-byte record's length and value length
        return _ZIGZAG[(b & 0x7F) | (b2 << 7)], pos + 2
    return decode_varint(data, pos)


def offset_values(batch: bytes | bytearray | memoryview) -> list[tuple[int, bytes | None]]:
    """``(offset, value)`` of each record of one batch: what a replicated state machine
    applies, without building `Record` objects.

    Raises:
        CorruptRecordError: if the records section is malformed.
    """
    header = read_header(batch, 0)
    data = bytes(_records_section(batch, header))
    base = header.base_offset
    out: list[tuple[int, bytes | None]] = []
    pos = 0
    size = len(data)
    try:
        for _ in range(header.record_count):
            length, pos = _varint_at(data, pos)
            end = pos + length
            if end > size or length < 0:
                raise CorruptRecordError("record extends past its batch")
            _, pos = _varint_at(data, pos + 1)  # attributes, then the timestamp delta
            offset_delta, pos = _varint_at(data, pos)
            n, pos = _varint_at(data, pos)  # key
            if n > 0:
                pos += n
            n, pos = _varint_at(data, pos)
            if n < 0:
                value = None
            else:
                value = data[pos : pos + n]
                if pos + n > end:
                    raise CorruptRecordError("value extends past its record")
            out.append((base + offset_delta, value))
            pos = end  # skip the headers
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    return out


# --- in-place rewrites (outside the CRC) --------------------------------------------------------


def set_base_offset(buf: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Assign offsets to a batch by rewriting its base offset in place; the CRC still holds."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, epoch: int, pos: int = 0) -> None:
    """Stamp the leader epoch in place; the CRC still holds (it starts at attributes)."""
    _LEADER_EPOCH.pack_into(buf, pos + 12, epoch)


__all__ = [
    "BATCH_HEADER_SIZE",
    "DELETE_HORIZON_BIT",
    "LOG_OVERHEAD",
    "MAGIC",
    "BatchHeader",
    "Header",
    "Record",
    "RecordTuple",
    "SimpleRecord",
    "TimestampType",
    "build_batch",
    "decode_varint",
    "encode_record",
    "encode_unsigned_varint",
    "encode_varint",
    "iter_batches",
    "iter_records",
    "offset_values",
    "read_header",
    "record_tuples",
    "record_values",
    "set_base_offset",
    "set_partition_leader_epoch",
    "split_batches",
    "validate_batch",
]
