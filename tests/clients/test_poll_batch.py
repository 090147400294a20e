"""`Consumer.poll_batch`: the same records as ``poll`` over the same data, as one Arrow
RecordBatch in the Kafka source's schema, decoded by the Spark reader's decoder."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")

from kraft.types import TopicPartition  # noqa: E402
from replication.clients.consumer import Consumer, ConsumerRecord  # noqa: E402
from replication.clients.fetched import scan_partition_batches  # noqa: E402
from storage.columnar.schema import ARROW_SCHEMA, ARROW_SCHEMA_WITH_HEADERS  # noqa: E402
from storage.compression import Compression  # noqa: E402
from storage.records import SimpleRecord, TimestampType, build_batch, set_base_offset  # noqa: E402
from tests.clients.fake_cluster import FakeCluster, FakeNetwork  # noqa: E402
from tests.storage.forged_batches import MALFORMED  # noqa: E402

pytestmark = pytest.mark.timeout(60)

TPS = [TopicPartition("t", p) for p in range(3)]
NOW_MS = 1_700_000_000_000


def _plant(cluster: FakeCluster, tp: TopicPartition, *batches: bytes) -> None:
    with cluster.lock:
        cluster.logs[tp].extend(batches)
        cluster.log_end[tp] = max(
            cluster.log_end[tp],
            *(int.from_bytes(b[:8]) + int.from_bytes(b[23:27]) + 1 for b in batches),
        )


def _mixed_log(p: int) -> list[bytes]:
    """Every kind of batch a log can hold: plain, keyed with null values, headers, zstd and
    lz4, a control batch (skipped by both), log-append time; 5-record batches so a poll of 7
    straddles them."""
    out: list[bytes] = []
    base = 0

    def add(records: list[Any], **kw: Any) -> None:
        nonlocal base
        out.append(build_batch(records, timestamp_ms=NOW_MS + base, base_offset=base, **kw))
        base += len(records)

    add([b"p%d-%d" % (p, i) * 10 for i in range(5)])
    add([SimpleRecord(key=b"k%d" % i, value=None if i % 2 else b"v%d" % i) for i in range(5)])
    add([SimpleRecord(value=b"h", headers=(("a", b"1"), ("b", None))) for _ in range(5)])
    add([b"z%d" % i for i in range(5)], compression=Compression.ZSTD)
    add(
        [SimpleRecord(key=CONTROL_KEY, value=b"\x00\x00\x00\x00\x00\x00")],
        is_control=True,
        is_transactional=True,
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
    )
    add([SimpleRecord(key=b"lz", value=b"l%d" % i) for i in range(5)], compression=Compression.LZ4)
    add([b"t%d" % i for i in range(5)], timestamp_type=TimestampType.LOG_APPEND_TIME)
    add([b"x" * 100 for _ in range(300)])
    return out


CONTROL_KEY = b"\x00\x00\x00\x01"  # version 0, type COMMIT


def _consumer(cluster: FakeCluster, **options: Any) -> Consumer:
    consumer = Consumer(
        cluster.bootstrap,
        network=FakeNetwork(cluster),
        auto_offset_reset="earliest",
        fetch_max_wait_ms=20,
        **options,
    )
    consumer.assign(TPS)
    return consumer


def _as_rows(records: list[ConsumerRecord]) -> list[tuple[Any, ...]]:
    return [
        (r.partition, r.offset, r.key, r.value, r.timestamp, [list(h) for h in r.headers] or None)
        for r in records
    ]


def _batch_rows(batch: Any) -> list[tuple[Any, ...]]:
    cols = batch.to_pydict()
    return [
        (
            cols["partition"][i],
            cols["offset"][i],
            cols["key"][i],
            cols["value"][i],
            int(cols["timestamp"][i].timestamp() * 1000),
            [[h["key"], h["value"]] for h in cols["headers"][i]] if cols["headers"][i] else None,
        )
        for i in range(batch.num_rows)
    ]


def _poll_all(consumer: Consumer, expected: int) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + 20
    while len(out) < expected:
        assert time.monotonic() < deadline, f"stuck at {len(out)} of {expected}"
        out.extend(consumer.poll(0.2))
    return out


def _poll_batches(consumer: Consumer, expected: int, max_records: int) -> list[Any]:
    out: list[Any] = []
    seen = 0
    deadline = time.monotonic() + 20
    while seen < expected:
        assert time.monotonic() < deadline, f"stuck at {seen} of {expected}"
        batch = consumer.poll_batch(0.2, max_records)
        assert batch.schema == ARROW_SCHEMA_WITH_HEADERS
        assert batch.num_rows <= max_records
        seen += batch.num_rows
        out.append(batch)
    return out


def test_poll_batch_returns_what_poll_returns_in_the_kafka_source_schema() -> None:
    cluster = FakeCluster(brokers=2, topics={"t": 3})
    for p, tp in enumerate(TPS):
        _plant(cluster, tp, *_mixed_log(p))
    expected = 3 * (6 * 5 + 300)
    with _consumer(cluster) as consumer:
        records = _poll_all(consumer, expected)
    with _consumer(cluster) as consumer:
        batches = _poll_batches(consumer, expected, max_records=7)  # straddles every batch
        assert {tp: consumer.position(tp) for tp in TPS} == {tp: 331 for tp in TPS}
        assert consumer.poll_batch(0.05).num_rows == 0
    got = [row for b in batches for row in _batch_rows(b)]
    assert sorted(got, key=lambda r: (r[0], r[1])) == sorted(
        _as_rows(records), key=lambda r: (r[0], r[1])
    )
    assert len(got) == expected
    assert all(b.column("topic").to_pylist() == ["t"] * b.num_rows for b in batches)
    assert {r[1] for r in got if r[0] == 0} == set(range(331)) - {20}  # 20: the control batch


def test_poll_batch_without_headers_has_the_schema_without_them_and_default_bound() -> None:
    cluster = FakeCluster(brokers=2, topics={"t": 3})
    _plant(cluster, TPS[0], build_batch([b"v%d" % i for i in range(600)], timestamp_ms=NOW_MS))
    with _consumer(cluster, max_poll_records=250) as consumer:
        first = consumer.poll_batch(5, include_headers=False)
        assert first.schema == ARROW_SCHEMA
        assert first.num_rows == 250
        assert first.column("offset").to_pylist() == list(range(250))
        # poll and poll_batch mix: each goes on from the other's position.
        records = consumer.poll(5)
        assert [r.offset for r in records] == list(range(250, 500))
        rest = consumer.poll_batch(5)
        assert rest.column("offset").to_pylist() == list(range(500, 600))
        assert rest.column("value").to_pylist() == [b"v%d" % i for i in range(500, 600)]


@pytest.mark.parametrize(
    ("kind", "batch"),
    [(k, b) for k, b, _ in MALFORMED if "bomb" not in k],
    ids=[k for k, _, _ in MALFORMED if "bomb" not in k],
)
def test_a_malformed_batch_stops_the_arrow_decode_where_it_stops_poll(
    kind: str, batch: bytes
) -> None:
    poison = bytearray(batch)
    set_base_offset(poison, 4)
    good = build_batch([b"g%d" % i for i in range(4)], timestamp_ms=NOW_MS)
    data = good + bytes(poison) + build_batch([b"after"], timestamp_ms=NOW_MS, base_offset=7)
    outcomes = []
    for batched in (False, True):
        fetched = scan_partition_batches(TPS[0], data, 1)
        assert fetched is not None
        if batched:
            offsets = fetched.arrow(1, 100, include_headers=True).column("offset").to_pylist()
        else:
            offsets = [r.offset for r in fetched.records(1)]
        error = fetched.error and (fetched.error.offset, fetched.error.next_offset)
        outcomes.append((offsets, error, fetched.next_offset))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0][:3] == [1, 2, 3]


def test_poll_batch_without_pyarrow_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster(brokers=1, topics={"t": 1})
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with _consumer(cluster) as consumer, pytest.raises(ImportError, match=r"kraft\[spark\]"):
        consumer.poll_batch(0.01)


_WITHOUT_PANDAS = """
import sys
from tests.clients.test_poll_batch import TPS, _consumer, _plant, _poll_batches
from tests.clients.fake_cluster import FakeCluster
from storage.records import build_batch
cluster = FakeCluster(brokers=2, topics={"t": 3})
for p, tp in enumerate(TPS):
    _plant(cluster, tp, build_batch([b"v" * 100] * 50, timestamp_ms=1, base_offset=0))
with _consumer(cluster) as consumer:
    _poll_batches(consumer, 150, max_records=150)
print("pandas" in sys.modules)
"""


def test_poll_batch_does_not_import_pandas() -> None:
    """pyarrow imports pandas whenever it is asked whether an argument is a pandas object
    (``pa.array``, ``pa.scalar``): seconds in a process's first ``poll_batch``, which builds
    its columns from buffers instead."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PANDAS], capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False"]
