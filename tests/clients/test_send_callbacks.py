"""`Producer.send`'s ``callback`` (Kafka's ``send(record, callback)``): each record's callback
runs once with its own future, in send order among one partition's callbacks (those added
later with ``add_done_callback`` included), and a failed batch hands its error to every one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from kraft.types import TopicPartition
from replication.clients.batch import ProducerBatch, RecordFuture
from storage.errors import ErrorCode, NotEnoughReplicasError, RecordTooLargeError
from tests.clients.fake_cluster import FakeCluster
from tests.clients.test_clients_with_fake_cluster import make_producer

pytestmark = pytest.mark.timeout(60)

T0 = TopicPartition("t", 0)


def wait_for(done: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_send_callbacks_run_in_send_order_per_partition_each_with_its_records_offset() -> None:
    cluster = FakeCluster(brokers=3, topics={"t": 6})
    seen: list[tuple[int, int, int]] = []  # (record, partition, offset), in callback order
    lock = threading.Lock()

    def on_done(i: int) -> Callable[[RecordFuture], None]:
        def record(future: RecordFuture) -> None:
            md = future.result(0)
            with lock:
                seen.append((i, md.partition, md.offset))

        return record

    with make_producer(cluster, batch_size=2048) as producer:
        futures = []
        for i in range(600):
            if i % 3:
                futures.append(producer.send("t", value=b"v%d" % i, callback=on_done(i)))
            else:  # the other way in: a callback added after send
                futures.append(producer.send("t", value=b"v%d" % i))
                futures[-1].add_done_callback(on_done(i))
        producer.flush()
        wait_for(lambda: len(seen) == 600)
    assert sorted(i for i, _, _ in seen) == list(range(600))  # each ran once
    offsets = {i: (p, o) for i, p, o in seen}
    for i, future in enumerate(futures):  # the callback saw its own record's offset
        md = future.result(0)
        assert (md.partition, md.offset) == offsets[i]
    partitions = {p for _, p, _ in seen}
    assert len(partitions) > 1  # sticky batches moved on: several partitions' orders checked
    for partition in partitions:
        mine = [(i, o) for i, p, o in seen if p == partition]
        assert [i for i, _ in mine] == sorted(i for i, _ in mine)  # send order
        assert [o for _, o in mine] == list(range(len(mine)))  # offsets 0, 1, 2, ...


def test_a_failed_batch_hands_its_error_to_every_send_callback() -> None:
    cluster = FakeCluster(brokers=3, topics={"t": 6})
    cluster.partition_errors[TopicPartition("t", 1)] = ErrorCode.MESSAGE_TOO_LARGE
    errors: list[BaseException | None] = []
    with make_producer(cluster, linger_ms=50) as producer:
        futures = [
            producer.send(
                "t", value=b"v", partition=1, callback=lambda f: errors.append(f.exception(0))
            )
            for _ in range(20)
        ]
        wait_for(lambda: len(errors) == 20)
    assert all(isinstance(e, RecordTooLargeError) for e in errors)
    for future in futures:
        with pytest.raises(RecordTooLargeError):
            future.result(0)


def test_a_record_failed_at_send_runs_its_callback_at_once() -> None:
    cluster = FakeCluster(brokers=3, topics={"t": 6})
    errors: list[BaseException | None] = []
    with make_producer(cluster, max_request_size=1000) as producer:
        future = producer.send(
            "t", value=b"x" * 2000, callback=lambda f: errors.append(f.exception(0))
        )
        assert future.done()
        assert len(errors) == 1 and isinstance(errors[0], RecordTooLargeError)


def test_a_batchs_callbacks_run_once_in_append_order_past_a_failing_one() -> None:
    batch = ProducerBatch(T0, created_ms=0, batch_size=1 << 20)
    seen: list[int] = []

    def boom(_: RecordFuture) -> None:
        raise RuntimeError("user code")

    first = batch.try_append(0, None, b"a", None, lambda f: seen.append(0))
    second = batch.try_append(0, None, b"b", None)
    assert first is not None and second is not None
    second.add_done_callback(lambda f: seen.append(1))
    assert batch.try_append(0, None, b"c", None, boom) is not None
    assert (
        batch.try_append(0, None, b"d", None, lambda f: seen.append(f.result(0).offset)) is not None
    )
    first.add_done_callback(lambda f: seen.append(4))  # a second callback of one record
    assert seen == []
    batch.result.complete(base_offset=10, error=None)
    batch.result.complete(base_offset=99, error=NotEnoughReplicasError("late"))  # ignored
    assert seen == [0, 1, 13, 4]
