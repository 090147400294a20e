"""`InflightFetches`: one outstanding Fetch per broker, kept across polls; a poll takes any
answer that came without waiting for the others."""

from __future__ import annotations

import time
from typing import Any

from kraft.types import TopicPartition
from replication.clients.fetches_in_flight import Inflight, InflightFetches, OnDone
from replication.messages import BrokerFetchResponse

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class _Call:
    def __init__(self) -> None:
        self.on_done: OnDone | None = None
        self.cancelled = False

    def send(self, on_done: OnDone) -> _Call:
        self.on_done = on_done
        return self

    def cancel(self) -> bool:
        self.cancelled = True
        return True


def _start(fetches: InflightFetches, leader: int, tp: TopicPartition, expires_s: float) -> Any:
    call = _Call()
    fetches.start(Inflight(leader, f"host:{leader}", {tp: 5}, expires_s), call.send)
    return call


def test_wait_returns_the_first_answer_and_keeps_the_other_fetch_outstanding() -> None:
    fetches = InflightFetches()
    far = time.monotonic() + 60
    first, second = _start(fetches, 1, TP0, far), _start(fetches, 2, TP1, far)
    assert fetches.busy(1) and fetches.fetching(TP0) and fetches.fetching(TP1)
    response = BrokerFetchResponse()
    second.on_done(response, None)
    started = time.monotonic()
    replies = fetches.wait(time.monotonic() + 5)
    assert time.monotonic() - started < 1  # did not wait for broker 1
    assert [(entry.leader, reply) for entry, reply, _ in replies] == [(2, response)]
    assert fetches.busy(1) and not fetches.busy(2) and not fetches.fetching(TP1)
    assert len(fetches) == 1 and not first.cancelled


def test_wait_times_out_with_no_answer() -> None:
    fetches = InflightFetches()
    _start(fetches, 1, TP0, time.monotonic() + 60)
    assert fetches.wait(time.monotonic() + 0.05) == []
    assert fetches.busy(1)


def test_an_expired_fetch_is_cancelled_and_its_late_answer_dropped() -> None:
    fetches = InflightFetches()
    now = time.monotonic()
    call = _start(fetches, 1, TP0, now + 0.01)
    assert fetches.earliest_expiry_s() == now + 0.01
    gone = fetches.expire(now + 1)
    assert [entry.leader for entry in gone] == [1] and call.cancelled
    assert not fetches.busy(1) and not fetches.fetching(TP0)
    call.on_done(BrokerFetchResponse(), None)  # the late answer
    assert fetches.wait(time.monotonic()) == []
    # a new Fetch to the same broker is not confused with the given-up one
    again = _start(fetches, 1, TP0, now + 60)
    call.on_done(BrokerFetchResponse(), None)
    assert fetches.wait(time.monotonic()) == [] and fetches.busy(1) and not again.cancelled


def test_an_answer_given_at_once_by_send_is_taken() -> None:
    fetches = InflightFetches()

    def failing(on_done: OnDone) -> Any:
        on_done(None, None)
        return _Call()

    fetches.start(Inflight(3, "host:3", {TP0: 0}, time.monotonic() + 60), failing)
    replies = fetches.wait(time.monotonic() + 1)
    assert [entry.leader for entry, _, _ in replies] == [3] and not fetches.busy(3)


def test_close_cancels_every_outstanding_fetch() -> None:
    fetches = InflightFetches()
    far = time.monotonic() + 60
    calls = [_start(fetches, 1, TP0, far), _start(fetches, 2, TP1, far)]
    fetches.close()
    assert all(call.cancelled for call in calls) and len(fetches) == 0


def test_take_over_gives_up_only_an_unanswered_long_poll_of_caught_up_partitions() -> None:
    fetches = InflightFetches()
    far = time.monotonic() + 60
    waiting, busy = _Call(), _start(fetches, 2, TP1, far)
    fetches.start(Inflight(1, "host:1", {TP0: 5}, far, caught_up=True), waiting.send)
    assert fetches.take_over(2) is None and not busy.cancelled  # it may bring records
    replaced = fetches.take_over(1)
    assert replaced is not None and replaced.positions == {TP0: 5} and waiting.cancelled
    assert not fetches.busy(1) and not fetches.fetching(TP0) and fetches.take_over(1) is None
    answered = _Call()
    fetches.start(Inflight(1, "host:1", {TP0: 5}, far, caught_up=True), answered.send)
    assert answered.on_done is not None
    answered.on_done(BrokerFetchResponse(), None)  # its answer came: taken, not thrown away
    assert fetches.take_over(1) is None and not answered.cancelled
    assert [entry.leader for entry, _, _ in fetches.wait(time.monotonic())] == [1]
