"""The slow-link scenario's pure parts (``kraft compare --network netns``, issue 29): the plan
of link limits, the ISR and leader moments of a phase, a phase's row, the choices a network
cannot run, and the report stating each limit. The run on network hosts is
tests/netns/test_netns_compare.py."""

from __future__ import annotations

from typing import Any

import pytest

from kraft.compare.report import render_report, summary_table
from kraft.compare.run import check_choices, main
from kraft.compare.slow_links import LinkLimit, isr_moments, link_phase_row, plan_limits
from kraft.compare.workload import Send


def test_the_plan_limits_a_follower_by_delay_then_by_bandwidth_then_every_broker_by_delay() -> None:
    delay, bandwidth, everywhere = plan_limits(20, 5, 256)
    assert (delay.where, delay.kind, delay.delay_ms, delay.jitter_ms) == (
        "follower",
        "delay",
        20,
        5,
    )
    assert (bandwidth.where, bandwidth.kind, bandwidth.kbit) == ("follower", "bandwidth", 256)
    assert (everywhere.where, everywhere.kind) == ("brokers", "delay")
    assert [x.kind for x in plan_limits(0, 0, 64)] == ["bandwidth"]  # 0: no delay phases
    assert [x.where for x in plan_limits(10, 0, 0)] == ["follower", "brokers"]
    with pytest.raises(ValueError, match="jitter"):
        plan_limits(5, 10, 0)
    with pytest.raises(ValueError):
        plan_limits(-1, 0, 0)


def test_a_limit_names_what_it_limits_on_which_host_and_how_much() -> None:
    delay = LinkLimit(where="follower", delay_ms=20, jitter_ms=5)
    assert delay.describe(["broker-103"]) == "20 ms ± 5 ms delay each way on broker-103's link"
    assert (
        LinkLimit(where="follower", kbit=1024).describe(["broker-102"])
        == "1,024 kbit/s each way (TBF) on broker-102's link"
    )
    assert LinkLimit(where="brokers", delay_ms=20).describe(["broker-101", "broker-102"]) == (
        "20 ms ± 0 ms delay each way on every broker's link (broker-101, broker-102)"
    )


def _event(t: float, isr: list[int], leader: int = 101) -> dict[str, Any]:
    return {"t": t, "leader": leader, "epoch": 0, "isr": isr}


def test_isr_moments_time_the_shrink_from_the_limit_and_the_expand_from_the_heal() -> None:
    events = [_event(1.0, [101, 102, 103]), _event(15.5, [101, 102]), _event(20.4, [101, 102, 103])]
    moments = isr_moments(events, 103, start=10.0, healed=20.0, end=25.0)
    assert moments == {
        "isr_shrink_s": 5.5,
        "isr_expand_s": 0.4,
        "isr_back_while_limited": False,
        "leader_changes": 0,
    }
    # Kept: no shrink, no expand (an ISR change before the limit does not count).
    kept = isr_moments([_event(1.0, [101, 102])], 103, start=10.0, healed=20.0, end=25.0)
    assert kept["isr_shrink_s"] is None and kept["isr_expand_s"] is None
    # Back while still limited (it caught up through the slow link): no expand after the heal.
    back = isr_moments(
        [_event(1.0, [101, 102, 103]), _event(12.0, [101, 102]), _event(16.0, [101, 102, 103])],
        103,
        start=10.0,
        healed=20.0,
        end=25.0,
    )
    assert back["isr_back_while_limited"] and back["isr_expand_s"] is None


def test_isr_moments_count_the_leader_changes_within_the_phase() -> None:
    events = [
        _event(1.0, [101, 102, 103], leader=102),
        _event(11.0, [101, 102, 103], leader=101),
        _event(12.0, [101, 102, 103], leader=102),
        _event(30.0, [101, 102, 103], leader=103),  # after the phase
    ]
    assert isr_moments(events, 103, start=10.0, healed=20.0, end=25.0)["leader_changes"] == 2


def test_a_phase_row_rates_and_times_only_the_limited_part() -> None:
    """Acknowledged records/s and latency cover [start, healed): the recovery after the heal
    (here a backlog acknowledged at 21 s) is in the phase's sent/acked counts only."""
    sends = [Send(i, 10.0 + i * 0.1, 10.0 + i * 0.1 + 0.05) for i in range(100)]  # 10-20 s
    sends.append(Send(100, 19.9, 21.0))
    row = link_phase_row("delay", sends, 10.0, 22.0, healed=20.0)
    assert row["acked_per_s"] == 10.0  # 100 acknowledgements in 10 s
    assert row["latency"]["p50_ms"] == pytest.approx(50.0)
    assert row["latency"]["max_ms"] == pytest.approx(1100.0)
    assert row["sent"] == 101 and row["acked"] == 101


def test_a_network_refuses_what_it_cannot_run_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ValueError, match="not run on network hosts"):
        check_choices("netns", ["steady"], "kraft", True)
    check_choices("netns", ["steady"], "confluent-kafka", False)  # the hosts' Kafka listeners
    with pytest.raises(ValueError, match="--network netns"):
        check_choices("local", ["steady", "slow-link"], "kraft", False)
    check_choices("netns", ["steady", "slow-link"], "kraft", False)
    assert main(["--scenarios", "slow-link", "--out", "/nonexistent"]) == 2
    assert "slow-link limits a host's link: give --network netns" in capsys.readouterr().err
    assert main(["--network", "netns", "--link-delay", "5", "--link-jitter", "9"]) == 2


def _results() -> dict[str, Any]:
    row = {
        "phase": "",
        "sent": 10,
        "acked": 10,
        "failed": 0,
        "errors": [],
        "accepting": True,
        "unavailable_s": 0.0,
        "seconds": 4.0,
        "acked_per_s": 150.0,
        "isr_shrink_s": None,
        "isr_expand_s": None,
        "isr_back_while_limited": False,
        "leader_changes": 0,
    }
    limit = {"where": "follower", "kind": "bandwidth", "kbit": 256, "hosts": ["broker-103"]}
    phases = [
        {"name": "no limit", "start": 9.0, "healed": None, "end": 13.0},
        {
            "name": "256 kbit/s each way (TBF) on broker-103's link",
            "limit": {**limit, "by": "tbf"},
            "counters": {"broker-103": {"dropped": 0, "overlimits": 1140}},
            "start": 13.0,
            "healed": 21.0,
            "end": 25.0,
        },
    ]

    def mode(p50: float, shrink: float | None, quorum: bool) -> dict[str, Any]:
        rows = [
            {**row, "phase": "no limit", "latency": {"p50_ms": 9.0, "p99_ms": 20.0}},
            {
                **row,
                "phase": phases[1]["name"],
                "latency": {"p50_ms": p50, "p99_ms": 2 * p50},
                "isr_shrink_s": shrink,
                "isr_expand_s": 0.4 if shrink else None,
            },
        ]
        burst = {"records_per_s": 30_000.0 if quorum else 2_000.0, "p50_ms": 1.0, "p99_ms": 900.0}
        return {"quorum": quorum, "leader": 101, "phases": [{**r, "burst": burst} for r in rows]}

    return {
        "quick": True,
        "network": "netns",
        "replication_factor": 3,
        "brokers": 3,
        "controllers": 1,
        "broker_config": {"replica.lag.time.max.ms": "2000"},
        "timing": {"rate_per_s": 150},
        "cpus": 2,
        "load_average_before": [1.0],
        "load_average_after": [1.0],
        "seconds": 50.0,
        "modes": {"isr-min2": "ISR", "quorum": "quorum"},
        "scenarios": {
            "slow-link": {
                "victim": 103,
                "victim_host": "broker-103",
                "phases": phases,
                "modes": {"isr-min2": mode(584.0, 5.5, False), "quorum": mode(4.5, None, True)},
            }
        },
    }


def test_the_report_states_each_limit_and_the_isr_changes_and_says_kafka_is_not_run() -> None:
    text = render_report(_results(), [])
    assert "| 256 kbit/s each way (TBF) on broker-103's link | 13.0-21.0 s | tbf; 1,140 " in text
    assert "out 5.5 s after the limit began, back 0.4 s after the heal" in text
    assert "| quorum | 256 kbit/s each way (TBF) on broker-103's link | 150.0 | 4.5 |" in text
    assert "| - | 0 | 30,000 | 900 |" in text and "| 0 | 2,000 | 900 |" in text
    assert "Apache Kafka's column is not run on network hosts" in text
    table = summary_table(_results())
    assert "slow link p50 ms (none/bandwidth@follower)" in table
    assert "9/584" in table and "9/4" in table  # ISR: 9 -> 584 ms; quorum 9 -> 4.5 ms
