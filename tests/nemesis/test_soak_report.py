"""The soak's figures from its samples (`replication.nemesis.soak_report`): rates, slopes over
the longest-lived process, the steady rate and the recovery after each heal."""

from __future__ import annotations

from pathlib import Path

import pytest

from replication.nemesis.soak_report import (
    FaultSpan,
    NodeSample,
    Sample,
    memory_by_fault,
    node_slopes,
    plot_soak,
    rates,
    recoveries,
    slope_percent_per_10_min,
    stalled_seconds,
    steady_rate,
)


def _node(pid: int, rss: int, fds: int = 100) -> NodeSample:
    return NodeSample(pid=pid, rss_bytes=rss, fds=fds, threads=10, disk_bytes=0)


def _resources(t: float, nodes: dict[str, NodeSample]) -> Sample:
    """A sample of the nodes only (no records)."""
    return Sample(t_s=t, acknowledged=0, consumed=0, nodes=nodes)


def test_rates_are_per_second_between_samples() -> None:
    samples = [
        Sample(t_s=0, acknowledged=0, consumed=0),
        Sample(t_s=1, acknowledged=100, consumed=50),
        Sample(t_s=3, acknowledged=300, consumed=450),
    ]
    assert rates(samples) == [(1, 100.0, 50.0), (3, 100.0, 200.0)]


def test_a_slope_is_the_share_of_the_mean_per_ten_minutes_after_the_warmup() -> None:
    flat = [(float(t), 1000.0) for t in range(600)]
    assert slope_percent_per_10_min(flat, 60) == 0.0
    growing = [(float(t), 1000.0 + t / 6) for t in range(0, 1200)]  # +100 per 10 min
    assert slope_percent_per_10_min(growing, 0) == pytest.approx(100 / 1100 * 100, rel=1e-3)
    warm = [(0.0, 0.0), (10.0, 500.0), *((float(t), 1000.0) for t in range(60, 120))]
    assert slope_percent_per_10_min(warm, 60) == 0.0  # the warm-up climb is left out


def test_node_slopes_follow_the_longest_lived_process_of_a_restarted_node() -> None:
    """A broker killed at t=100 and restarted (down for 5 s) starts its memory from nothing:
    that climb is not a leak; the slope is taken over its first process, the one seen
    longest, and the node is reported restarted once. A node whose process lived the whole
    run (one pid) is reported never restarted, and its growth is its slope."""
    samples = [
        _resources(
            t,
            {
                **({} if 100 <= t < 105 else {"broker-101": _node(1 if t < 100 else 2, 1000)}),
                "broker-102": _node(7, 1000 + t),
            },
        )
        for t in range(0, 130)
    ]
    slopes = node_slopes(samples, 10)
    assert slopes["broker-101"] == {
        "rss": 0.0,
        "fds": 0.0,
        "rss_late": 0.0,
        "fds_late": 0.0,
        "fds_start": 100,
        "fds_end": 100,
        "fds_max": 100,
        "restarts": 1,
    }
    assert slopes["broker-102"]["restarts"] == 0
    assert slopes["broker-102"]["rss"] > 0


def test_descriptors_that_reach_a_level_and_stay_have_no_late_slope() -> None:
    """Channels dialled as leaders move (one more descriptor now and then, up to a bound)
    make a slope over the whole run of a few percent of a few dozen; over the second half,
    once every channel is open, it is flat, and the level reached is reported."""
    samples = [_resources(t, {"c": _node(1, 1000, 30 + min(t, 300) // 100)}) for t in range(1200)]
    slopes = node_slopes(samples, 60)["c"]
    assert slopes["fds"] > 1
    assert slopes["fds_late"] == 0.0
    assert (slopes["fds_start"], slopes["fds_end"], slopes["fds_max"]) == (30, 33, 33)


def test_recovery_is_the_time_from_a_heal_until_the_rate_is_back_within_ten_percent() -> None:
    # 100/s steady; a fault from 20 to 30 s drops it to 0, then 80/s (not within 10%) until
    # 34 s, then 100/s: the first 3 s whose mean is 90% or more start at 32 s (80, 100, 100).
    def rate(t: int) -> float:
        return 0.0 if 20 <= t < 30 else 80.0 if 30 <= t < 34 else 100.0

    series = [(float(t), rate(t)) for t in range(1, 80)]
    faults = [FaultSpan(label="kill(101)", start_s=20, end_s=30)]
    steady = steady_rate(series, faults, warmup_s=0)
    assert steady == 100.0
    assert recoveries(series, faults, steady) == [2.0]
    never = [(float(t), 0.0 if t >= 20 else 100.0) for t in range(1, 60)]
    assert recoveries(never, faults, 100.0) == [None]
    assert recoveries(never, faults, 0.0) == [None]  # a stalled run has nothing to return to
    assert stalled_seconds(never, warmup_s=10) == 40


def test_the_plot_is_written(tmp_path: Path) -> None:
    samples = [
        Sample(t_s=t, acknowledged=100 * t, consumed=90 * t, nodes={"broker-101": _node(1, 2**20)})
        for t in range(30)
    ]
    path = tmp_path / "soak.png"
    plot_soak(samples, [FaultSpan(label="loss:5%(101)", start_s=5, end_s=10)], path, "test")
    assert path.stat().st_size > 10_000


def test_memory_by_fault_is_the_mean_change_of_a_node_over_each_fault_kind() -> None:
    """A broker gains 2 MiB over each partition (and the quiet time after it) and nothing over
    a delay; a controller gains nothing. A fault in the warm-up is left out, and so is a node
    restarted during a fault."""
    mib = 2**20
    faults = [
        FaultSpan(label="partition:isolate(101)", start_s=10, end_s=15),
        FaultSpan(label="partition:isolate(1)", start_s=40, end_s=45),
        FaultSpan(label="delay:50ms(leader) by:relay", start_s=70, end_s=75),
        FaultSpan(label="partition:majority", start_s=100, end_s=105),
    ]

    def broker_rss(t: int) -> int:
        return (
            100 + 2 * sum(1 for f in faults if f.label.startswith("partition") and t > f.start_s)
        ) * mib

    samples = [
        _resources(
            t,
            {
                "broker-101": _node(1, broker_rss(t)),
                "controller-1": _node(2 if t < 102 else 3, 50 * mib),
            },
        )
        for t in range(0, 130)
    ]
    assert memory_by_fault(samples, faults, warmup_s=20) == {
        "delay": {"broker": 0.0, "controller": 0.0, "faults": 1},
        "partition": {"broker": 2.0, "controller": 0.0, "faults": 2},
    }
