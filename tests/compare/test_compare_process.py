"""A small ``kraft compare`` on real processes: one scenario, a tiny workload, every output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraft.compare.run import run
from kraft.compare.scenarios import Timing

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]

TINY = Timing(
    warmup_s=1, pause_s=4, after_s=2, phase_s=2, kills=1, steady_records=1000, rate_per_s=100
)


def test_a_small_compare_sees_the_paused_follower_stall_isr_writes_and_writes_every_output(
    tmp_path: Path,
) -> None:
    results = run(
        tmp_path,
        quick=True,
        replication_factor=3,
        selected=["slow-follower"],
        quiet=True,
        timing=TINY,
    )
    assert json.loads((tmp_path / "results.json").read_text())["scenarios"].keys() == {
        "slow-follower"
    }
    report = (tmp_path / "report.md").read_text()
    assert "## Slow follower" in report
    slow = results["scenarios"]["slow-follower"]
    isr = slow["modes"]["isr-min2"]
    # The paused follower held every acks=all write until the ISR dropped it (2 s lag time).
    assert isr["isr_shrink_s"] is not None and isr["isr_shrink_s"] < TINY.pause_s
    assert isr["during"]["max_ms"] > 1000
    assert isr["during"]["max_ms"] > 5 * isr["before"]["p50_ms"]
    assert isr["failed"] == 0
    if results.get("quorum_pending") is None:  # quorum topics exist: a majority did not wait
        assert slow["modes"]["quorum"]["during"]["p99_ms"] < isr["during"]["max_ms"] / 2
    pytest.importorskip("matplotlib")
    assert (tmp_path / "latency-slow-follower.png").stat().st_size > 0
    assert (tmp_path / "throughput.png").stat().st_size > 0
