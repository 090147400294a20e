"""`validate_produced_batch`: each kind of malformed but CRC-valid batch a client can send is
refused with Kafka's error, and every batch kraft's own producer writes passes."""

from __future__ import annotations

import pytest

from kraft.types import TopicPartition
from replication.clients.batch import ProducerBatch
from storage.batch_validation import validate_produced_batch
from storage.compression import Compression, decompress_records
from storage.config import LogConfig
from storage.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    KraftError,
    RecordTooLargeError,
)
from storage.records import (
    SimpleRecord,
    build_batch,
    record_tuples,
)
from tests.storage.forged_batches import MALFORMED, NOW_MS, good_batch, valid_batches

CONFIG = LogConfig()


@pytest.mark.parametrize(
    ("kind", "batch", "error"), MALFORMED, ids=[kind for kind, _, _ in MALFORMED]
)
def test_malformed_batch_is_rejected_with_kafkas_error(
    kind: str, batch: bytes, error: type[KraftError]
) -> None:
    with pytest.raises(error) as caught:
        validate_produced_batch(batch, CONFIG, NOW_MS)
    assert len(caught.value.message) < 200, "errors never echo unbounded input"


@pytest.mark.parametrize(("kind", "batch"), valid_batches(), ids=[k for k, _ in valid_batches()])
def test_valid_batch_passes_and_its_records_decode(kind: str, batch: bytes) -> None:
    header = validate_produced_batch(batch, CONFIG, NOW_MS)
    assert len(record_tuples(batch)) == header.record_count


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4, Compression.ZSTD])
def test_batches_of_the_producer_client_pass(codec: Compression) -> None:
    batch = ProducerBatch(TopicPartition("t", 0), created_ms=0, batch_size=1 << 20)
    for i in range(200):
        key = None if i % 3 else f"k{i}".encode()
        headers = (("trace", b"x"),) if i % 7 == 0 else None
        batch.try_append(NOW_MS + (i * 37) % 11, key, b"v" * (i % 150), headers)
    batch.set_producer_state(5, 1, 42)
    validate_produced_batch(batch.encode(codec), CONFIG, NOW_MS)


def test_a_batch_over_max_message_bytes_is_too_large_before_anything_else() -> None:
    batch = good_batch(50)
    with pytest.raises(RecordTooLargeError):
        validate_produced_batch(batch, LogConfig(max_message_bytes=len(batch) - 1), NOW_MS)
    validate_produced_batch(batch, LogConfig(max_message_bytes=len(batch)), NOW_MS)


def test_a_produce_of_two_batches_or_a_torn_one_is_invalid_record() -> None:
    batch = good_batch()
    for records in (batch + batch, batch[:-1], batch[:40], b""):
        with pytest.raises(InvalidRecordError):
            validate_produced_batch(records, CONFIG, NOW_MS)


def test_decompression_is_bounded_and_strict() -> None:
    data = b"".join(b"%d," % i for i in range(5000))
    for codec in (Compression.LZ4, Compression.ZSTD):
        packed = build_batch([data], timestamp_ms=0, compression=codec)[61:]
        assert (
            decompress_records(codec, packed)[-10:]
            == (build_batch([data], timestamp_ms=0)[61:][-10:])
        )
        with pytest.raises(RecordTooLargeError):
            decompress_records(codec, packed, limit=100)


def test_a_zstd_frame_without_a_declared_size_is_bounded_too() -> None:
    import zstandard

    packed = zstandard.ZstdCompressor(write_content_size=False).compress(b"\x00" * 10_000)
    assert len(decompress_records(Compression.ZSTD, packed)) == 10_000
    with pytest.raises(RecordTooLargeError):
        decompress_records(Compression.ZSTD, packed, limit=9_999)


def test_timestamps_outside_before_and_after_max_ms_are_invalid_timestamp() -> None:
    """KIP-937's message.timestamp.before.max.ms / after.max.ms, as Kafka's LogValidator."""
    bounded = LogConfig(
        message_timestamp_before_max_ms=60_000, message_timestamp_after_max_ms=1_000
    )

    def at(*timestamps: int) -> bytes:
        return build_batch(
            [SimpleRecord(value=b"v", timestamp_ms=t) for t in timestamps], timestamp_ms=0
        )

    validate_produced_batch(at(NOW_MS - 60_000, NOW_MS + 1_000), bounded, NOW_MS)
    validate_produced_batch(at(-1, -1), bounded, NOW_MS)  # no timestamp: exempt
    for bad in (at(NOW_MS - 60_001), at(NOW_MS, NOW_MS + 1_001), at(-1, NOW_MS - 60_001)):
        with pytest.raises(InvalidTimestampError):
            validate_produced_batch(bad, bounded, NOW_MS)
        validate_produced_batch(bad, CONFIG, NOW_MS)  # unbounded by default, as Kafka 3.x
