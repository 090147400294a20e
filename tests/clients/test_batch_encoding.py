"""`ProducerBatch.try_append`'s inline encoding of common records is `encode_record`'s bytes."""

from __future__ import annotations

import pytest

from kraft.types import TopicPartition
from replication.clients.batch import ProducerBatch, encode_record
from storage.records import iter_records, validate_batch

TP = TopicPartition("t", 0)


@pytest.mark.parametrize(
    ("key", "value", "headers"),
    [
        (None, b"v" * 100, None),
        (b"k", b"v" * 100, None),
        (b"", b"", None),
        (None, b"x" * 5000, None),  # past the inline path's size limit
        (b"k" * 300, b"v" * 3000, None),
        (None, None, None),
        (b"k", b"v", (("h", b"1"),)),
    ],
)
def test_appended_records_are_encode_record_bytes(
    key: bytes | None, value: bytes | None, headers: tuple[tuple[str, bytes], ...] | None
) -> None:
    batch = ProducerBatch(TP, created_ms=0, batch_size=1 << 20)
    timestamps = [1_000, 1_005, 999, 1_000 + (1 << 15)]  # a negative and a large delta
    for ts in timestamps:
        assert batch.try_append(ts, key, value, headers) is not None
    expected = b"".join(
        encode_record(i, ts - timestamps[0], key, value, headers) for i, ts in enumerate(timestamps)
    )
    encoded = batch.encode()
    assert encoded.endswith(expected)
    assert batch.size_bytes == len(expected)
    validate_batch(encoded)
    records = list(iter_records(encoded))
    assert [r.value for r in records] == [value] * len(timestamps)
    assert [r.key for r in records] == [key] * len(timestamps)
