"""The record accumulator: batching by size and linger, draining per broker, retries, sequences.

Time is injected (``now_ms``); leaders come from a dict: no network, no clock.
"""

from __future__ import annotations

import pytest

from kraft.types import TopicPartition
from replication.clients.accumulator import RecordAccumulator
from replication.clients.batch import ProducerBatch
from replication.clients.sequencing import IdempotenceState
from storage.errors import NotEnoughReplicasError
from storage.records import iter_records, validate_batch

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)
LEADERS = {T0: 1, T1: 1, T2: 2}


def accumulator(**kwargs: object) -> RecordAccumulator:
    options: dict[str, object] = {"batch_size": 1000, "linger_ms": 10}
    options.update(kwargs)
    return RecordAccumulator(**options)  # type: ignore[arg-type]


def drain(acc: RecordAccumulator, now_ms: int, **kwargs: object) -> dict[int, list[ProducerBatch]]:
    ready = kwargs.get("node_ready", lambda node: True)
    size = kwargs.get("max_request_size", 1 << 20)
    out = acc.drain(now_ms, LEADERS.get, ready, size)  # type: ignore[arg-type]
    return out.batches_by_node


def fill(
    acc: RecordAccumulator, tp: TopicPartition, n: int, now_ms: int = 0, size: int = 90
) -> None:
    for i in range(n):
        acc.append(tp, now_ms, None, bytes([i % 256]) * size, None, now_ms)


def test_a_partition_is_not_ready_before_linger_ms_and_ready_at_it() -> None:
    acc = accumulator(linger_ms=10)
    fill(acc, T0, 3, now_ms=100)
    out = acc.drain(105, LEADERS.get, lambda n: True, 1 << 20)
    assert out.batches_by_node == {}
    assert out.next_ready_check_ms == 5
    batches = drain(acc, 110)[1]
    assert [b.record_count for b in batches] == [3]


def test_a_full_batch_is_ready_at_once_and_the_rest_waits_for_linger() -> None:
    acc = accumulator(batch_size=1000, linger_ms=1000)
    fill(acc, T0, 25)  # ~93-byte records: 10 per 1000-byte batch
    queued = list(acc.queued(T0))
    assert [b.record_count for b in queued] == [10, 10, 5]
    assert all(b.size_bytes <= 1000 for b in queued)
    assert acc.wakeup_needed
    first = drain(acc, 1)[1]
    assert [b.record_count for b in first] == [10]  # one batch per partition per request
    second = drain(acc, 2)[1]
    assert [b.record_count for b in second] == [10]
    assert drain(acc, 3) == {}  # the open batch lingers
    assert [b.record_count for b in drain(acc, 1000)[1]] == [5]


def test_a_record_larger_than_batch_size_gets_a_batch_of_its_own() -> None:
    acc = accumulator(batch_size=100)
    fill(acc, T0, 1, size=50)
    fill(acc, T0, 1, size=500)
    fill(acc, T0, 1, size=10)
    assert [b.record_count for b in acc.queued(T0)] == [1, 1, 1]


def test_one_request_per_broker_carries_every_ready_partition_it_leads() -> None:
    acc = accumulator(linger_ms=0)
    for tp in (T0, T1, T2):
        fill(acc, tp, 2)
    by_node = drain(acc, 0)
    assert sorted(b.tp for b in by_node[1]) == [T0, T1]
    assert [b.tp for b in by_node[2]] == [T2]


def test_max_request_size_splits_a_brokers_batches_over_requests() -> None:
    acc = accumulator(linger_ms=0)
    fill(acc, T0, 5)
    fill(acc, T1, 5)
    first = drain(acc, 0, max_request_size=600)[1]
    assert len(first) == 1
    assert len(drain(acc, 0, max_request_size=600)[1]) == 1


def test_a_broker_at_its_in_flight_limit_gets_nothing() -> None:
    acc = accumulator(linger_ms=0)
    fill(acc, T0, 1)
    fill(acc, T2, 1)
    by_node = drain(acc, 0, node_ready=lambda node: node != 1)
    assert list(by_node) == [2]
    assert list(acc.queued(T0))


def test_a_batch_held_back_only_by_in_flight_limits_sets_no_recheck() -> None:
    """The answer that frees a slot wakes the sender (Kafka's sender waits on the network
    then): no poll every linger.ms meanwhile. A batch left for the next request, or a
    lingering one, still says when to look again."""
    acc = accumulator(linger_ms=5, batch_size=100)
    fill(acc, T0, 3)  # full batches: ready now
    out = acc.drain(0, LEADERS.get, lambda node: False, 1 << 20)
    assert out.batches_by_node == {} and out.next_ready_check_ms == 60_000
    out = acc.drain(0, LEADERS.get, lambda node: True, 100)  # the first; two wait behind it
    assert len(out.batches_by_node[1]) == 1 and out.next_ready_check_ms == 5
    fill(acc, T2, 1, now_ms=10)  # lingering until 15
    out = acc.drain(12, LEADERS.get, lambda node: False, 1 << 20)
    assert out.next_ready_check_ms == 3


def test_unknown_leaders_are_reported_so_metadata_is_refreshed() -> None:
    acc = accumulator(linger_ms=0)
    other = TopicPartition("other", 0)
    fill(acc, other, 1)
    out = acc.drain(0, LEADERS.get, lambda n: True, 1 << 20)
    assert out.unknown_leader_topics == {"other"}


def test_at_most_max_in_flight_batches_per_partition() -> None:
    acc = accumulator(linger_ms=0, max_in_flight_per_partition=2, batch_size=100)
    fill(acc, T0, 5)
    assert len(drain(acc, 0).get(1, [])) == 1
    assert len(drain(acc, 0).get(1, [])) == 1
    assert drain(acc, 0) == {}  # two in flight
    assert acc.in_flight_count == 2


def test_a_retry_goes_back_first_in_creation_order_after_the_backoff_and_alone() -> None:
    acc = accumulator(linger_ms=0, batch_size=100, retry_backoff_ms=50)
    fill(acc, T0, 4)
    b1 = drain(acc, 0)[1][0]
    b2 = drain(acc, 0)[1][0]
    acc.reenqueue(b2, now_ms=10)
    acc.reenqueue(b1, now_ms=10)
    assert [b.ordinal for b in acc.queued(T0)][:2] == [b1.ordinal, b2.ordinal]
    assert drain(acc, 59) == {}  # backoff (50 ms) not over
    assert drain(acc, 60)[1] == [b1]
    assert drain(acc, 61) == {}  # b2 may not overtake b1 while b1 is in flight
    acc.on_done(b1)
    assert drain(acc, 61)[1] == [b2]


def test_retry_backoff_doubles_up_to_its_ceiling() -> None:
    acc = accumulator(linger_ms=0, retry_backoff_ms=100, retry_backoff_max_ms=1000)
    fill(acc, T0, 1)
    batch = drain(acc, 0)[1][0]
    delays = []
    for _ in range(6):
        acc.reenqueue(batch, now_ms=0)
        delays.append(batch.retry_at_ms)
        drain(acc, batch.retry_at_ms)
    assert delays == [100, 200, 400, 800, 1000, 1000]


def test_queued_batches_past_delivery_timeout_expire() -> None:
    acc = accumulator(linger_ms=1_000_000, delivery_timeout_ms=500)
    fill(acc, T0, 1, now_ms=0)
    fill(acc, T1, 1, now_ms=300)
    assert acc.expire(499) == []
    assert [b.tp for b in acc.expire(500)] == [T0]
    assert not acc.has_time_left(next(acc.queued(T1)), now_ms=750)


def test_flush_makes_lingering_batches_ready_now() -> None:
    acc = accumulator(linger_ms=1_000_000)
    fill(acc, T0, 1)
    assert drain(acc, 0) == {}
    waiting = acc.begin_flush()
    assert len(waiting) == 1
    assert drain(acc, 0)[1] == waiting
    acc.end_flush()


def test_sequence_numbers_are_assigned_per_partition_at_batch_creation() -> None:
    state = IdempotenceState()
    state.set_producer_id_and_epoch(42, 3)
    acc = accumulator(linger_ms=0, batch_size=300, idempotence=state)
    fill(acc, T0, 7)  # 3 + 3 + 1 records
    fill(acc, T1, 2)
    assert [b.base_sequence for b in acc.queued(T0)] == [0, 3, 6]
    assert [b.base_sequence for b in acc.queued(T1)] == [0]
    sent = drain(acc, 0)[1]
    for batch in sent:
        header = validate_batch(batch.encode())
        assert (header.producer_id, header.producer_epoch) == (42, 3)
        assert header.base_sequence == batch.base_sequence
    fill(acc, T1, 1)  # T1's first batch was sealed by the drain: the next starts at 2
    assert [b.base_sequence for b in acc.queued(T1)] == [2]


def test_an_epoch_bump_renumbers_queued_batches_from_zero() -> None:
    state = IdempotenceState()
    state.set_producer_id_and_epoch(42, 0)
    acc = accumulator(linger_ms=0, batch_size=300, idempotence=state)
    fill(acc, T0, 7)
    first = drain(acc, 0)[1][0]
    acc.on_done(first)  # failed for good: a gap at sequences 0..2
    state.request_epoch_bump()
    state.set_producer_id_and_epoch(42, 1)
    acc.resequence()
    assert [b.base_sequence for b in acc.queued(T0)] == [0, 3]
    fill(acc, T0, 3)
    assert [b.base_sequence for b in acc.queued(T0)] == [0, 3, 6]  # the open one filled up
    header = validate_batch(drain(acc, 0)[1][0].encode())
    assert (header.producer_epoch, header.base_sequence) == (1, 0)


def test_drained_batches_hold_the_appended_records_in_order() -> None:
    acc = accumulator(linger_ms=0)
    futures = [
        acc.append(T0, 1000 + i, b"k%d" % i, b"v%d" % i, (("h", b"x"),) if i else None, 0)
        for i in range(5)
    ]
    (batch,) = drain(acc, 0)[1]
    records = list(iter_records(batch.encode()))
    assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in records] == [
        (i, b"k%d" % i, b"v%d" % i, 1000 + i) for i in range(5)
    ]
    assert records[1].headers == (("h", b"x"),)
    batch.result.complete(base_offset=500, log_append_time_ms=-1)
    assert [f.result(0).offset for f in futures if f is not None] == [500 + i for i in range(5)]


def test_a_failed_batch_raises_its_typed_error_from_every_record_future() -> None:
    acc = accumulator(linger_ms=0)
    futures = [acc.append(T0, 0, None, b"v", None, 0) for _ in range(3)]
    (batch,) = drain(acc, 0)[1]
    seen: list[object] = []
    assert futures[0] is not None
    futures[0].add_done_callback(lambda f: seen.append(f.exception(0)))
    batch.result.complete(-1, -1, NotEnoughReplicasError("isr too small"))
    for future in futures:
        assert future is not None and future.done()
        with pytest.raises(NotEnoughReplicasError, match="isr too small"):
            future.result(0)
    assert len(seen) == 1 and isinstance(seen[0], NotEnoughReplicasError)


def test_a_pending_future_times_out() -> None:
    acc = accumulator()
    future = acc.append(T0, 0, None, b"v", None, 0)
    assert future is not None
    with pytest.raises(TimeoutError):
        future.result(timeout=0.01)


def test_a_ready_broker_also_carries_its_other_partitions_first_batches() -> None:
    """Kafka's ``RecordAccumulator.drain``: once a broker has a ready partition, the request
    it gets anyway carries the first batch of every partition it leads, lingering or not;
    partitions of a broker with nothing ready wait for their linger."""
    acc = accumulator(batch_size=1000, linger_ms=1000)
    fill(acc, T0, 11)  # a full batch, and one record in a second
    fill(acc, T1, 2)  # lingering, same leader as T0
    fill(acc, T2, 2)  # lingering, another leader
    out = drain(acc, 1)
    assert sorted((b.tp.partition, b.record_count) for b in out[1]) == [(0, 10), (1, 2)]
    assert 2 not in out


def test_a_batch_in_retry_backoff_gets_no_free_ride() -> None:
    acc = accumulator(batch_size=1000, linger_ms=1000, retry_backoff_ms=100)
    fill(acc, T1, 1)
    acc.begin_flush()
    (retried,) = drain(acc, 0)[1]
    acc.end_flush()
    acc.reenqueue(retried, now_ms=0)  # back off until 100
    fill(acc, T0, 11)  # one full batch: broker 1 is ready
    assert [b.tp for b in drain(acc, 50)[1]] == [T0]
    later = drain(acc, 100)[1]  # the retry is ready; T0's second batch rides along
    assert sorted((b.tp.partition, b.attempts) for b in later) == [(0, 1), (1, 2)]


def test_record_futures_run_callbacks_in_order_once_without_a_failing_one_stopping_others() -> None:
    acc = accumulator()
    futures = [acc.append(T0, 0, None, b"v", None, 0) for _ in range(3)]
    seen: list[int] = []

    def boom(_: object) -> None:
        raise RuntimeError("user code")

    assert all(f is not None for f in futures)
    futures[0].add_done_callback(lambda f: seen.append(0))  # type: ignore[union-attr]
    futures[1].add_done_callback(boom)  # type: ignore[union-attr]
    futures[2].add_done_callback(lambda f: seen.append(2))  # type: ignore[union-attr]
    (batch,) = acc.queued(T0)
    batch.result.complete(base_offset=7)
    batch.result.complete(base_offset=99)  # a second outcome is ignored
    assert seen == [0, 2]
    futures[1].add_done_callback(lambda f: seen.append(f.result().offset))  # type: ignore[union-attr]
    assert seen == [0, 2, 8]
    assert futures[2].done() and futures[2].exception() is None  # type: ignore[union-attr]
