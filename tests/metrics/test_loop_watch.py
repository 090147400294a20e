"""The event-loop stall watch (`kraft.loop_watch`): its bookkeeping without a clock, then the
watch on a real loop that a synchronous callback holds: the lag histogram, the stall counter
and one WARN line."""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog
from structlog.testing import capture_logs

from kraft.loop_watch import TICK_S, LoopLag, watch_loop
from kraft.metrics import registry


def test_lag_is_the_lateness_of_a_wake_up_and_a_stall_is_one_at_or_over_the_threshold() -> None:
    lag = LoopLag(warn_s=0.2)
    on_time = lag.woke(due_s=10.0, now_s=10.003)
    early = lag.woke(due_s=20.0, now_s=19.999)  # a coarse timer: no lag
    at_threshold = lag.woke(due_s=0.0, now_s=0.2)
    long = lag.woke(due_s=40.0, now_s=41.5)

    assert abs(on_time.lag_s - 0.003) < 1e-9
    assert not on_time.stalled
    assert (early.lag_s, early.stalled) == (0.0, False)
    assert at_threshold.stalled
    assert long.stalled and abs(long.lag_s - 1.5) < 1e-9
    assert (lag.ticks, lag.stalls) == (4, 2)
    assert abs(lag.worst_s - 1.5) < 1e-9


def test_a_threshold_of_zero_measures_but_never_warns() -> None:
    lag = LoopLag(warn_s=0.0)
    reading = lag.woke(due_s=0.0, now_s=5.0)
    assert reading.lag_s == 5.0
    assert not reading.stalled
    assert lag.stalls == 0 and lag.worst_s == 5.0


def _sample(name: str, labels: dict[str, str] | None = None) -> float:
    return registry().get_sample_value(name, labels) or 0.0


def _lags_over_200ms() -> float:
    count = _sample("kraft_event_loop_lag_seconds_count")
    return count - _sample("kraft_event_loop_lag_seconds_bucket", {"le": "0.2"})


def test_a_callback_holding_the_loop_is_measured_counted_and_logged_once() -> None:
    async def run() -> LoopLag:
        book = LoopLag(warn_s=0.15)
        watch = asyncio.create_task(watch_loop(structlog.get_logger("test"), 150, lag=book))
        try:
            deadline = time.monotonic() + 10
            while book.ticks < 3:  # the watch runs, on time
                assert time.monotonic() < deadline, "the stall watch never woke"
                await asyncio.sleep(TICK_S)
            time.sleep(0.4)  # a synchronous step holding the loop: the stall under test
            while book.stalls < 1:
                assert time.monotonic() < deadline, "the stall was not seen"
                await asyncio.sleep(TICK_S)
            return book
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    count_before = _sample("kraft_event_loop_lag_seconds_count")
    stalls_before = _sample("kraft_event_loop_stalls_total")
    slow_before = _lags_over_200ms()
    with capture_logs() as logs:
        book = asyncio.run(run())

    stalled = [e for e in logs if e["event"] == "event_loop_stalled"]
    # One line per late wake-up; a loaded machine may add stalls of its own to ours.
    assert len(stalled) == book.stalls >= 1, logs
    assert {e["log_level"] for e in stalled} == {"warning"}
    assert max(e["late_ms"] for e in stalled) >= 350  # the 0.4 s hold, less one tick at most
    assert book.worst_s >= 0.35
    assert _sample("kraft_event_loop_lag_seconds_count") - count_before == book.ticks
    assert _sample("kraft_event_loop_stalls_total") - stalls_before == book.stalls
    assert _lags_over_200ms() - slow_before >= 1
