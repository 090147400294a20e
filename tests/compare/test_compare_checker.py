"""The pieces of ``kraft compare`` that need no cluster: the acknowledged-data checker, the
timeline arithmetic, the report and the command line."""

from __future__ import annotations

import pytest

from kraft.compare.checker import check_acknowledged
from kraft.compare.report import render_report, summary_table
from kraft.compare.workload import Send, latency_series, throughput_series, unavailable_s


def test_the_checker_counts_an_acknowledged_value_missing_from_the_final_read_as_lost() -> None:
    acked = [b"t:%d" % i for i in range(100)]
    read = [v for v in acked if v != b"t:42"]
    check = check_acknowledged(acked, read)
    assert check.lost == 1 and not check.ok
    assert check.lost_examples == ("t:42",)
    assert check.acknowledged == 100 and check.read == 99


def test_the_checker_passes_a_complete_read_and_counts_duplicates_and_unacked_apart() -> None:
    acked = [b"t:1", b"t:2"]
    read = [b"t:1", b"t:2", b"t:2", b"t:3"]  # t:2 written twice, t:3 written but never acked
    check = check_acknowledged(acked, read)
    assert check.ok and check.lost == 0
    assert check.duplicates == 1 and check.unacknowledged_present == 1


def test_the_checker_sees_a_truncated_tail_as_every_acknowledged_value_after_the_cut() -> None:
    acked = [b"t:%d" % i for i in range(1000)]
    check = check_acknowledged(acked, acked[:990])
    assert check.lost == 10 and len(check.lost_examples) == 5


def test_unavailability_is_the_time_in_gaps_between_acknowledgements() -> None:
    # acks every 0.1 s until 1.91 s, none from 2 s to 5 s (refused), then from 5.01 s
    sends = [Send(seq=i, sent_s=i / 10, acked_s=i / 10 + 0.01) for i in range(20)]
    sends += [
        Send(seq=100 + i, sent_s=2 + i / 10, error="NotEnoughReplicasError") for i in range(30)
    ]
    sends += [Send(seq=200 + i, sent_s=5 + i / 10, acked_s=5 + i / 10 + 0.01) for i in range(10)]
    assert unavailable_s(sends, 0.0, 6.0) == pytest.approx(3.1)  # 1.91 s to 5.01 s
    assert unavailable_s(sends[:20], 0.0, 2.0) == 0.0


def test_latency_and_throughput_series_bucket_by_time() -> None:
    sends = [
        Send(seq=i, sent_s=i * 0.1, acked_s=i * 0.1 + (2.0 if i == 5 else 0.005)) for i in range(10)
    ]
    series = latency_series(sends, 0.5)
    assert [b["n"] for b in series] == [5, 5]
    assert series[1]["p999_ms"] == pytest.approx(2000.0)
    rate = throughput_series(sends, 0.5, 0.0, 1.0)
    assert sum(r[1] for r in rate) * 0.5 == 9  # the 2 s ack falls outside [0, 1)


def _results() -> dict[str, object]:
    phases = [
        {
            "phase": "2 replicas killed",
            "sent": 10,
            "acked": 0,
            "failed": 10,
            "errors": ["NotEnoughReplicasError"],
            "accepting": False,
            "unavailable_s": 4.0,
            "seconds": 4.0,
            "produce_once": "NOT_ENOUGH_REPLICAS",
        },
    ]
    return {
        "quick": True,
        "replication_factor": 3,
        "brokers": 3,
        "controllers": 1,
        "broker_config": {"replica.lag.time.max.ms": "2000"},
        "cpus": 2,
        "load_average_before": [1.0],
        "load_average_after": [1.0],
        "seconds": 10.0,
        "modes": {"isr-min2": "ISR, min.insync.replicas=2"},
        "quorum_pending": "replication.mode=quorum is not supported yet",
        "scenarios": {
            "failures": {
                "killed": [103, 102],
                "phases": [{"name": "2 replicas killed", "start": 0.0, "end": 4.0}],
                "modes": {"isr-min2": {"topic": "t", "phases": phases, "throughput_series": []}},
            },
        },
    }


def test_the_report_states_the_claim_the_figure_and_that_the_quorum_column_is_pending() -> None:
    text = render_report(_results(), [])  # type: ignore[arg-type]
    assert "f+1 replicas tolerate f failures" in text
    row = (
        "| isr-min2 | 2 replicas killed | 0/10 | no | 4.00 | NOT_ENOUGH_REPLICAS "
        "| NotEnoughReplicasError |"
    )
    assert row in text
    assert "quorum column is pending" in text
    table = summary_table(_results())  # type: ignore[arg-type]
    assert "refused" in table and "quorum: pending" in table


@pytest.mark.parametrize(
    "argv", [["--scenarios", "slow-follower,bogus"], ["--replication-factor", "4"]]
)
def test_the_command_refuses_an_unknown_scenario_or_replication_factor(argv: list[str]) -> None:
    from kraft.compare.run import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    assert e.value.code == 2


def test_the_command_takes_a_scenario_list() -> None:
    from kraft.compare.run import build_parser

    args = build_parser().parse_args(["--quick", "--scenarios", "steady,failures", "--out", "x"])
    assert args.scenarios == ["steady", "failures"] and args.quick and args.out == "x"


def test_a_phase_accepts_only_if_a_late_record_is_acknowledged_within_it() -> None:
    """2 of 3 quorum replicas down: records sent late in the phase were acknowledged only after
    the restart; the full run of 2026-11-26 called that "accepting"."""
    from kraft.compare.scenarios import phase_row
    from kraft.compare.workload import Send

    after_restart = [Send(seq=i, sent_s=7.0 + i / 10, acked_s=8.5) for i in range(5)]
    row = phase_row("2 replicas killed", after_restart, 0.0, 8.0)
    assert (row["sent"], row["acked"], row["accepting"]) == (5, 5, False)
    within = [*after_restart, Send(seq=9, sent_s=6.0, acked_s=6.1)]
    assert phase_row("1 replica killed", within, 0.0, 8.0)["accepting"] is True


def test_the_slow_follower_before_window_leaves_out_a_record_the_pause_held() -> None:
    """A record sent before the pause but acknowledged after it started waited for the paused
    follower: it is not "before" (a fixed 0.5 s margin let such records in whenever acks=all
    took longer, and "before" then showed the pause: the flaky Kafka-column test)."""
    from kraft.compare.scenarios import window_percentiles
    from kraft.compare.workload import Clock, ProbeProducer

    probe = ProbeProducer("-", "t", Clock())
    probe.sends = [Send(0, 1.0, 1.2), Send(1, 1.5, 1.9), Send(2, 1.6, 5.1), Send(3, 2.5, 5.2)]
    paused_at = 2.0
    before = window_percentiles(probe.sends, 0.0, paused_at, acked_by=paused_at)
    assert before["acked"] == 2 and before["max_ms"] == 400.0
    during = window_percentiles(probe.sends, paused_at, 5.0)
    assert during["acked"] == 1 and during["max_ms"] == 2700.0
