"""`scan_records`, the numpy check of a produced batch's records: it accepts only what the walk
record by record accepts, with the same timestamps, and leaves everything else to the walk,
so `validate_produced_batch` refuses a large malformed batch exactly as a small one."""

from __future__ import annotations

import random

import pytest

from storage.batch_validation import SCAN_MIN_RECORDS, _walk_records, validate_produced_batch
from storage.config import LogConfig
from storage.errors import InvalidRecordError, KraftError
from storage.record_scan import scan_records
from storage.records import BATCH_HEADER_SIZE, SimpleRecord, build_batch, encode_varint
from tests.storage.forged_batches import NOW_MS, forge, raw_record


def _batch(count: int, *, step_ms: float = 0.1, key: bytes | None = None) -> bytes:
    """A producer's batch of same-sized records, ``step_ms`` apart (timestamp deltas grow a
    varint byte at 64 ms and at 8192 ms)."""
    return build_batch(
        [
            SimpleRecord(value=b"%100d" % i, key=key, timestamp_ms=NOW_MS + int(i * step_ms))
            for i in range(count)
        ],
        timestamp_ms=NOW_MS,
    )


def _both(batch: bytes) -> tuple[tuple[int, int] | None, tuple[int, int] | KraftError]:
    """The scan's answer and the walk's (or the walk's error) for a batch's records."""
    count = int.from_bytes(batch[57:61], "big")
    scanned = scan_records(batch, BATCH_HEADER_SIZE, len(batch), count)
    try:
        walked: tuple[int, int] | KraftError = _walk_records(
            batch, BATCH_HEADER_SIZE, len(batch), count
        )
    except KraftError as e:
        walked = e
    return scanned, walked


@pytest.mark.parametrize(
    ("count", "step_ms", "key"),
    [
        (SCAN_MIN_RECORDS, 0.1, None),
        (600, 0.1, None),  # offset deltas grow a byte at record 64
        (600, 0.5, b"key-1"),  # and timestamp deltas at 64 ms: three runs
        (300, 20.0, None),  # timestamp deltas of one and two bytes
        (9000, 0.01, None),  # offset deltas of three bytes from record 8192
    ],
)
def test_the_scan_proves_a_producers_batch_with_the_walks_timestamps(
    count: int, step_ms: float, key: bytes | None
) -> None:
    scanned, walked = _both(_batch(count, step_ms=step_ms, key=key))
    assert scanned is not None
    assert scanned == walked


def test_negative_or_wide_timestamp_deltas_are_left_to_the_walk() -> None:
    records = b"".join(raw_record(i, timestamp_delta=(-1) ** i * i) for i in range(100))
    assert _both(forge(records, count=100)) == (None, (-99, 98))
    scanned, walked = _both(_batch(300, step_ms=40.0))  # up to 11,960 ms: three bytes
    assert scanned is None
    assert walked == (0, 11_960)


def test_what_the_scan_cannot_prove_it_leaves_to_the_walk() -> None:
    """Headers (the walk checks their keys) and records of varying sizes are not refused by
    the scan: it answers None and the walk decides."""
    with_headers = build_batch(
        [SimpleRecord(value=b"v" * 50, headers=(("h", b"x"),)) for _ in range(100)],
        timestamp_ms=NOW_MS,
    )
    varying = build_batch([b"v" * (i % 37) for i in range(200)], timestamp_ms=NOW_MS)
    for batch in (with_headers, varying):
        scanned, walked = _both(batch)
        assert scanned is None
        assert not isinstance(walked, KraftError)


def test_a_mutated_batch_is_accepted_by_the_scan_only_where_the_walk_accepts_it() -> None:
    """The scan's soundness, on random damage a client with a valid CRC could send: single
    bytes changed, bytes inserted or removed, anywhere in the records of a 200-record batch."""
    batch = bytearray(_batch(200, step_ms=0.5))
    rng = random.Random(27)
    accepted = 0
    for _ in range(1000):
        mutated = bytearray(batch)
        at = rng.randrange(BATCH_HEADER_SIZE, len(batch))
        match rng.randrange(3):
            case 0:
                mutated[at] = rng.randrange(256)
            case 1:
                mutated.insert(at, rng.randrange(256))
            case _:
                del mutated[at]
        scanned, walked = _both(bytes(mutated))
        if scanned is not None:
            accepted += 1
            assert scanned == walked, (at, scanned, walked)
    assert accepted > 0  # value bytes and attributes may change freely


@pytest.mark.parametrize(
    "kind",
    ["offset delta", "trailing bytes", "length past the end", "header key not UTF-8"],
)
def test_a_large_malformed_batch_is_refused_as_a_small_one(kind: str) -> None:
    """Damage in the middle of many same-shaped records, where the scan runs."""
    records = [raw_record(i, value=b"x" * 90) for i in range(500)]
    if kind == "offset delta":
        records[300] = raw_record(301, value=b"x" * 90)
        section = b"".join(records)
    elif kind == "trailing bytes":
        section = b"".join(records) + b"\x00"
    elif kind == "length past the end":
        section = b"".join(records[:-1]) + encode_varint(200) + records[-1][1:]
    else:
        tail = b"\x02" + encode_varint(2) + b"\xff\xfe" + b"\x01"
        records[250] = raw_record(250, value=b"x" * 90, tail=tail)
        section = b"".join(records)
    batch = forge(section, count=500)
    with pytest.raises(InvalidRecordError):
        validate_produced_batch(batch, LogConfig(), NOW_MS)
    assert _both(batch)[0] is None
