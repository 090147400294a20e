"""gzip and snappy beside lz4 and zstd, both directions against kafka-python's codecs, and the
leader's recompression to a topic's ``compression.type`` (Kafka's ``LogValidator``)."""

from __future__ import annotations

import zlib

import pytest

from storage.batch_validation import convert_to_topic_codec, validate_produced_batch
from storage.compression import (
    CODEC_NAMES,
    Compression,
    compress,
    decompress_records,
    recompress_batch,
)
from storage.config import LogConfig
from storage.errors import CorruptRecordError, InvalidConfigError, RecordTooLargeError
from storage.records import (
    BATCH_HEADER_SIZE,
    SimpleRecord,
    build_batch,
    iter_records,
    read_header,
    validate_batch,
)

_CODECS = list(Compression)
_RECORDS = [
    SimpleRecord(key=b"k%d" % i, value=b"value-%d " % i * 20, headers=(("h", b"x"),))
    for i in range(300)
]
_NOW_MS = 1_700_000_000_000


def _records(batch: bytes) -> list[tuple[int, bytes | None, bytes | None, object]]:
    return [(r.offset, r.key, r.value, r.headers) for r in iter_records(batch)]


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY])
def test_gzip_and_snappy_frames_are_bounded_like_the_other_codecs(codec: Compression) -> None:
    frame = compress(codec, b"\0" * 100_000)
    assert decompress_records(codec, frame) == b"\0" * 100_000
    with pytest.raises(RecordTooLargeError):
        decompress_records(codec, frame, limit=99_999)
    with pytest.raises(CorruptRecordError):
        decompress_records(codec, frame[: len(frame) // 2])
    with pytest.raises(CorruptRecordError):
        decompress_records(codec, b"not a frame of anything")


def test_snappy_is_written_in_xerial_framing_and_raw_blocks_are_read_too() -> None:
    """The Java client's SnappyOutputStream and kafka-python write xerial's framing; kafka-python
    also reads a raw snappy block, and so does kraft."""
    import cramjam

    data = bytes(range(256)) * 400  # > one 32 KiB xerial block
    frame = compress(Compression.SNAPPY, data)
    assert frame.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    assert decompress_records(Compression.SNAPPY, frame) == data
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress_records(Compression.SNAPPY, raw) == data


def test_gzip_is_one_gzip_member_as_java_writes() -> None:
    frame = compress(Compression.GZIP, b"abc" * 100)
    assert frame[:2] == b"\x1f\x8b"
    assert zlib.decompress(frame, 31) == b"abc" * 100


# --- kafka-python, both directions -------------------------------------------------------------


def _kafka_python_batch(codec: Compression) -> bytes:
    pytest.importorskip("kafka")
    from kafka.record.default_records import DefaultRecordBatchBuilder

    if codec is Compression.SNAPPY:
        pytest.importorskip("snappy")  # kafka-python's snappy needs python-snappy
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=7,
        producer_epoch=1,
        base_sequence=40,
        batch_size=1 << 20,
    )
    for i, r in enumerate(_RECORDS):
        builder.append(i, timestamp=_NOW_MS + i, key=r.key, value=r.value, headers=[("h", b"x")])
    return bytes(builder.build())


@pytest.mark.parametrize("codec", _CODECS, ids=lambda c: c.name.lower())
def test_kraft_reads_and_the_leader_accepts_what_kafka_python_writes(codec: Compression) -> None:
    batch = _kafka_python_batch(codec)
    header = validate_produced_batch(batch, LogConfig(), _NOW_MS)
    assert header.compression is codec
    records = _records(batch)
    assert [(o, k, v) for o, k, v, _ in records] == [
        (i, r.key, r.value) for i, r in enumerate(_RECORDS)
    ]
    assert {h for *_, h in records} == {(("h", b"x"),)}


@pytest.mark.parametrize("codec", _CODECS, ids=lambda c: c.name.lower())
def test_kafka_python_reads_what_kraft_writes(codec: Compression) -> None:
    pytest.importorskip("kafka")
    if codec is Compression.SNAPPY:
        pytest.importorskip("snappy")
    from kafka.record.default_records import DefaultRecordBatch

    batch = build_batch(_RECORDS, timestamp_ms=_NOW_MS, base_offset=100, compression=codec)
    theirs = DefaultRecordBatch(bytearray(batch))
    assert theirs.compression_type == int(codec)
    assert theirs.validate_crc()
    assert [(r.offset, r.key, r.value) for r in theirs] == [
        (100 + i, r.key, r.value) for i, r in enumerate(_RECORDS)
    ]


# --- recompression on the leader ----------------------------------------------------------------


@pytest.mark.parametrize("source", _CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("target", _CODECS, ids=lambda c: c.name.lower())
def test_recompression_keeps_every_header_field_but_codec_length_and_crc(
    source: Compression, target: Compression
) -> None:
    batch = build_batch(
        _RECORDS,
        timestamp_ms=_NOW_MS,
        base_offset=55,
        partition_leader_epoch=3,
        compression=source,
        producer_id=9,
        producer_epoch=2,
        base_sequence=1000,
    )
    out = recompress_batch(batch, target)
    before, after = read_header(batch), validate_batch(out)  # CRC recomputed
    assert after.compression is target
    assert after.size_bytes == len(out)
    for field in (
        "base_offset",
        "partition_leader_epoch",
        "last_offset_delta",
        "base_timestamp_ms",
        "max_timestamp_ms",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "record_count",
    ):
        assert getattr(after, field) == getattr(before, field), field
    assert after.attributes & ~0x07 == before.attributes & ~0x07
    assert _records(out) == _records(batch)
    if source is target:
        assert out is batch


@pytest.mark.parametrize(
    ("topic", "expected"),
    [("producer", Compression.LZ4), ("uncompressed", Compression.NONE)]
    + [(name, codec) for name, codec in CODEC_NAMES.items() if name != "none"],
)
def test_the_topic_compression_type_decides_the_stored_codec(
    topic: str, expected: Compression
) -> None:
    config = LogConfig.from_properties({"compression.type": topic})
    batch = build_batch(_RECORDS, timestamp_ms=_NOW_MS, compression=Compression.LZ4)
    header = validate_produced_batch(batch, config, _NOW_MS)
    stored = convert_to_topic_codec(batch, header, config)
    assert read_header(stored).compression is expected
    assert _records(stored) == _records(batch)


def test_a_batch_that_grows_past_max_message_bytes_by_recompression_is_refused() -> None:
    values = [bytes(range(256)) * 4]  # incompressible-ish: larger uncompressed than zstd'd
    batch = build_batch(values * 20, timestamp_ms=_NOW_MS, compression=Compression.ZSTD)
    config = LogConfig.from_properties(
        {"compression.type": "uncompressed", "max.message.bytes": str(len(batch) + 10)}
    )
    header = validate_produced_batch(batch, config, _NOW_MS)
    with pytest.raises(RecordTooLargeError, match="after conversion"):
        convert_to_topic_codec(batch, header, config)


def test_an_unknown_compression_type_is_refused_by_the_log_config() -> None:
    with pytest.raises(InvalidConfigError):
        LogConfig.from_properties({"compression.type": "brotli"})
    assert BATCH_HEADER_SIZE == 61
