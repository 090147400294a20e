"""`kraft bench produce`'s per-record harness (`produce`) keeps at most ``--window`` records
unacknowledged by waiting on the callbacks, not by polling: run against the stub network of
`kraft.bench.send_micro` (no cluster), with a window far smaller than the run."""

from __future__ import annotations

import threading
import time

import pytest

from kraft.bench.send_micro import send_micro


@pytest.mark.timeout(60)
def test_a_full_window_waits_for_acknowledgements_without_sleeping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    main = threading.get_ident()
    slept: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        if threading.get_ident() == main:
            slept.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    out = send_micro(records=5000, size=100, acks="all", window=1, linger_ms=0, batch_size=2048)
    assert out["records"] == 5000  # every record's callback ran (else BenchError)
    assert out["p50_ms"] > 0
    assert slept == []
