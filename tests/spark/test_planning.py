"""The pure parts of the Spark package, without a JVM or a cluster: options, range splitting,
rate limits, the Arrow decoder, and the fetcher's range and data-loss rules over a fake
network."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from kraft.types import TopicPartition
from replication.messages import (
    BrokerFetchResponse,
    FetchPartitionData,
    FetchTopicResponse,
    MetadataBroker,
    MetadataPartition,
    MetadataResponse,
    MetadataTopic,
)
from spark.fetcher import RangeFetcher
from spark.offsets import OffsetRange, rate_limit, split_ranges
from spark.options import (
    EARLIEST,
    LATEST,
    Assign,
    ReadOptions,
    Subscribe,
    SubscribePattern,
    WriteOptions,
)
from storage.columnar import decode_arrow
from storage.columnar.schema import ARROW_SCHEMA, ARROW_SCHEMA_WITH_HEADERS, ColumnBuilder
from storage.columnar.vectorized import decode_columns, header_columns
from storage.compression import Compression
from storage.errors import ErrorCode, OffsetOutOfRangeError
from storage.records import SimpleRecord, build_batch, iter_records

pytestmark = pytest.mark.spark

TP0 = TopicPartition("t", 0)


# -- options -------------------------------------------------------------------------------------


def test_options_accept_kafka_names_in_any_case() -> None:
    opts = ReadOptions.parse(
        {
            "kraft.bootstrap": "h:1",
            "subscribe": "a, b",
            "startingoffsets": '{"a":{"0":23,"1":-2}}',
            "ENDINGOFFSETS": "latest",
            "minPartitions": "4",
            "failOnDataLoss": "False",
            "includeheaders": "true",
            "KAFKA.ISOLATION.LEVEL": "read_committed",
        }
    )
    assert opts.read_committed
    assert not ReadOptions.parse({"bootstrap": "h:1", "subscribe": "a"}).read_committed
    assert opts.subscription == Subscribe(("a", "b"))
    assert opts.starting.offset_for(TopicPartition("a", 0)) == 23
    assert opts.starting.offset_for(TopicPartition("a", 1)) == EARLIEST
    assert opts.starting.offset_for(TopicPartition("a", 2)) == EARLIEST  # batch default
    assert opts.ending.default == LATEST
    assert (opts.min_partitions, opts.fail_on_data_loss, opts.include_headers) == (4, False, True)


def test_streaming_starts_at_latest_by_default_and_kafka_bootstrap_is_accepted() -> None:
    opts = ReadOptions.parse(
        {"kafka.bootstrap.servers": "h:1", "subscribePattern": "ev.*"}, streaming=True
    )
    assert opts.bootstrap == "h:1"
    assert opts.starting.default == LATEST
    assert isinstance(opts.subscription, SubscribePattern)
    assert opts.subscription.matches("events") and not opts.subscription.matches("xevents")


def test_assign_and_timestamps_parse() -> None:
    opts = ReadOptions.parse(
        {
            "bootstrap": "h:1",
            "assign": '{"t":[0,2]}',
            "startingTimestamp": "1000",
            "endingOffsetsByTimestamp": '{"t":{"2":5000}}',
        }
    )
    assert opts.subscription == Assign((TP0, TopicPartition("t", 2)))
    assert opts.starting.timestamp_for(TP0) == 1000
    assert opts.ending.timestamp_for(TopicPartition("t", 2)) == 5000
    assert opts.ending.timestamp_for(TP0) is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "t"}, "kraft.bootstrap"),
        ({"kraft.bootstrap": "h:1"}, "exactly one of"),
        ({"kraft.bootstrap": "h:1", "subscribe": "a", "assign": '{"a":[0]}'}, "exactly one"),
        ({"kraft.bootstrap": "h:1", "assign": '{"a":"x"}'}, "list of ints"),
        ({"kraft.bootstrap": "h:1", "subscribe": "a", "startingOffsets": "{"}, "not valid JSON"),
        ({"kraft.bootstrap": "h:1", "subscribe": "a", "endingOffsets": "earliest"}, "earliest"),
        ({"kraft.bootstrap": "h:1", "subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, "-2"),
        ({"kraft.bootstrap": "h:1", "subscribe": "a", "minPartitions": "0"}, "minpartitions"),
        ({"kraft.bootstrap": "h:1", "subscribe": "a", "failOnDataLoss": "yes"}, "true or false"),
        ({"kraft.bootstrap": "h:1", "subscribePattern": "("}, "not a valid regex"),
        (
            {"kraft.bootstrap": "h:1", "subscribe": "a", "kafka.isolation.level": "serializable"},
            "kafka.isolation.level must be",
        ),
    ],
)
def test_bad_options_raise_value_error_naming_the_option(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ReadOptions.parse(options)


def test_write_options_pass_kafka_prefixed_settings_to_the_producer() -> None:
    opts = WriteOptions.parse({"kraft.bootstrap": "h:1", "topic": "t", "kafka.linger.ms": "9"})
    assert (opts.topic, dict(opts.producer)) == ("t", {"linger.ms": "9"})


# -- ranges and limits ---------------------------------------------------------------------------


def test_min_partitions_splits_ranges_in_proportion_to_their_size() -> None:
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 100, 200), OffsetRange("t", 2, 5, 5)]
    split = split_ranges(ranges, min_partitions=10)
    assert [r for r in split if r.partition == 1] == [OffsetRange("t", 1, 100, 200)]
    zero = [r for r in split if r.partition == 0]
    assert len(zero) == 9
    assert zero[0].from_offset == 0 and zero[-1].until_offset == 900
    assert all(a.until_offset == b.from_offset for a, b in itertools.pairwise(zero))
    assert all(r.size > 0 for r in split)


def test_max_records_caps_every_range_and_fewer_ranges_than_asked_are_kept() -> None:
    ranges = [OffsetRange("t", 0, 0, 10)]
    assert split_ranges(ranges, min_partitions=1) == ranges
    assert [r.size for r in split_ranges(ranges, max_records=4)] == [3, 3, 4]
    with pytest.raises(ValueError, match="minPartitions"):
        split_ranges(ranges, min_partitions=0)


def test_offset_range_rejects_an_end_before_its_start() -> None:
    with pytest.raises(ValueError, match="invalid offset range"):
        OffsetRange("t", 0, 5, 4)


def test_rate_limit_prorates_by_backlog_like_kafka() -> None:
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert rate_limit({a: 0, b: 0}, {a: 10, b: 10}, 100) == {a: 10, b: 10}
    assert rate_limit({a: 0, b: 0}, {a: 90, b: 10}, 50) == {a: 45, b: 5}
    assert rate_limit({a: 0, b: 0}, {a: 1000, b: 1}, 10) == {a: 9, b: 1}  # < 1 rounds up


# -- the Arrow decoder ---------------------------------------------------------------------------


def _batches() -> list[bytes]:
    plain = build_batch([b"a%d" % i for i in range(100)], timestamp_ms=1_000, base_offset=0)
    mixed = build_batch(
        [
            SimpleRecord(value=b"x" * 300, key=b"k", headers=(("h", b"1"), ("n", None))),
            SimpleRecord(value=None, key=None, timestamp_ms=123_456_789_000),
        ],
        timestamp_ms=2_000,
        base_offset=100,
    )
    zstd = build_batch(
        [SimpleRecord(value=b"z", key=b"zk")] * 3,
        timestamp_ms=3_000,
        base_offset=102,
        compression=Compression.ZSTD,
    )
    return [plain, mixed, zstd]


@pytest.mark.parametrize("include_headers", [False, True])
def test_column_builder_matches_iter_records_and_the_exact_schema(include_headers: bool) -> None:
    batches = _batches()
    builder = ColumnBuilder("t", 7, include_headers=include_headers)
    assert builder.add(b"".join(batches) + batches[0][:30], 50, 104) == 105  # torn tail ignored
    batch = builder.build()
    assert batch.schema == (ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA)
    expected = [r for b in batches for r in iter_records(b) if 50 <= r.offset < 104]
    got = batch.to_pylist()
    assert [g["offset"] for g in got] == [r.offset for r in expected]
    for g, r in zip(got, expected, strict=True):
        assert (g["key"], g["value"], g["topic"], g["partition"]) == (r.key, r.value, "t", 7)
        assert int(g["timestamp"].timestamp() * 1000) == r.timestamp_ms
        if include_headers:
            want = [{"key": k, "value": v} for k, v in r.headers] or None
            assert g["headers"] == want
    assert len(builder) == 0


def test_vectorized_decoder_equals_the_record_by_record_one() -> None:
    rng = random.Random(5)
    batches, base = [], 0
    for _ in range(20):
        records = [
            SimpleRecord(
                value=None if j % 7 == 0 else rng.randbytes(rng.randrange(0, 300)),
                key=None if j % 3 else rng.randbytes(rng.randrange(0, 20)),
                timestamp_ms=1_700_000_000_000 + rng.randrange(-(10**9), 10**9),
            )
            for j in range(rng.randrange(1, 150))
        ]
        batches.append(build_batch(records, timestamp_ms=1, base_offset=base))
        base += len(records)
    data = b"".join(batches) + batches[0][:70]
    for low, high in [(0, base), (17, base - 5), (100, 101), (base, base + 1)]:
        for include_headers in (False, True):
            fast = decode_columns(data, low, high, "t", 3, include_headers=include_headers)
            slow = ColumnBuilder("t", 3, include_headers=include_headers)
            slow.add(data, low, high)
            assert fast is not None and fast.equals(slow.build())


def _reference(data: bytes, low: int, high: int, include_headers: bool = False) -> Any:
    slow = ColumnBuilder("t", 3, include_headers=include_headers)
    slow.add(data, low, high)
    return slow.build()


@pytest.mark.parametrize("odd_every", [0, 1, 5, 40, 997])
def test_vectorized_decoder_runs_of_equal_records_equal_the_record_by_record_one(
    odd_every: int,
) -> None:
    """Mostly same-sized records (the speculative walk and the strided value copy), with an
    odd-sized or null value every ``odd_every`` records (0: never), timestamps that cross the
    one-byte varint range, batches longer than the run window, and a torn tail."""
    rng = random.Random(odd_every)
    batches, base = [], 0
    for count in (1, 2, 63, 64, 65, 3000, 5000, 700):
        records = []
        for j in range(count):
            value: bytes | None = b"v%07d" % (base + j) + b"x" * 92
            if odd_every and j % odd_every == odd_every - 1:
                value = None if j % 2 else rng.randbytes(rng.randrange(0, 400))
            records.append(SimpleRecord(value=value, timestamp_ms=1_000 + j // 40))
        batches.append(build_batch(records, timestamp_ms=1_000, base_offset=base))
        base += count
    data = b"".join(batches) + batches[-1][:100]
    for low, high in [(0, base), (129, base - 1), (130, 131), (64, 3200)]:
        fast = decode_columns(data, low, high, "t", 3, include_headers=False)
        assert fast is not None and fast.equals(_reference(data, low, high))


def test_vectorized_decoder_equal_values_with_zero_length() -> None:
    records = [SimpleRecord(value=b"", key=b"k") for _ in range(200)]
    data = build_batch(records, timestamp_ms=5, base_offset=0)
    fast = decode_columns(data, 0, 200, "t", 3, include_headers=False)
    assert fast is not None and fast.equals(_reference(data, 0, 200))


def test_vectorized_decoder_leaves_headers_and_compression_to_the_slow_path() -> None:
    with_headers = build_batch([SimpleRecord(value=b"v", headers=(("h", b"1"),))], timestamp_ms=1)
    assert decode_columns(with_headers, 0, 1, "t", 0, include_headers=True) is None
    without = decode_columns(with_headers, 0, 1, "t", 0, include_headers=False)
    assert without is not None and without.column("value").to_pylist() == [b"v"]
    assert decode_columns(_batches()[2], 0, 200, "t", 0, include_headers=False) is None
    corrupt = bytearray(_batches()[0])
    corrupt[61] = 0x7F  # a record length far past the batch
    assert decode_columns(bytes(corrupt), 0, 200, "t", 0, include_headers=False) is None


# -- the fetcher over a fake network -------------------------------------------------------------


class FakeNetwork:
    """One broker leading ``t-0``, whose log is ``batches`` from ``log_start_offset`` on."""

    def __init__(self, batches: list[bytes], log_start_offset: int, high_watermark: int) -> None:
        self.batches = batches
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark
        self.fetched: list[int] = []

    def fetch_metadata(self, topics: Any, **_: Any) -> MetadataResponse:
        partition = MetadataPartition(
            partition_index=0, leader_id=1, leader_epoch=3, replica_nodes=(1,), isr_nodes=(1,)
        )
        return MetadataResponse(
            brokers=(MetadataBroker(node_id=1, host="fake", port=1),),
            topics=(MetadataTopic(name="t", partitions=(partition,)),),
        )

    def call_async(
        self, address: str, method: str, request: Any, cls: Any, on_done: Any, **_: Any
    ) -> None:
        offset = request.topics[0].partitions[0].fetch_offset
        self.fetched.append(offset)
        common: dict[str, Any] = {
            "partition_index": 0,
            "high_watermark": self.high_watermark,
            "log_start_offset": self.log_start_offset,
        }
        if offset < self.log_start_offset or offset > self.high_watermark:
            part = FetchPartitionData(**common, error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
        else:  # two batches per response at most, like a small fetch.max.bytes
            wanted = [
                b
                for b in self.batches
                if _base(b) + 10 > offset and _base(b) >= self.log_start_offset
            ]
            part = FetchPartitionData(**common, records=b"".join(wanted[:2]))
        on_done(
            BrokerFetchResponse(responses=(FetchTopicResponse(topic="t", partitions=(part,)),)),
            None,
        )

    def close(self) -> None:
        pass


def _base(batch: bytes) -> int:
    return int.from_bytes(batch[:8], "big")


def _log(count: int) -> list[bytes]:
    return [
        build_batch([b"r%d" % (base + i) for i in range(10)], timestamp_ms=1, base_offset=base)
        for base in range(0, count, 10)
    ]


def test_fetcher_stops_exactly_at_until_offset_across_fetches() -> None:
    network = FakeNetwork(_log(100), log_start_offset=0, high_watermark=100)
    with RangeFetcher("fake:1", network=network) as fetcher:  # type: ignore[arg-type]
        records = list(fetcher.records(OffsetRange("t", 0, 15, 57)))
    assert [r.offset for r in records] == list(range(15, 57))
    assert [r.value for r in records] == [b"r%d" % i for i in range(15, 57)]


def test_fetcher_reports_data_loss_below_the_log_start_offset() -> None:
    network = FakeNetwork(_log(100), log_start_offset=40, high_watermark=100)
    fetcher = RangeFetcher("fake:1", network=network)  # type: ignore[arg-type]
    with fetcher, pytest.raises(OffsetOutOfRangeError, match=r"offsets \[0, 40\) of t-0"):
        list(fetcher.records(OffsetRange("t", 0, 0, 60)))


def test_fetcher_skips_lost_offsets_when_told_to() -> None:
    network = FakeNetwork(_log(100), log_start_offset=40, high_watermark=100)
    with RangeFetcher("fake:1", network=network, fail_on_data_loss=False) as fetcher:  # type: ignore[arg-type]
        offsets = [r.offset for r in fetcher.records(OffsetRange("t", 0, 0, 60))]
    assert offsets == list(range(40, 60))
    network = FakeNetwork(_log(100), log_start_offset=80, high_watermark=100)
    with RangeFetcher("fake:1", network=network, fail_on_data_loss=False) as fetcher:  # type: ignore[arg-type]
        assert list(fetcher.records(OffsetRange("t", 0, 0, 60))) == []


def test_fetcher_reports_a_range_past_the_end_of_a_truncated_log() -> None:
    network = FakeNetwork(_log(30), log_start_offset=0, high_watermark=30)
    fetcher = RangeFetcher("fake:1", network=network, timeout_s=0.2, max_wait_ms=0)  # type: ignore[arg-type]
    with fetcher, pytest.raises(OffsetOutOfRangeError, match=r"offsets \[30, 50\)"):
        list(fetcher.records(OffsetRange("t", 0, 20, 50)))


@pytest.mark.parametrize(
    "columns",
    [["offset"], ["partition", "offset"], ["timestampType", "topic"], ["value", "offset"]],
)
def test_a_subset_of_columns_equals_those_of_the_full_decode(columns: list[str]) -> None:
    batches = [*_batches()]
    data = b"".join(batches)
    full = decode_arrow(data, 50, 104, "t", 3, include_headers=True)
    part = decode_arrow(data, 50, 104, "t", 3, include_headers=True, columns=columns)
    assert part.schema.names == columns
    assert part.equals(full.select(columns))


def test_header_columns_decode_no_record_but_refuse_a_batch_with_offset_gaps() -> None:
    plain = build_batch([b"a%d" % i for i in range(10)], timestamp_ms=1_000, base_offset=0)
    compressed = build_batch(
        [b"z"] * 5, timestamp_ms=1_000, base_offset=10, compression=Compression.ZSTD
    )
    broken = bytearray(compressed)
    broken[61:] = b"\x00" * (len(broken) - 61)  # records unreadable: the header is enough
    got = header_columns(plain + bytes(broken), 3, 100, "t", 1)
    assert got is not None and got.column("offset").to_pylist() == list(range(3, 15))
    gapped = bytearray(plain)
    gapped[23:27] = (12).to_bytes(4, "big")  # last offset delta 12 for 10 records: compacted
    assert header_columns(bytes(gapped), 0, 100, "t", 1) is None


@pytest.mark.parametrize("include_headers", [False, True])
def test_the_source_types_are_its_ddl(include_headers: bool) -> None:
    from spark.source import _source_types
    from storage.columnar.schema import schema_ddl

    # Parsing the DDL needs a JVM: compare the types' simple strings, spaces aside.
    built = ",".join(f"{n} {t.simpleString()}" for n, t in _source_types(include_headers).items())
    assert built.replace(" ", "") == schema_ddl(include_headers).replace(" ", "")
