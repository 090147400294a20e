"""Real broker processes: retention in the background, and idempotent-producer state carried
across a broker restart by its producer snapshot."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, ConsumerRecord, Producer
from storage.checkpoint import read_offset
from storage.errors import KraftError, OffsetOutOfRangeError
from storage.log_loader import LOG_START_OFFSET_CHECKPOINT
from tests.broker.clusters import running_cluster

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

RETENTION_TOPIC_CONFIG = {
    "min.insync.replicas": "2",
    "segment.bytes": "4096",
    "retention.bytes": "8192",
}
"""Small segments, little kept: with the broker checking every 200 ms, retention moves the log
start within a second of a few dozen KB being produced (producer ``batch_size`` < 4096)."""


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with running_cluster(broker_config={"log.retention.check.interval.ms": "200"}) as c:
        yield c


def log_start_offset(cluster: LocalCluster, broker: int, tp: TopicPartition) -> int:
    path = cluster.broker_data_dir(broker) / f"{tp.topic}-{tp.partition}"
    return read_offset(path / LOG_START_OFFSET_CHECKPOINT) or 0


def value(i: int) -> bytes:
    return b"%06d" % i + b"x" * 94


def poll_until(consumer: Consumer, count: int, timeout_s: float = 30) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        out.extend(consumer.poll(timeout=0.5))
    return out


def test_retention_advances_the_log_start_on_every_replica_and_consumers_see_it(
    cluster: LocalCluster,
) -> None:
    tp = TopicPartition("retained", 0)
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(
            "retained", partitions=1, replication_factor=3, config=RETENTION_TOPIC_CONFIG
        )
        admin.wait_for_leaders("retained", timeout=30)
    n = 600
    with Producer(cluster.bootstrap, acks="all", linger_ms=1, batch_size=1024) as producer:
        futures = [producer.send("retained", value=value(i), partition=0) for i in range(n)]
        producer.flush()
        assert [f.result(timeout=30).offset for f in futures] == list(range(n))

    # NB: retention is a background pass every 200 ms, and a follower's pass is bounded by the
    # high watermark it has heard of, so the log start moves in steps. Reading while it still
    # moves races it: the consumer's position falls below the new start, and
    # auto.offset.reset=earliest rightly jumps ahead. So wait until every replica has a log
    # start and none has moved for 10 passes.
    deadline = time.monotonic() + 30
    starts = {b: 0 for b in cluster.broker_ids}
    settled_since = time.monotonic()
    while not all(starts.values()) or time.monotonic() - settled_since < 2.0:
        assert time.monotonic() < deadline, f"retention never settled on every replica: {starts}"
        time.sleep(0.1)
        now = {b: log_start_offset(cluster, b, tp) for b in cluster.broker_ids}
        if now != starts:
            starts, settled_since = now, time.monotonic()
    assert all(0 < s < n for s in starts.values())

    with Consumer(cluster.bootstrap, auto_offset_reset="none") as strict:
        strict.assign([tp])
        strict.seek(tp, 0)
        with pytest.raises(OffsetOutOfRangeError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                strict.poll(timeout=0.5)
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)  # below the log start: OFFSET_OUT_OF_RANGE, reset to earliest
        records = poll_until(consumer, 1)
        first = records[0].offset
        assert first > 0
        records += poll_until(consumer, n - first - len(records))
    assert [r.offset for r in records] == list(range(first, n))
    assert [r.value for r in records] == [value(i) for i in range(first, n)]


def _replica_opened_events(log_path: Path, topic_partition: str) -> list[dict[str, Any]]:
    events = []
    for line in log_path.read_text(errors="replace").splitlines():
        if '"replica_opened"' not in line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("topic_partition") == topic_partition:
            events.append(event)
    return events


def test_an_idempotent_producers_state_is_reloaded_from_the_snapshot_after_a_restart(
    cluster: LocalCluster,
) -> None:
    """KIP-98: producer state survives a broker restart. The only replica is stopped cleanly
    (a snapshot at its log end), restarted (it replays no batch), and the same producer then
    goes on at its next sequence with nothing duplicated or out of order."""
    tp = TopicPartition("idem", 0)
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(
            "idem", partitions=1, replication_factor=1, config={"segment.bytes": "4096"}
        )
        broker = admin.wait_for_leaders("idem", timeout=30).partitions[0].leader
    with Producer(
        cluster.bootstrap, acks="all", enable_idempotence=True, linger_ms=1, batch_size=1024
    ) as producer:
        first = [producer.send("idem", value=value(i), partition=0) for i in range(300)]
        producer.flush()
        assert [f.result(timeout=30).offset for f in first] == list(range(300))

        assert cluster.stop_broker(broker, timeout=60) == 0
        cluster.start_broker(broker)
        deadline = time.monotonic() + 60
        while True:
            events = _replica_opened_events(cluster.broker_log(broker), "idem-0")
            if len(events) >= 2:
                break
            assert time.monotonic() < deadline, "the restarted broker never reopened idem-0"
            time.sleep(0.1)
        reopened = events[-1]
        assert reopened["producer_snapshot_offset"] == 300
        assert reopened["producer_batches_replayed"] == 0
        assert reopened["producers"] == 1

        second = [producer.send("idem", value=value(i), partition=0) for i in range(300, 600)]
        producer.flush()
        offsets = []
        for f in second:
            try:
                offsets.append(f.result(timeout=60).offset)
            except KraftError as e:  # pragma: no cover - the assertion below reports it
                pytest.fail(f"a send after the restart failed: {e!r}")
        assert offsets == list(range(300, 600))

    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        records = poll_until(consumer, 600, timeout_s=60)
    assert [r.value for r in records] == [value(i) for i in range(600)]
