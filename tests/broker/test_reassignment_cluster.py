"""Real processes (one 4-broker cluster for the module): a partition moves from brokers
[1, 2, 3] to [2, 3, 4] (KIP-455) while an idempotent ``acks=all`` producer writes unique
values, and every acknowledged record is read back exactly once at its acknowledged offset, the
leader moves off the removed broker, and the removed broker deletes its copy of the log; and
``kraft topics reassign --execute --throttle`` holds the move to the throttled rate, with
``--verify`` reporting it until it completes, and a removed broker that was down during the
move deletes its stray copy when it returns."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog

from kraft.cli import main
from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, Producer
from storage.errors import KraftError

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]

TOPIC = "moving"


def _wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except (KraftError, TimeoutError, ConnectionError):
            pass  # the metadata moves: ask again
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(
        controllers=1,
        brokers=4,
        controller_config={"broker.session.timeout.ms": "2000"},
        broker_config={"broker.heartbeat.interval.ms": "250"},
    ) as c:
        c.wait_until_healthy(timeout=60)
        yield c


def test_a_partition_moves_to_other_brokers_under_acks_all_load_and_keeps_every_record(
    cluster: LocalCluster,
) -> None:
    b1, b2, b3, b4 = cluster.broker_ids
    tp = TopicPartition(TOPIC, 0)
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(TOPIC, config={"min.insync.replicas": "2"}, assignments=[(b1, b2, b3)])
        admin.wait_for_leaders(TOPIC, timeout=30)
        assert admin.describe_topic(TOPIC).partitions[0].leader == b1

        acknowledged: dict[bytes, int] = {}
        lock = threading.Lock()
        stop = threading.Event()
        producer_error: list[BaseException] = []

        def produce() -> None:
            try:
                with Producer(
                    cluster.bootstrap, acks="all", enable_idempotence=True, linger_ms=2
                ) as producer:
                    i = 0
                    while not stop.is_set():
                        batch = [(b"v-%07d" % n, n) for n in range(i, i + 20)]
                        i += 20
                        futures = [
                            (v, producer.send(TOPIC, value=v, partition=0)) for v, _ in batch
                        ]
                        for value, future in futures:
                            try:
                                md = future.result(timeout=60)
                            except KraftError:
                                continue  # not acknowledged: may or may not be there
                            with lock:
                                assert value not in acknowledged
                                acknowledged[value] = md.offset
            except BaseException as e:  # reported by the test thread
                producer_error.append(e)

        def acked() -> int:
            with lock:
                return len(acknowledged)

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        try:
            _wait_until(lambda: acked() >= 200, 30, "the first acknowledgements")
            results = admin.alter_partition_reassignments({tp: [b2, b3, b4]})
            assert results == {tp: None}
            ongoing = admin.list_partition_reassignments()
            if ongoing:  # it may have completed already
                assert ongoing[tp].adding_replicas == (b4,)
                assert ongoing[tp].removing_replicas == (b1,)

            def moved() -> bool:
                p = admin.describe_topic(TOPIC).partitions[0]
                return tuple(p.replicas) == (b2, b3, b4) and sorted(p.isr) == [b2, b3, b4]

            _wait_until(moved, 60, "the partition on brokers 2, 3, 4 with all in sync")
            assert admin.list_partition_reassignments() == {}
            assert admin.describe_topic(TOPIC).partitions[0].leader == b2
            moved_at = acked()
            _wait_until(lambda: acked() >= moved_at + 200, 30, "produce on the new leader")
        finally:
            stop.set()
            thread.join(timeout=90)
        assert not producer_error, producer_error
        removed_dir = cluster.broker_data_dir(b1) / f"{TOPIC}-0"
        _wait_until(lambda: not removed_dir.exists(), 30, "broker 1 to delete its log")
        assert (cluster.broker_data_dir(b4) / f"{TOPIC}-0").exists()

    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek_to_end([tp])
        high_watermark = consumer.position(tp, timeout=30)
        consumer.seek(tp, 0)
        records = []
        position = 0
        deadline = time.monotonic() + 60
        while position < high_watermark:
            assert time.monotonic() < deadline, f"consumed up to {position} of {high_watermark}"
            for r in consumer.poll(timeout=1.0):
                if r.offset < high_watermark:
                    records.append(r)
                    position = max(position, r.offset + 1)
    by_offset = {r.offset: r.value for r in records}
    assert len(by_offset) == len(records), "an offset was consumed twice"
    duplicated = [v for v, n in Counter(r.value for r in records).items() if n > 1]
    assert not duplicated, f"values written twice: {duplicated[:10]}"
    lost = {v: o for v, o in acknowledged.items() if by_offset.get(o) != v}
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {list(lost.items())[:5]}"
    assert len(acknowledged) >= 400


def _kraft(capsys: pytest.CaptureFixture[str], *args: str, bootstrap: str) -> tuple[int, str]:
    """``kraft ARGS --bootstrap B`` in this process (a subprocess would start too slowly to
    see the move in progress); the exit code and stdout."""
    configured, saved = structlog.is_configured(), structlog.get_config()
    try:
        code = main([*args, "--bootstrap", bootstrap])
    finally:
        if configured:
            structlog.configure(**saved)
        else:
            structlog.reset_defaults()
    return code, capsys.readouterr().out


THROTTLE_BYTES_PER_S = 50_000
DATA_BYTES = 150_000


def test_kraft_topics_reassign_moves_a_partition_at_the_throttled_rate_and_strays_go(
    cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b1, b2, b3, b4 = cluster.broker_ids
    topic = "throttled"
    tp = TopicPartition(topic, 0)
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(topic, assignments=[(b1, b2, b3)])
        admin.wait_for_leaders(topic, timeout=30)
        with Producer(cluster.bootstrap, acks="all", linger_ms=5) as producer:
            for _ in range(DATA_BYTES // 1000):
                producer.send(topic, value=os.urandom(1000), partition=0)
            producer.flush(timeout=30)
        plan = tmp_path / "move.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [{"topic": topic, "partition": 0, "replicas": [b1, b2, b4]}],
                }
            )
        )
        # Broker 3 is down during the move: its copy is a stray log when it comes back.
        stray = cluster.broker_data_dir(b3) / f"{topic}-0"
        assert stray.is_dir()
        cluster.stop_broker(b3)
        started = time.monotonic()
        code, out = _kraft(
            capsys, "topics", "reassign", "--plan", str(plan), "--execute",
            "--throttle", str(THROTTLE_BYTES_PER_S), "--json", bootstrap=cluster.bootstrap,
        )  # fmt: skip
        assert code == 0, out
        doc = json.loads(out)
        assert doc["started"] == [{"topic": topic, "partition": 0}]
        assert doc["current"]["partitions"][0]["replicas"] == [b1, b2, b3], "for a rollback"

        code, out = _kraft(
            capsys,
            "topics",
            "reassign",
            "--plan",
            str(plan),
            "--verify",
            bootstrap=cluster.bootstrap,
        )
        assert code == 1, out
        assert f"Reassignment of partition {tp} is still in progress." in out
        code, out = _kraft(
            capsys, "topics", "describe", topic, "--json", bootstrap=cluster.bootstrap
        )
        (moving,) = json.loads(out)["partitions"]
        assert (moving["adding_replicas"], moving["removing_replicas"]) == ([b4], [b3]), moving
        assert moving["replicas"] == [b1, b2, b4, b3], moving

        def moved() -> bool:
            return tuple(admin.describe_topic(topic).partitions[0].replicas) == (b1, b2, b4)

        _wait_until(moved, 60, "the throttled move to complete")
        elapsed = time.monotonic() - started
        # One second of burst at each end, then the rate: at least (150 kB - 50 kB) / 50 kB/s
        # = 2 s (unthrottled: well under 1 s); 1.5 s leaves room for coarse clocks.
        assert elapsed >= 1.5, f"the move took {elapsed:.1f}s: not throttled"

        code, out = _kraft(
            capsys, "topics", "reassign", "--plan", str(plan), "--verify", "--json",
            bootstrap=cluster.bootstrap,
        )  # fmt: skip
        assert code == 0, out
        report = json.loads(out)
        assert report["complete"] and report["throttle_removed"], report
        remaining = {
            e.name: e.source.name
            for e in admin.describe_configs("broker", "")
            if e.name.endswith("replication.throttled.rate")
        }
        assert set(remaining.values()) == {"DEFAULT_CONFIG"}, remaining

        assert stray.is_dir(), "broker 3 was down: its copy is still there"
        cluster.start_broker(b3)
        _wait_until(lambda: not stray.exists(), 60, "broker 3 to delete its stray log")
