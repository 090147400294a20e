"""``kraft bench produce|consume --against kafka``: its summary and report from runs (pure),
its refusals, and one short real run against both systems (marked ``kafka``)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from kraft.bench.against_kafka import main_against, render, run_against, summarize
from kraft.bench.cpu import kraft_pids
from kraft.bench.kafka_clients import render_clients, run_clients
from kraft.bench.produce_consume import build_parser
from kraft.cluster import LocalCluster
from kraft.peer import KafkaCluster


def _run(records_per_s: float, servers_us: float, client: str) -> dict[str, Any]:
    return {
        "client": client,
        "records_per_s": records_per_s,
        "p50_ms": 2.0,
        "p99_ms": 9.0,
        "servers_cpu_us_per_record": servers_us,
        "client_cpu_us_per_record": 5.0,
        "rss_mib": {"broker-101": 70.0},
    }


def test_the_ratio_is_the_median_of_the_rounds_ratios() -> None:
    runs = {
        "kraft": [
            _run(10_000, 40.0, "kraft"),
            _run(30_000, 20.0, "kraft"),
            _run(20_000, 30.0, "kraft"),
        ],
        "kafka": [
            _run(100_000, 4.0, "librdkafka"),
            _run(100_000, 5.0, "librdkafka"),
            _run(50_000, 6.0, "librdkafka"),
        ],
    }
    s = summarize(runs)
    assert s["round_ratios_kraft_to_kafka"] == [0.1, 0.3, 0.4]
    assert s["ratio_kraft_to_kafka"] == 0.3
    assert s["kraft"]["median_records_per_s"] == 20_000
    assert s["cpu_ratio_kraft_to_kafka"] == 6.0  # 30 µs / 5 µs per record
    result = {
        "bench": "produce --against kafka",
        "kafka_version": "4.4.0",
        "records": 1000,
        "record_size": 100,
        "rounds": 3,
        "load_average": {"before": [1.0], "after": [2.0]},
        "summary": s,
    }
    text = render(result)
    assert "kraft / Kafka: 0.300x records/s" in text and "Apache Kafka 4.4.0" in text


def _args(*argv: str) -> argparse.Namespace:
    args = build_parser("produce").parse_args(list(argv))
    args.bench = "produce"
    return args


def test_against_refuses_a_given_bootstrap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_against(_args("--against", "kafka", "--bootstrap", "127.0.0.1:1")) == 2
    assert "starts its own clusters" in capsys.readouterr().err


@pytest.mark.long
@pytest.mark.kafka
@pytest.mark.process
def test_a_short_run_reports_both_systems(
    kafka_peer: KafkaCluster, kraft_cluster: LocalCluster
) -> None:
    args = _args(
        "--against", "kafka", "--records", "2000", "--rounds", "1", "--warmup-records", "0"
    )
    args.quiet = True
    result = run_against(args, kafka=kafka_peer, kraft=kraft_cluster)  # the suite's clusters
    summary = result["summary"]
    for system in ("kraft", "kafka"):
        assert [r["records"] for r in result["runs"][system]] == [2000]
        assert summary[system]["median_records_per_s"] > 0
        assert summary[system]["median_servers_cpu_us_per_record"] > 0  # /proc was read
        rss = summary[system]["rss_mib_after_last_run"]
        assert {"controller-1", "broker-103"} <= set(rss) and all(rss.values())
    assert summary["kafka"]["client"] == "confluent-kafka (librdkafka)"
    assert summary["ratio_kraft_to_kafka"] > 0
    assert "kraft / Kafka:" in render(result)


def test_warmup_records_and_clients_parse() -> None:
    assert _args().warmup_records == {"kraft": 0, "kafka": 2_000_000}  # the JIT's default
    assert _args("--warmup-records", "kafka=500_000").warmup_records["kafka"] == 500_000
    assert _args("--warmup-records", "7").warmup_records == {"kraft": 7, "kafka": 7}
    assert _args("--client", "kafka-python,kraft").client == ["kafka-python", "kraft"]
    for bad in (("--warmup-records", "redpanda=5"), ("--client", "java")):
        with pytest.raises(SystemExit):
            _args(*bad)


def test_against_takes_one_client(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_against(_args("--against", "kafka", "--client", "kraft,kafka-python")) == 2
    assert "one --client" in capsys.readouterr().err


@pytest.mark.long
@pytest.mark.kafka
@pytest.mark.process
def test_each_client_on_kraft_then_one_on_both_after_its_warm_up(
    kafka_peer: KafkaCluster, kraft_cluster: LocalCluster
) -> None:
    """The suite's kraft cluster: the three clients against it, then kafka-python driving
    kraft's Kafka listener and the suite's Kafka, Kafka warmed up with at least 1,500 records."""
    for bench in ("produce", "consume"):
        args = _args("--client", "kraft,confluent-kafka,kafka-python", "--records", "500")
        args.bench, args.rounds, args.quiet = bench, 1, True
        result = run_clients(args, kraft_cluster)
        for client in ("kraft", "confluent-kafka", "kafka-python"):
            (run,) = result["runs"][client]
            assert run["records"] == 500 and run["records_per_s"] > 0
            # Every node's /proc was read (its CPU over 500 records may round to 0 ticks).
            assert set(run["cpu_s"]) == {*kraft_pids(kraft_cluster), "client"}
            assert run["servers_cpu_us_per_record"] >= 0
        assert "kafka-python" in render_clients(result)
    args = _args(
        "--against", "kafka", "--client", "kafka-python", "--records", "500",
        "--rounds", "1", "--warmup-records", "kafka=1500", "--warmup-s", "0",
    )  # fmt: skip
    args.quiet = True
    result = run_against(args, kafka=kafka_peer, kraft=kraft_cluster)
    assert result["clients"] == {"kraft": "kafka-python", "kafka": "kafka-python"}
    assert [r["client"] for r in result["runs"]["kraft"]] == ["kafka-python"]
    assert result["warmup"]["kraft"] == []  # kraft's minimum is 0: no JIT to wait for
    assert [w["records"] for w in result["warmup"]["kafka"]] == [500, 1000, 1500]
    assert result["summary"]["ratio_kraft_to_kafka"] > 0
