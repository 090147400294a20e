"""`validate_produced_batch`: each kind of malformed but CRC-valid batch a client can send is
refused with Kafka's error, and every batch kraft's own producer writes passes."""

from __future__ import annotations

import pytest

from kraft.types import TopicPartition
from replication.clients.batch import ProducerBatch
from storage.batch_validation import validate_produced_batch
from storage.errors import InvalidRecordError, KraftError, RecordTooLargeError
from storage.records import Compression, build_batch, decompress_records, record_tuples
from tests.storage.forged_batches import MALFORMED, NOW_MS, good_batch, valid_batches

LIMIT = 1_048_588


@pytest.mark.parametrize(
    ("kind", "batch", "error"), MALFORMED, ids=[kind for kind, _, _ in MALFORMED]
)
def test_malformed_batch_is_rejected_with_kafkas_error(
    kind: str, batch: bytes, error: type[KraftError]
) -> None:
    with pytest.raises(error) as caught:
        validate_produced_batch(batch, max_message_bytes=LIMIT)
    assert len(caught.value.message) < 200, "errors never echo unbounded input"


@pytest.mark.parametrize(("kind", "batch"), valid_batches(), ids=[k for k, _ in valid_batches()])
def test_valid_batch_passes_and_its_records_decode(kind: str, batch: bytes) -> None:
    header = validate_produced_batch(batch, max_message_bytes=LIMIT)
    assert len(record_tuples(batch)) == header.record_count


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4, Compression.ZSTD])
def test_batches_of_the_producer_client_pass(codec: Compression) -> None:
    batch = ProducerBatch(TopicPartition("t", 0), created_ms=0, batch_size=1 << 20)
    for i in range(200):
        key = None if i % 3 else f"k{i}".encode()
        headers = (("trace", b"x"),) if i % 7 == 0 else None
        batch.try_append(NOW_MS + (i * 37) % 11, key, b"v" * (i % 150), headers)
    batch.set_producer_state(5, 1, 42)
    validate_produced_batch(batch.encode(codec), max_message_bytes=LIMIT)


def test_a_batch_over_max_message_bytes_is_too_large_before_anything_else() -> None:
    batch = good_batch(50)
    with pytest.raises(RecordTooLargeError):
        validate_produced_batch(batch, max_message_bytes=len(batch) - 1)
    validate_produced_batch(batch, max_message_bytes=len(batch))


def test_a_produce_of_two_batches_or_a_torn_one_is_invalid_record() -> None:
    batch = good_batch()
    for records in (batch + batch, batch[:-1], batch[:40], b""):
        with pytest.raises(InvalidRecordError):
            validate_produced_batch(records, max_message_bytes=LIMIT)


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
