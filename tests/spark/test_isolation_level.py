"""The ``kraft`` source's ``kafka.isolation.level`` (KIP-98, as spark-sql-kafka has it): with
``read_committed`` a read ends at the last stable offset and leaves out the aborted
transaction's records and the markers, where a read_uncommitted consumer reads them all."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import Producer
from spark.lookup import OffsetLookup
from spark.options import LATEST, OffsetSpec
from tests.spark.conftest import consume_all, create_topic

pytestmark = [pytest.mark.spark, pytest.mark.process, pytest.mark.timeout(300)]


def _values(session: Any, bootstrap: str, topic: str, **options: str) -> list[tuple[int, str]]:
    reader = session.read.format("kraft").option("kraft.bootstrap", bootstrap)
    for key, value in {"subscribe": topic, **options}.items():
        reader = reader.option(key, value)
    df = reader.load().selectExpr("offset", "CAST(value AS STRING) AS v")
    return sorted((r.offset, r.v) for r in df.collect())


def _latest(bootstrap: str, tp: TopicPartition, *, read_committed: bool) -> int:
    with OffsetLookup(bootstrap, read_committed=read_committed) as lookup:
        return lookup.resolve([tp], OffsetSpec(default=LATEST))[tp]


def test_read_committed_reads_to_the_last_stable_offset_without_the_aborted_records(
    session: Any, cluster: LocalCluster
) -> None:
    bootstrap, topic = cluster.bootstrap, "txn-isolation"
    tp = TopicPartition(topic, 0)
    create_topic(bootstrap, topic, partitions=1)
    # A long timeout: the open transaction must outlive the Spark queries (slow on 2 cores).
    producer = Producer(
        bootstrap, transactional_id="spark-isolation", transaction_timeout_ms=600_000
    )
    try:
        producer.init_transactions(30)
        for outcome, values in (("commit", "c0 c1"), ("abort", "a0 a1 a2"), ("commit", "c2")):
            producer.begin_transaction()
            for v in values.split():
                producer.send(topic, v.encode(), partition=0)
            if outcome == "commit":
                producer.commit_transaction(30)
            else:
                producer.flush(30)
                producer.abort_transaction(30)
        deadline = time.monotonic() + 20  # the last commit's marker follows its EndTxn
        while _latest(bootstrap, tp, read_committed=True) < _latest(
            bootstrap, tp, read_committed=False
        ):
            assert time.monotonic() < deadline, "the last stable offset never reached the end"
            time.sleep(0.1)
        producer.begin_transaction()  # left open: it holds the last stable offset back
        open_offset = producer.send(topic, b"open", partition=0).result(30).offset
        assert _latest(bootstrap, tp, read_committed=True) == open_offset

        committed = _values(
            session, bootstrap, topic, **{"kafka.isolation.level": "read_committed"}
        )
        assert [v for _, v in committed] == ["c0", "c1", "c2"]
        # read_uncommitted (the source's default, tested elsewhere) reads these records: the
        # same offsets as a Consumer sees them, the aborted and the open ones included.
        everything = [
            (r.offset, (r.value or b"").decode()) for r in consume_all(bootstrap, topic, [0])
        ]
        assert [v for _, v in everything] == ["c0", "c1", "a0", "a1", "a2", "c2", "open"]
        assert set(committed) <= set(everything)
    finally:
        producer.close(10)
