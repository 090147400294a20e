"""The ``kraft`` data source (batch) and the RDD on local[2] against a real 3-broker cluster."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import spark as kraft_spark
from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from spark.options import EARLIEST, LATEST, OffsetSpec
from tests.spark.conftest import consume_all, create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.process, pytest.mark.timeout(600)]

COLUMNS = [
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "unix_millis(timestamp) AS ts",
    "timestampType",
]


def read(session: Any, bootstrap: str, **options: Any) -> Any:
    reader = session.read.format("kraft").option("kraft.bootstrap", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.selectExpr(*COLUMNS).collect())


@pytest.fixture(scope="module")
def events(cluster: LocalCluster) -> str:
    """A topic of 3 partitions holding 600 records."""
    create_topic(cluster.bootstrap, "events", partitions=3)
    produce(cluster.bootstrap, "events", 600)
    return "events"


def test_rows_equal_what_a_consumer_reads(session: Any, cluster: LocalCluster, events: str) -> None:
    df = read(session, cluster.bootstrap, subscribe=events, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    got = sorted(
        df.selectExpr(*COLUMNS, "headers").collect(), key=lambda r: (r.partition, r.offset)
    )
    expected = consume_all(cluster.bootstrap, events, [0, 1, 2])
    assert len(got) == len(expected) == 600
    for row, record in zip(got, expected, strict=True):
        assert (bytes(row.key), bytes(row.value), row.topic) == (
            record.key,
            record.value,
            record.topic,
        )
        assert (row.partition, row.offset, row.ts, row.timestampType) == (
            record.partition,
            record.offset,
            record.timestamp,
            0,
        )
        headers = [(h.key, None if h.value is None else bytes(h.value)) for h in row.headers or []]
        assert headers == list(record.headers)


def test_options_are_case_insensitive_and_headers_off_by_default(
    session: Any, cluster: LocalCluster, events: str
) -> None:
    df = read(session, cluster.bootstrap, SUBSCRIBE=events, STARTINGOFFSETS="earliest")
    assert "headers" not in df.columns
    assert df.count() == 600


def test_a_schema_of_some_columns_reads_only_those(
    session: Any, cluster: LocalCluster, events: str
) -> None:
    def load(schema: str) -> Any:
        reader = session.read.format("kraft").schema(schema)
        return (
            reader.option("kraft.bootstrap", cluster.bootstrap).option("subscribe", events).load()
        )

    df = load("offset bigint, partition int")  # from the batch headers alone
    assert df.count() == 600
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == sorted(
        (r.partition, r.offset)
        for r in read(session, cluster.bootstrap, subscribe=events).collect()
    )
    with pytest.raises(Exception, match="no column 'offset' of type int"):
        load("offset int").count()


def test_json_offsets_and_assign_are_honoured(
    session: Any, cluster: LocalCluster, events: str
) -> None:
    starting = json.dumps({events: {"0": 10, "1": -2}})
    ending = json.dumps({events: {"0": 30, "1": 5}})
    df = read(
        session,
        cluster.bootstrap,
        assign=json.dumps({events: [0, 1]}),
        startingOffsets=starting,
        endingOffsets=ending,
    )
    got = {(r.partition, r.offset) for r in df.select("partition", "offset").collect()}
    assert got == {(0, o) for o in range(10, 30)} | {(1, o) for o in range(5)}


def test_starting_timestamp_uses_list_offsets_by_timestamp(
    session: Any, cluster: LocalCluster
) -> None:
    create_topic(cluster.bootstrap, "timed", partitions=1)
    produce(cluster.bootstrap, "timed", 10)
    time.sleep(0.01)  # NB: not a wait for a condition: the timestamps must differ by >= 1 ms
    middle_ms = time.time_ns() // 1_000_000
    produce(cluster.bootstrap, "timed", 5, start=10)
    df = read(session, cluster.bootstrap, subscribe="timed", startingTimestamp=str(middle_ms))
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(10, 15))


def test_min_partitions_splits_ranges_without_changing_rows(
    session: Any, cluster: LocalCluster, events: str
) -> None:
    plain = read(session, cluster.bootstrap, subscribe=events)
    split = read(session, cluster.bootstrap, subscribe=events, minPartitions="12")
    assert plain.rdd.getNumPartitions() == 3
    assert split.rdd.getNumPartitions() >= 12
    assert rows(split) == rows(plain)


def test_bad_options_fail_with_a_clear_message(session: Any, cluster: LocalCluster) -> None:
    with pytest.raises(Exception, match="exactly one of the options subscribe"):
        read(session, cluster.bootstrap, subscribe="a", assign='{"a":[0]}').count()
    with pytest.raises(Exception, match="startingOffsets is not valid JSON"):
        read(session, cluster.bootstrap, subscribe="a", startingOffsets="{oops").count()
    with pytest.raises(Exception, match="no such topic: nowhere"):
        read(session, cluster.bootstrap, subscribe="nowhere").count()


def test_ending_offsets_past_the_end_fail_at_planning(
    session: Any, cluster: LocalCluster, events: str
) -> None:
    ending = json.dumps({events: {"0": 10**9}})
    with pytest.raises(Exception, match=r"past its latest offset"):
        read(session, cluster.bootstrap, subscribe=events, endingOffsets=ending).count()


def test_write_then_read_round_trip(session: Any, cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, "written", partitions=2)
    data = [
        (b"v%d" % i, f"k{i}", i % 2, [(f"h{i}", b"x")] if i % 4 == 0 else None) for i in range(50)
    ]
    df = session.createDataFrame(
        data,
        "value binary, key string, partition int, headers array<struct<key:string,value:binary>>",
    )
    df.write.format("kraft").option("kraft.bootstrap", cluster.bootstrap).option(
        "topic", "written"
    ).mode("append").save()
    back = read(session, cluster.bootstrap, subscribe="written", includeHeaders="true").collect()
    got = sorted(
        (
            bytes(r.value),
            bytes(r.key).decode(),
            r.partition,
            [(h.key, bytes(h.value)) for h in r.headers] if r.headers else None,
        )
        for r in back
    )
    assert got == sorted(data)


def test_writer_needs_a_value_column(session: Any, cluster: LocalCluster) -> None:
    df = session.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="needs a value column"):
        df.write.format("kraft").option("kraft.bootstrap", cluster.bootstrap).option(
            "topic", "written"
        ).mode("append").save()


def test_topic_rdd_reads_one_spark_partition_per_range(
    session: Any, cluster: LocalCluster, events: str
) -> None:
    ranges = kraft_spark.offset_ranges(
        cluster.bootstrap, [(events, "earliest", "latest")], max_records_per_range=150
    )
    assert sum(r.size for r in ranges) == 600
    assert all(r.size <= 150 for r in ranges)
    rdd = kraft_spark.topic_rdd(session.sparkContext, cluster.bootstrap, ranges)
    assert rdd.getNumPartitions() == len(ranges)
    by_partition = rdd.glom().map(lambda records: [(r.partition, r.offset) for r in records])
    for r, got in zip(ranges, by_partition.collect(), strict=True):
        assert got == [(r.partition, o) for o in range(r.from_offset, r.until_offset)]
    expected = consume_all(cluster.bootstrap, events, [0, 1, 2])
    records = sorted(rdd.collect(), key=lambda r: (r.partition, r.offset))
    assert [(r.key, r.value, r.timestamp_ms, r.headers) for r in records] == [
        (c.key, c.value, c.timestamp, c.headers) for c in expected
    ]


def _offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    tp = TopicPartition(topic, 0)
    with kraft_spark.OffsetLookup(bootstrap) as lookup:
        start = lookup.resolve([tp], OffsetSpec(default=EARLIEST))[tp]
        end = lookup.resolve([tp], OffsetSpec(default=LATEST))[tp]
    return start, end


def test_data_loss_after_retention_fails_or_is_skipped(session: Any, cluster: LocalCluster) -> None:
    topic = "lossy"
    create_topic(
        cluster.bootstrap,
        topic,
        partitions=1,
        config={"segment.bytes": "1024", "retention.bytes": "1500", "retention.ms": "-1"},
    )
    for i in range(20):  # 20 batches of 10 small records: a dozen 1 KiB segments
        produce(cluster.bootstrap, topic, 10, start=10 * i, linger_ms=0)
    deadline = time.monotonic() + 20
    start, end = _offsets(cluster.bootstrap, topic)
    while start == 0:
        if time.monotonic() >= deadline:
            raise AssertionError("the brokers applied no retention within 20 s")
        time.sleep(0.1)
        start, end = _offsets(cluster.bootstrap, topic)
    assert end == 200
    from_zero = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="data loss reading lossy-0"):
        read(session, cluster.bootstrap, subscribe=topic, startingOffsets=from_zero).count()
    skipped = read(
        session,
        cluster.bootstrap,
        subscribe=topic,
        startingOffsets=from_zero,
        failOnDataLoss="false",
    )
    offsets = sorted(r.offset for r in skipped.select("offset").collect())
    now_start, _ = _offsets(cluster.bootstrap, topic)
    assert offsets == list(range(offsets[0], 200))
    assert start <= offsets[0] <= now_start


def test_a_quorum_topic_reads_exactly_as_an_isr_topic(
    session: Any, cluster: LocalCluster, events: str
) -> None:
    """Issue 12: the data source and the RDD read a ``replication.mode=quorum`` topic as they
    read the ISR topic ``events`` holding the same records: the same keys, values, headers and
    partitions in the same order, at the offsets a consumer reads (a quorum log also holds
    Raft's leader-change control batches, which every reader skips). One Spark job: the data
    source's rows and the RDD's records are collected as one union."""
    topic = "events-quorum"
    create_topic(cluster.bootstrap, topic, partitions=3, config={"replication.mode": "quorum"})
    produce(cluster.bootstrap, topic, 600)
    df = read(session, cluster.bootstrap, subscribe=topic, includeHeaders="true")
    ranges = kraft_spark.offset_ranges(
        cluster.bootstrap, [(topic, "earliest", "latest")], max_records_per_range=150
    )
    rdd = kraft_spark.topic_rdd(session.sparkContext, cluster.bootstrap, ranges)
    from_df = df.selectExpr(*COLUMNS, "headers").rdd.map(
        lambda row: (
            "df",
            row.partition,
            row.offset,
            bytes(row.key),
            bytes(row.value),
            row.ts,
            tuple((h.key, None if h.value is None else bytes(h.value)) for h in row.headers or []),
        )
    )
    from_rdd = rdd.map(
        lambda r: ("rdd", r.partition, r.offset, r.key, r.value, r.timestamp_ms, r.headers)
    )
    collected = from_df.union(from_rdd).collect()

    def readers(
        source: str,
    ) -> list[tuple[int, int, bytes | None, bytes | None, int, tuple[Any, ...]]]:
        return sorted(
            (p, o, k, v, ts, tuple(h)) for s, p, o, k, v, ts, h in collected if s == source
        )

    quorum = consume_all(cluster.bootstrap, topic, [0, 1, 2])
    expected = [
        (c.partition, c.offset, c.key, c.value, c.timestamp, tuple(c.headers)) for c in quorum
    ]
    assert len(expected) == 600
    assert readers("df") == expected
    assert readers("rdd") == expected
    # The same records as the ISR topic, partition by partition and in order.
    isr = consume_all(cluster.bootstrap, events, [0, 1, 2])

    def contents(records: list[Any]) -> list[tuple[Any, ...]]:
        return [(c.partition, c.key, c.value, tuple(c.headers)) for c in records]

    assert contents(quorum) == contents(isr)
