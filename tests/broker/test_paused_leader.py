"""Real processes: the leader broker of an RF=3, min.insync.replicas=2 partition is paused
(SIGSTOP: alive, silent, its sockets open) while an idempotent acks=all producer writes and a
consumer reads. The clients must move to the new leader within the stated bound (the
cluster's failover, here a 2 s broker session, plus ``retry.backoff.max.ms``, 1 s), not wait
for ``request.timeout.ms`` (30 s) or the broker's return; after it resumes, every
acknowledged record is in the log exactly once, in the order it was sent."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from kraft.cluster import LocalCluster
from kraft.cluster.process import wait_for
from kraft.types import TopicPartition
from replication.clients import Consumer, Producer
from replication.clients.batch import RecordFuture
from tests.broker.clusters import running_cluster

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]

TOPIC = "paused"
BOUND_S = 2.0 + 1.0 + 5.0
"""broker.session.timeout.ms + retry.backoff.max.ms + slack for two loaded cores: when the
first record sent after the pause must be acknowledged (and consumed) by."""
PAUSE_S = 15.0


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with running_cluster(controllers=1) as c:
        yield c


def test_a_paused_leader_costs_the_clients_a_failover_not_the_pause(
    cluster: LocalCluster,
) -> None:
    cluster.create_topic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
    tp = TopicPartition(TOPIC, 0)
    sent_at: dict[int, float] = {}
    acked_at: dict[int, float] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def on_done(i: int) -> object:
        def done(future: RecordFuture) -> None:
            error = future.exception(0)
            with lock:
                if error is None:
                    acked_at[i] = time.monotonic()
                else:
                    errors.append(error)

        return done

    producer = Producer(cluster.bootstrap, acks="all", enable_idempotence=True, linger_ms=5)

    def produce() -> None:
        i = 0
        while not stop.is_set():
            with lock:
                sent_at[i] = time.monotonic()
            producer.send(TOPIC, value=b"%07d" % i, partition=0).add_done_callback(on_done(i))
            i += 1
            stop.wait(0.005)  # pacing: ~200 records a second

    consumer = Consumer(cluster.bootstrap, auto_offset_reset="earliest")
    consumer.assign([tp])
    thread = threading.Thread(target=produce, name="paused-leader-producer")
    thread.start()
    try:
        read = [int(r.value or b"") for r in consumer.poll(timeout=5)]
        wait_for(lambda: len(acked_at) >= 100, 30, "100 records acknowledged")
        leader = cluster.describe_topic(TOPIC).partitions[0].leader
        paused_at = time.monotonic()
        cluster.pause_broker(leader)
        try:

            def acked_after_pause() -> bool:
                with lock:
                    late = [i for i, t in sent_at.items() if t >= paused_at + 0.1]
                    return any(i in acked_at for i in late)

            wait_for(acked_after_pause, PAUSE_S, "a record sent after the pause acknowledged")
            first_ack = min(t for t in acked_at.values() if t > paused_at) - paused_at
            assert first_ack < BOUND_S, f"first acknowledgement {first_ack:.1f}s after the pause"
            with lock:
                target = min(i for i, t in sent_at.items() if t >= paused_at + 0.1)
            while not read or read[-1] < target:
                assert time.monotonic() - paused_at < BOUND_S + 2, "the consumer stalled"
                read.extend(int(r.value or b"") for r in consumer.poll(timeout=0.5))
            wait_for(lambda: len(acked_at) >= target + 600, 30, "progress while it is paused")
            assert cluster.broker(leader).is_running()  # still paused, not dead
        finally:
            cluster.resume_broker(leader)
        wait_for(lambda: len(acked_at) >= target + 200, 30, "more records after the resume")
    finally:
        stop.set()
        thread.join()
        producer.close(timeout=30)
    assert not errors, errors[:3]
    last = max(acked_at)
    while not read or read[-1] < last:
        batch = consumer.poll(timeout=1)
        assert batch or time.monotonic() - paused_at < 90, "could not read back"
        read.extend(int(r.value or b"") for r in batch)
    consumer.close()
    acked = sorted(acked_at)
    assert read == sorted(read) and len(read) == len(set(read)), "reordered or duplicated"
    assert set(acked) <= set(read), f"lost: {sorted(set(acked) - set(read))[:10]}"
