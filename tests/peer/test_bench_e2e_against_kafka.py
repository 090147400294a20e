"""``kraft bench e2e --against kafka``: its summary and report from runs (pure), its figure,
and one short real run on the suite's kraft cluster and Kafka peer (marked ``kafka``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kraft.bench.e2e import build_parser, main
from kraft.bench.e2e_against import render, run_e2e_against, summarize
from kraft.bench.plots import plot_e2e
from kraft.cluster import LocalCluster
from kraft.peer import KafkaCluster


def _run(p50: float, p99: float, cpu_us: float) -> dict[str, Any]:
    return {
        "p50_ms": p50,
        "p99_ms": p99,
        "p999_ms": p99 * 2,
        "ack": {"p50_ms": p50 / 2, "p99_ms": p99 / 2, "p999_ms": p99},
        "servers_cpu_us_per_record": cpu_us,
        "rss_mib": {"broker-101": 80.0},
    }


def _result() -> dict[str, Any]:
    runs = {
        "5": {
            "kraft": [_run(10.0, 40.0, 90.0), _run(12.0, 60.0, 110.0), _run(30.0, 90.0, 100.0)],
            "kafka": [_run(5.0, 10.0, 30.0), _run(6.0, 20.0, 20.0), _run(5.0, 9.0, 25.0)],
        },
        "0": {"kraft": [_run(8.0, 30.0, 120.0)], "kafka": [_run(2.0, 6.0, 40.0)]},
    }
    return {
        "bench": "e2e --against kafka",
        "kafka_version": "4.4.0",
        "rate": 10_000,
        "seconds": 10,
        "record_size": 100,
        "rounds": 3,
        "client": "confluent-kafka (librdkafka)",
        "load_average": {"before": [1.5], "after": [2.5]},
        "runs": runs,
        "summary": {linger: summarize(by_system) for linger, by_system in runs.items()},
    }


def test_the_ratios_are_the_medians_of_the_rounds_ratios(tmp_path: Path) -> None:
    result = _result()
    s = result["summary"]["5"]
    assert s["kraft"]["median_p50_ms"] == 12.0 and s["kafka"]["median_p99_ms"] == 10.0
    # rounds' p50 ratios 2.0, 2.0, 6.0; p99 ratios 4.0, 3.0, 10.0
    assert s["ratio_kraft_to_kafka"]["p50_ms"] == 2.0
    assert s["ratio_kraft_to_kafka"]["p99_ms"] == 4.0
    assert s["ratio_kraft_to_kafka"]["servers_cpu_us_per_record"] == 4.0  # 3, 5.5, 4
    text = render(result)
    assert "Apache Kafka 4.4.0" in text and "kraft/Kafka" in text and "4.00x" in text
    plot_e2e(result, tmp_path / "e2e.png")
    assert (tmp_path / "e2e.png").read_bytes()[:4] == b"\x89PNG"


def test_lingers_parse_and_several_need_against(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(["--linger-ms", "5,0,5"]).linger_ms == [5, 0]
    with pytest.raises(SystemExit):
        parser.parse_args(["--linger-ms", "-1"])
    assert main(["--linger-ms", "5,0", "--bootstrap", "127.0.0.1:1"]) == 2
    assert "go with --against" in capsys.readouterr().err


@pytest.mark.long
@pytest.mark.kafka
@pytest.mark.process
def test_a_short_run_reports_both_systems_at_both_lingers(
    kafka_peer: KafkaCluster, kraft_cluster: LocalCluster
) -> None:
    args = build_parser().parse_args(
        ["--against", "kafka", "--rate", "1000", "--seconds", "1", "--rounds", "1",
         "--warmup-records", "0", "--quiet"]
    )  # fmt: skip
    result = run_e2e_against(args, kafka=kafka_peer, kraft=kraft_cluster)
    assert list(result["summary"]) == ["5", "0"]  # Kafka's default linger, then none
    for linger in ("5", "0"):
        for system in ("kraft", "kafka"):
            (run,) = result["runs"][linger][system]
            assert run["records"] == 1000 and run["linger_ms"] == int(linger)
            assert 0 < run["p50_ms"] <= run["p99_ms"] <= run["p999_ms"]
            assert run["ack"]["p50_ms"] > 0
            assert run["servers_cpu_us_per_record"] > 0  # every node's /proc was read
            assert all(run["rss_mib"].values()) and len(run["rss_mib"]) == 6
        assert result["summary"][linger]["ratio_kraft_to_kafka"]["p99_ms"] > 0
