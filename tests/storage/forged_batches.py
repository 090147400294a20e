"""Malformed v2 batches with a valid CRC: what a buggy or hostile client can send.

Every batch here is recomputed to carry a correct CRC-32C (except `bad_crc`), so only the
leader's validation of what is inside can refuse it. `MALFORMED` is the table the storage,
core, broker and consumer tests share: ``(kind, batch, expected error class)``.
"""

from __future__ import annotations

import struct

import google_crc32c
import lz4.frame
import zstandard

from storage.compression import Compression
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KraftError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
)
from storage.records import (
    SimpleRecord,
    build_batch,
    encode_varint,
)

NOW_MS = 1_700_000_000_000
BOMB_BYTES = (64 << 20) + 1
"""One byte more than `storage.compression.MAX_DECOMPRESSED_BYTES`."""
_COVERED = struct.Struct(">hiqqqhii")  # attributes .. record count


def good_batch(count: int = 3, *, compression: Compression = Compression.NONE) -> bytes:
    return build_batch(
        [f"good-{i}".encode() for i in range(count)], timestamp_ms=NOW_MS, compression=compression
    )


def raw_record(
    offset_delta: int,
    *,
    value: bytes | None = b"v",
    key: bytes | None = None,
    timestamp_delta: int = 0,
    tail: bytes = b"\x00",
) -> bytes:
    """One record in v2 layout; ``tail`` is the header count and headers as raw bytes."""

    def field(b: bytes | None) -> bytes:
        return encode_varint(-1) if b is None else encode_varint(len(b)) + b

    body = (
        b"\x00"
        + encode_varint(timestamp_delta)
        + encode_varint(offset_delta)
        + field(key)
        + field(value)
        + tail
    )
    return encode_varint(len(body)) + body


def framed(body: bytes) -> bytes:
    """A record body with its length prefix."""
    return encode_varint(len(body)) + body


def forge(
    records: bytes,
    *,
    count: int,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    base_timestamp: int = NOW_MS,
    max_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    magic: int = 2,
    bad_crc: bool = False,
) -> bytes:
    """A batch around the raw ``records`` section with the given header fields and a valid
    CRC (unless ``bad_crc``)."""
    covered = (
        _COVERED.pack(
            attributes,
            count - 1 if last_offset_delta is None else last_offset_delta,
            base_timestamp,
            base_timestamp if max_timestamp is None else max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        + records
    )
    crc = google_crc32c.value(covered) ^ (1 if bad_crc else 0)
    return struct.pack(">qiibI", 0, len(covered) + 9, -1, magic, crc) + covered


def three(**kw: object) -> bytes:
    """Three good records (offset deltas 0, 1, 2) in a forged header."""
    records = b"".join(raw_record(i) for i in range(3))
    return forge(records, **{"count": 3, **kw})  # type: ignore[arg-type]


def _bomb(codec: Compression) -> bytes:
    data = bytes(BOMB_BYTES)
    if codec is Compression.ZSTD:
        packed = zstandard.ZstdCompressor(level=1).compress(data)
    else:
        packed = bytes(lz4.frame.compress(data))
    return forge(packed, count=3, attributes=int(codec))


_RECORDS = b"".join(raw_record(i) for i in range(3))

MALFORMED: list[tuple[str, bytes, type[KraftError]]] = [
    # the header
    ("record count 0", forge(b"", count=0, last_offset_delta=0), InvalidRecordError),
    ("record count 1000, 3 records", three(count=1000), InvalidRecordError),
    ("record count 2, 3 records", three(count=2), InvalidRecordError),
    ("last offset delta 1000", three(last_offset_delta=1000), InvalidRecordError),
    ("magic 1", three(magic=1), CorruptRecordError),
    (
        "base offset 42",
        build_batch([b"a"], timestamp_ms=NOW_MS, base_offset=42),
        InvalidRecordError,
    ),
    ("bad CRC", three(bad_crc=True), CorruptRecordError),
    ("control bit", three(attributes=0x20), InvalidRecordError),
    ("transactional bit", three(attributes=0x10), InvalidRecordError),
    ("producer id without sequence", three(producer_id=7, producer_epoch=0), InvalidRecordError),
    ("negative producer id", three(producer_id=-7), InvalidRecordError),
    # timestamps
    ("negative base timestamp", three(base_timestamp=-5, max_timestamp=-5), InvalidTimestampError),
    (
        "negative record timestamp",
        forge(
            raw_record(0) + raw_record(1, timestamp_delta=-(NOW_MS + 2)),
            count=2,
        ),
        InvalidTimestampError,
    ),
    ("LogAppendTime set by the client", three(attributes=0x08), InvalidTimestampError),
    ("max timestamp lies", three(max_timestamp=NOW_MS + 10**9), InvalidRecordError),
    # compression
    ("gzip flag on plain records", three(attributes=1), CorruptRecordError),
    ("snappy flag on plain records", three(attributes=2), CorruptRecordError),
    ("codec id 7", three(attributes=7), UnsupportedCompressionTypeError),
    ("lz4 flag on plain records", three(attributes=3), CorruptRecordError),
    (
        "zstd garbage",
        forge(b"\x28\xb5\x2f\xfd" + b"junk" * 8, count=3, attributes=4),
        CorruptRecordError,
    ),
    (
        "zstd truncated",
        forge(zstandard.ZstdCompressor().compress(_RECORDS * 50)[:-4], count=3, attributes=4),
        CorruptRecordError,
    ),
    (
        "zstd records lie about the count",
        forge(zstandard.ZstdCompressor().compress(_RECORDS), count=4, attributes=4),
        InvalidRecordError,
    ),
    ("zstd bomb", _bomb(Compression.ZSTD), RecordTooLargeError),
    ("lz4 bomb", _bomb(Compression.LZ4), RecordTooLargeError),
    # the records
    ("garbage records", forge(bytes(range(7, 250)), count=3), InvalidRecordError),
    ("trailing bytes", forge(_RECORDS + b"\x00\x00", count=3), InvalidRecordError),
    (
        "offset deltas 0, 2, 3",
        forge(raw_record(0) + raw_record(2) + raw_record(3), count=3),
        InvalidRecordError,
    ),
    (
        "offset deltas 0, 0, 1",
        forge(raw_record(0) + raw_record(0) + raw_record(1), count=3),
        InvalidRecordError,
    ),
    ("varint of 11 bytes", forge(b"\xff" * 11 + b"\x00" * 20, count=1), InvalidRecordError),
    (
        "record length past the batch",
        forge(encode_varint(200) + raw_record(0)[1:], count=1),
        InvalidRecordError,
    ),
    (
        "record length short of its fields",
        forge(encode_varint(6) + raw_record(0)[1:], count=1),
        InvalidRecordError,
    ),
    (
        "negative key length",
        forge(framed(b"\x00\x00\x00" + encode_varint(-5) + b"\x02v\x00"), count=1),
        InvalidRecordError,
    ),
    (
        "huge header count",
        forge(raw_record(0, tail=encode_varint(2**31 - 1) + b"\x00" * 8), count=1),
        InvalidRecordError,
    ),
    (
        "negative header count",
        forge(raw_record(0, tail=encode_varint(-3) + b"\x00" * 8), count=1),
        InvalidRecordError,
    ),
    (
        "header key not UTF-8",
        forge(raw_record(0, tail=b"\x02" + encode_varint(2) + b"\xff\xfe" + b"\x01"), count=1),
        InvalidRecordError,
    ),
    (
        "null header key",
        forge(raw_record(0, tail=b"\x02\x01\x01"), count=1),
        InvalidRecordError,
    ),
]
"""Each malformed kind, its batch, and the error a leader must answer with."""


def valid_batches() -> list[tuple[str, bytes]]:
    """Batches a leader must accept: every codec, keys, null values, headers, no timestamp,
    idempotence fields."""
    rich = [
        SimpleRecord(value=b"v", key=b"k", headers=(("h", b"x"), ("n", None))),
        SimpleRecord(value=None, key=b"tombstone"),
        SimpleRecord(value=b"earlier", timestamp_ms=NOW_MS - 5),
    ]
    return [
        ("plain", good_batch()),
        ("lz4", good_batch(compression=Compression.LZ4)),
        ("zstd", good_batch(compression=Compression.ZSTD)),
        ("keys, headers, nulls", build_batch(rich, timestamp_ms=NOW_MS)),
        ("no timestamp", build_batch([b"a", b"b"], timestamp_ms=-1)),
        (
            "idempotent",
            build_batch(
                [b"a"], timestamp_ms=NOW_MS, producer_id=3, producer_epoch=0, base_sequence=0
            ),
        ),
        # aiokafka's non-idempotent producer: no producer id, base sequence 0 (Kafka ignores
        # the sequence without a producer id).
        ("sequence without producer id", three(base_sequence=0)),
        ("300 records", good_batch(300)),
        ("a 100 KB record", build_batch([b"k" * 100_000, b"v"], timestamp_ms=NOW_MS)),
    ]
