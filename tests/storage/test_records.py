"""Record batches: exact v2 bytes, header fields, CRC, records, compression, in-place rewrites."""

from __future__ import annotations

import struct

import google_crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.compression import Compression
from storage.errors import CorruptRecordError, UnsupportedCompressionTypeError
from storage.records import (
    BATCH_HEADER_SIZE,
    SimpleRecord,
    TimestampType,
    build_batch,
    decode_varint,
    encode_varint,
    iter_batches,
    iter_records,
    offset_values,
    read_header,
    record_values,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
)

TS = 1_503_229_838_908


def _known_batch_bytes() -> bytes:
    """One record (key None, value b"123") at offset 0, leader epoch 1, written field by field
    from Kafka's documented v2 layout (DefaultRecordBatch / DefaultRecord)."""
    record = (
        bytes(
            [
                0x12,  # record length 9, zigzag varint
                0x00,  # attributes
                0x00,  # timestamp delta 0
                0x00,  # offset delta 0
                0x01,  # key length -1 (null)
                0x06,  # value length 3
            ]
        )
        + b"123"
        + bytes([0x00])
    )  # no headers
    covered = (
        struct.pack(">h", 0)  # attributes: no compression, create time
        + struct.pack(">i", 0)  # last offset delta
        + struct.pack(">q", TS)  # base timestamp
        + struct.pack(">q", TS)  # max timestamp
        + struct.pack(">q", -1)  # producer id
        + struct.pack(">h", -1)  # producer epoch
        + struct.pack(">i", -1)  # base sequence
        + struct.pack(">i", 1)  # record count
        + record
    )
    crc = google_crc32c.value(covered)
    return (
        struct.pack(">q", 0)  # base offset
        + struct.pack(">i", 4 + 1 + 4 + len(covered))  # batch length: epoch+magic+crc+covered
        + struct.pack(">i", 1)  # partition leader epoch
        + bytes([2])  # magic
        + struct.pack(">I", crc)
        + covered
    )


def test_batch_bytes_match_the_documented_v2_layout() -> None:
    expected = _known_batch_bytes()
    assert build_batch([b"123"], timestamp_ms=TS, partition_leader_epoch=1) == expected
    # The same 71 bytes a Kafka 0.11 broker writes for this batch (CRC 0x0318a270).
    assert len(expected) == 71
    assert expected[17:21].hex() == "0318a270"


def test_header_fields_are_read_without_decoding_records() -> None:
    batch = build_batch(
        [SimpleRecord(value=b"a", timestamp_ms=10), SimpleRecord(value=b"b", timestamp_ms=30)],
        timestamp_ms=0,
        base_offset=100,
        partition_leader_epoch=7,
        producer_id=42,
        producer_epoch=3,
        base_sequence=9,
    )
    h = read_header(batch)
    assert (h.base_offset, h.last_offset, h.next_offset) == (100, 101, 102)
    assert h.size_bytes == len(batch)
    assert h.partition_leader_epoch == 7
    assert (h.base_timestamp_ms, h.max_timestamp_ms) == (10, 30)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (42, 3, 9, 10)
    assert h.record_count == 2
    assert h.compression is Compression.NONE
    assert h.timestamp_type is TimestampType.CREATE_TIME
    assert not h.is_control and not h.is_transactional


def test_records_round_trip_with_keys_headers_and_nulls() -> None:
    recs = [
        SimpleRecord(key=b"k1", value=b"v1", headers=(("h1", b"x"), ("h2", None))),
        SimpleRecord(key=None, value=None),
        SimpleRecord(key=b"", value=b"", timestamp_ms=5),
    ]
    batch = build_batch(recs, timestamp_ms=100, base_offset=7)
    out = list(iter_records(batch))
    assert [r.offset for r in out] == [7, 8, 9]
    assert [r.timestamp_ms for r in out] == [100, 100, 5]
    assert out[0].key == b"k1" and out[0].value == b"v1"
    assert out[0].headers == (("h1", b"x"), ("h2", None))
    assert out[1].key is None and out[1].value is None
    assert out[2].key == b"" and out[2].value == b""
    assert record_values(batch) == [b"v1", None, b""]


@pytest.mark.parametrize(
    "codec", [Compression.ZSTD, Compression.LZ4, Compression.GZIP, Compression.SNAPPY]
)
def test_compressed_batches_round_trip_and_are_smaller(codec: Compression) -> None:
    values = [b"x" * 100 + str(i).encode() for i in range(200)]
    plain = build_batch(values, timestamp_ms=1)
    packed = build_batch(values, timestamp_ms=1, compression=codec)
    assert len(packed) < len(plain) / 4
    assert validate_batch(packed).compression is codec
    assert record_values(packed) == values


def test_an_unknown_codec_id_raises_a_typed_error() -> None:
    batch = bytearray(build_batch([b"x"], timestamp_ms=1))
    batch[22] |= 0x07  # codec id 7 in the attributes' low bits
    with pytest.raises(UnsupportedCompressionTypeError):
        _ = read_header(bytes(batch)).compression


def test_crc_detects_any_flipped_byte_in_the_covered_range() -> None:
    batch = build_batch([b"hello", b"world"], timestamp_ms=1)
    for i in range(21, len(batch)):
        damaged = bytearray(batch)
        damaged[i] ^= 0x40
        with pytest.raises(CorruptRecordError):
            validate_batch(damaged)


def test_rewriting_base_offset_and_epoch_keeps_crc_and_records() -> None:
    batch = bytearray(build_batch([b"a", b"b", b"c"], timestamp_ms=1))
    set_base_offset(batch, 1_000_000)
    set_partition_leader_epoch(batch, 12)
    h = validate_batch(batch)
    assert (h.base_offset, h.partition_leader_epoch) == (1_000_000, 12)
    assert [r.offset for r in iter_records(batch)] == [1_000_000, 1_000_001, 1_000_002]


def test_iter_batches_stops_before_an_incomplete_tail() -> None:
    a = build_batch([b"a"], timestamp_ms=1, base_offset=0)
    b = build_batch([b"bb", b"cc"], timestamp_ms=1, base_offset=1)
    buf = a + b + b[:30]
    assert [(pos, h.base_offset) for pos, h in iter_batches(buf)] == [(0, 0), (len(a), 1)]


def test_truncated_or_foreign_headers_are_corrupt() -> None:
    batch = build_batch([b"a"], timestamp_ms=1)
    with pytest.raises(CorruptRecordError):
        read_header(batch[: BATCH_HEADER_SIZE - 1])
    with pytest.raises(CorruptRecordError):
        validate_batch(batch[:-1])
    wrong_magic = bytearray(batch)
    wrong_magic[16] = 1
    with pytest.raises(CorruptRecordError):
        read_header(wrong_magic)


def test_malformed_records_section_raises_corrupt_record_not_index_error() -> None:
    batch = bytearray(build_batch([b"abc"], timestamp_ms=1))
    batch[BATCH_HEADER_SIZE] = 0x7F  # record length far past the end
    with pytest.raises(CorruptRecordError):
        list(iter_records(batch))


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError):
        build_batch([], timestamp_ms=1)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trips(n: int) -> None:
    encoded = encode_varint(n)
    assert decode_varint(encoded, 0) == (n, len(encoded))


@given(
    st.lists(
        st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=300)),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from([Compression.NONE, Compression.ZSTD, Compression.LZ4]),
)
def test_any_records_round_trip(
    pairs: list[tuple[bytes | None, bytes | None]], codec: Compression
) -> None:
    batch = build_batch(
        [SimpleRecord(key=k, value=v) for k, v in pairs], timestamp_ms=123, compression=codec
    )
    validate_batch(batch)
    assert [(r.key, r.value) for r in iter_records(batch)] == pairs


@given(
    st.lists(
        st.tuples(
            st.none() | st.binary(max_size=20),
            st.none() | st.binary(max_size=300),
            st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([Compression.NONE, Compression.ZSTD]),
)
def test_offset_values_agrees_with_iter_records(
    recs: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: Compression,
) -> None:
    batch = build_batch(
        [SimpleRecord(key=k, value=v, headers=tuple(h)) for k, v, h in recs],
        timestamp_ms=5,
        base_offset=1000,
        compression=codec,
    )
    assert offset_values(batch) == [(r.offset, r.value) for r in iter_records(batch)]


def test_plain_values_take_the_fast_path_with_the_same_bytes() -> None:
    values = [b"x" * n for n in (0, 1, 63, 64, 200)]
    assert build_batch(values, timestamp_ms=9) == build_batch(
        [SimpleRecord(value=v) for v in values], timestamp_ms=9
    )


def test_offset_values_rejects_a_record_longer_than_its_batch() -> None:
    batch = bytearray(build_batch([b"abc"], timestamp_ms=1))
    batch[BATCH_HEADER_SIZE] = 0x7E  # length 63, past the end
    with pytest.raises(CorruptRecordError):
        offset_values(batch)


@pytest.mark.parametrize("size", [0, 1, 63, 64, 100, 8191, 8192, 20_000])
def test_record_tuples_decodes_every_varint_width_of_lengths_and_deltas(size: int) -> None:
    # one- and two-byte varints are decoded inline, longer ones by decode_varint: each width
    # of record length, key and value length, offset delta (> 64 records) and a negative
    # timestamp delta must decode the same
    from storage.records import record_tuples

    records = [
        SimpleRecord(
            key=None if i % 3 == 0 else b"k" * (size if i % 3 == 1 else 1),
            value=None if i % 5 == 0 else b"v" * size,
            headers=(("h", b"x"),) if i % 7 == 0 else (),
            timestamp_ms=TS - 100 * (i % 4) + (1 << 20) * (i % 2),
        )
        for i in range(70 if size < 8192 else 3)
    ]
    batch = build_batch(records, timestamp_ms=TS, base_offset=7)
    expected = [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in iter_records(batch)]
    assert record_tuples(batch) == expected
    assert [(t[2], t[3], t[4]) for t in expected] == [(r.key, r.value, r.headers) for r in records]
    assert [t[1] for t in expected] == [r.timestamp_ms for r in records]
    assert [t[0] for t in expected] == list(range(7, 7 + len(records)))
    assert record_tuples(b"\x00" * 3 + batch, 3) == expected  # at an offset into a buffer
