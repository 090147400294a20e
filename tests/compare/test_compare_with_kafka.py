"""``kraft compare --with-kafka``: the Kafka column merged beside kraft's, on one time axis,
and the report's kraft-against-Kafka table (pure); one short slow-follower phase on the suite's
Apache Kafka (marked ``kafka``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kraft.compare.kafka_column import KAFKA, KafkaArena, merge, run_kafka_column
from kraft.compare.report import render_report
from kraft.compare.run import build_parser
from kraft.compare.scenarios import Timing
from kraft.compare.workload import Clock
from kraft.peer import KafkaCluster


def _window(p99: float) -> dict[str, Any]:
    return {"acked": 10, "p50_ms": p99 / 2, "p99_ms": p99, "p999_ms": p99, "max_ms": p99}


def _slow(fault_start: float, shrink: float, during_p99: float) -> dict[str, Any]:
    return {
        "before": _window(5.0),
        "during": _window(during_p99),
        "after": _window(6.0),
        "isr_shrink_s": shrink,
        "isr_expand_s": 1.0,
        "isr_events": [{"t": fault_start + shrink, "leader": 1, "epoch": 1, "isr": [1, 2]}],
        "latency_series": [{"t": fault_start, "n": 1, "p50_ms": 1.0, "p99_ms": 1.0}],
        "throughput_series": [[fault_start, 100.0]],
        "failed": 0,
    }


def _steady(records_per_s: float, brokers_us: float) -> dict[str, Any]:
    return {
        "records_per_s": records_per_s,
        "p50_ms": 2.0,
        "p99_ms": 9.0,
        "p999_ms": 12.0,
        "client_cpu_us_per_record": 20.0,
        "brokers_cpu_us_per_record": brokers_us,
        "one_at_a_time_p50_ms": 3.0,
        "one_at_a_time_p99_ms": 5.0,
    }


def _results() -> dict[str, Any]:
    kraft = {
        "slow-follower": {
            "victim": 3,
            "fault": {"kind": "SIGSTOP", "start": 10.0, "end": 18.0},
            "modes": {"isr-min2": _slow(10.0, 2.5, 2400.0)},
        },
        "steady": {
            "records": 1000,
            "modes": {"isr-min2": _steady(3000.0, 90.0)},
        },
    }
    kafka = {
        "slow-follower": {
            "victim": 103,
            "fault": {"kind": "SIGSTOP", "start": 70.0, "end": 78.0},
            "modes": {KAFKA.name: _slow(70.0, 2.2, 2300.0)},
        },
        "steady": {
            "records": 1000,
            "modes": {KAFKA.name: _steady(30000.0, 15.0)},
        },
        "leader-kill": {"error": "TimeoutError: no leader"},
    }
    kraft["leader-kill"] = {"kills": [], "modes": {}}
    merge(kraft, kafka)
    return {
        "quick": True,
        "replication_factor": 3,
        "brokers": 3,
        "controllers": 1,
        "broker_config": {"replica.lag.time.max.ms": "2000"},
        "cpus": 2,
        "load_average_before": [1.0],
        "load_average_after": [1.5],
        "seconds": 100.0,
        "modes": {"isr-min2": "ISR", KAFKA.name: KAFKA.label},
        "clients": {"kraft": "kraft's client (gRPC)", "kafka": "confluent-kafka (librdkafka)"},
        "kafka_version": "4.4.0",
        "scenarios": kraft,
    }


def test_the_kafka_column_lands_beside_kraft_on_kraft_fault_time() -> None:
    s = _results()["scenarios"]
    kafka = s["slow-follower"]["modes"][KAFKA.name]
    assert kafka["latency_series"][0]["t"] == 10.0  # 70 s in Kafka's run, shifted by -60
    assert kafka["isr_events"][0]["t"] == 12.2 and kafka["throughput_series"][0][0] == 10.0
    assert kafka["kafka_victim"] == 103 and kafka["kafka_fault"]["start"] == 70.0
    assert s["steady"]["modes"][KAFKA.name]["records_per_s"] == 30000.0
    assert s["leader-kill"]["kafka_error"] == "TimeoutError: no leader"


def test_the_report_sets_kraft_isr_beside_kafka_isr_with_ratios() -> None:
    report = render_report(_results(), [])
    assert "## kraft's ISR beside Apache Kafka's" in report
    assert "| steady: records/s | 3,000 | 30,000 | 0.10x |" in report
    assert "| steady: brokers' CPU µs/record | 90.0 | 15.0 | 6.00x |" in report
    assert "| slow follower: p99 during the pause, ms | 2400.0 | 2300.0 | 1.04x |" in report
    assert "confluent-kafka (librdkafka)" in report and "Kafka broker 103" in report


def test_with_kafka_and_client_parse() -> None:
    args = build_parser().parse_args(["--with-kafka", "--client", "confluent-kafka"])
    assert args.with_kafka and args.client == "confluent-kafka"
    assert build_parser().parse_args([]).client == "kraft"


@pytest.mark.kafka
@pytest.mark.process
def test_a_paused_kafka_follower_stalls_acks_all_writes_until_it_resumes(
    kafka_peer: KafkaCluster, tmp_path: Path
) -> None:
    """The suite's Kafka (3+3): one Kafka broker SIGSTOPped for 3 s under a librdkafka probe;
    the same scenario code as kraft's columns. Kafka's ``replica.lag.time.max.ms`` here is
    kraft's default, longer than the pause: the follower stays in the ISR, so the leader holds
    acks=all writes for the pause. NB: the shared cluster is left whole (every node running,
    the partition's ISR full again) before the test ends, for the tests after it."""
    timing = Timing(
        warmup_s=1, pause_s=3, after_s=2, phase_s=1, kills=1, steady_records=500, rate_per_s=50
    )
    out = run_kafka_column(kafka_peer, 3, ["slow-follower"], Clock(), timing, _Say())
    slow = out["slow-follower"]
    assert "error" not in slow, slow
    row = slow["modes"][KAFKA.name]
    assert row["failed"] == 0 and row["before"]["acked"] > 0
    assert row["during"]["max_ms"] > 1000  # held while the follower was paused
    assert row["before"]["p99_ms"] < row["during"]["max_ms"] / 2
    assert slow["victim"] in kafka_peer.broker_ids
    assert set(kafka_peer.pids()) == set(kafka_peer.node_ids())  # healed: every node runs
    arena = KafkaArena(kafka_peer, 3)
    arena.modes[row["topic"]] = KAFKA
    arena.wait_full_isr([row["topic"]], timeout=60)  # the follower is back in the ISR


class _Say:
    scenario = ""

    def __call__(self, text: str) -> None:
        pass
