"""Real processes: a partition moves from brokers [1, 2, 3] to [2, 3, 4] (KIP-455) while an
idempotent ``acks=all`` producer writes unique values. Every acknowledged record is read back
exactly once at its acknowledged offset, the leader moves off the removed broker, and the
removed broker deletes its copy of the log."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

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


def test_a_partition_moves_to_other_brokers_under_acks_all_load_and_keeps_every_record() -> None:
    with LocalCluster(
        controllers=1,
        brokers=4,
        controller_config={"broker.session.timeout.ms": "2000"},
        broker_config={"broker.heartbeat.interval.ms": "250"},
    ) as cluster:
        cluster.wait_until_healthy(timeout=60)
        b1, b2, b3, b4 = cluster.broker_ids
        tp = TopicPartition(TOPIC, 0)
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topic(
                TOPIC, config={"min.insync.replicas": "2"}, assignments=[(b1, b2, b3)]
            )
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
