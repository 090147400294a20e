"""`kraft bench produce` and `kraft bench consume` run end to end on a tiny N and print the
JSON they promise.

No timing assertions: the figures depend on the machine; this checks the plumbing (a real
3-controller 3-broker cluster, a 6-partition RF=3 topic, every record acknowledged or
consumed, the gRPC ceiling measured in the same run) and the report's shape.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kraft.bench.e2e_trace import STEPS

RECORDS = 2000
FIGURES = ("records_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms")


def _bench(*argv: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "kraft.cli", "bench", *argv, "--json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=55,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _check_common(report: dict[str, Any]) -> None:
    assert report["records"] == RECORDS
    assert report["partitions"] == 6 and report["replication_factor"] == 3
    for key in FIGURES:
        assert report[key] is not None and report[key] > 0, key
    assert report["p50_ms"] <= report["p99_ms"] <= report["p999_ms"]
    ceiling = report["grpc_ceiling"]
    assert ceiling["mb_per_s"] > 0 and ceiling["message_bytes"] == 16 * 1024
    assert ceiling["bytes"] == ceiling["messages"] * ceiling["message_bytes"]
    assert report["ceiling_mb_per_s"] == ceiling["mb_per_s"]
    assert len(report["load_average"]["before"]) == 3


@pytest.mark.process
@pytest.mark.timeout(40)
def test_bench_produce_runs_acks_all_and_1() -> None:
    report = _bench("produce", "--records", str(RECORDS), "--record-size", "100")
    _check_common(report)
    assert report["bench"] == "produce" and report["record_size"] == 100
    assert set(report["runs"]) == {"produce acks=all", "produce acks=1"}
    for run in report["runs"].values():
        assert run["records"] == RECORDS
        for key in FIGURES:
            assert run[key] > 0, key
    assert report["records_per_s"] == report["runs"]["produce acks=all"]["records_per_s"]


@pytest.mark.long
@pytest.mark.process
@pytest.mark.timeout(40)
def test_bench_consume_reads_every_record_with_poll_and_poll_batch() -> None:
    report = _bench("consume", "--records", str(RECORDS), "--batch")
    _check_common(report)
    assert report["bench"] == "consume"
    assert set(report["runs"]) == {"consume", "consume poll_batch"}
    for run in report["runs"].values():
        assert run["records"] >= RECORDS
        assert run["value_bytes"] == run["records"] * 100
        assert run["polls"] >= 1


def test_bench_produce_consume_help_names_the_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kraft.bench.produce_consume import main_produce

    with pytest.raises(SystemExit) as exc:
        main_produce(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for option in ("--bootstrap", "--topic", "--records", "--record-size", "--acks", "--json"):
        assert option in out


@pytest.mark.long
@pytest.mark.process
@pytest.mark.timeout(40)
def test_bench_produce_with_send_batch_acknowledges_every_record() -> None:
    report = _bench("produce", "--records", str(RECORDS), "--acks", "all", "--send-batch", "500")
    run = report["runs"]["produce acks=all"]
    assert run["api"] == "send_batch(500)" and run["records"] == RECORDS
    assert run["p50_ms"] <= run["p99_ms"]


@pytest.mark.long
@pytest.mark.process
@pytest.mark.timeout(40)
def test_bench_e2e_reads_back_every_record_and_reports_latency_beside_grpc(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "trace"
    argv = ["e2e", "--rate", "500", "--seconds", "1", "--json", "--quiet", "--trace", str(trace)]
    result = subprocess.run(
        [sys.executable, "-m", "kraft.cli", "bench", *argv],
        capture_output=True,
        text=True,
        timeout=35,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    e2e, rt = report["e2e"], report["grpc_round_trip"]
    assert e2e["records"] == 500 and e2e["rate_target"] == 500
    assert 0 < e2e["p50_ms"] <= e2e["p99_ms"] <= e2e["p999_ms"]
    assert 0 < rt["p50_ms"] <= rt["p99_ms"]
    # --trace: every step of a record's way was found in the brokers' and consumer's traces
    assert list(e2e["steps"]) == list(STEPS)
    assert all(step["p50_ms"] >= 0 for step in e2e["steps"].values()), e2e["steps"]
    assert len(list(trace.glob("broker-*.log"))) == 3


@pytest.mark.long
@pytest.mark.process
@pytest.mark.timeout(60)
def test_bench_produce_puts_a_quorum_topic_beside_the_isr_one() -> None:
    """``--replication-mode quorum``: the same runs on an ISR and a quorum topic in one run,
    with one-at-a-time acks=all latency and the quorum/ISR ratios (issue #12)."""
    report = _bench(
        "produce", "--records", str(RECORDS), "--replication-mode", "quorum",
        "--one-at-a-time", "20", "--acks", "all",
    )  # fmt: skip
    assert report["replication_mode"] == "quorum"
    assert set(report["runs"]) == {
        "isr acks=all", "quorum acks=all", "isr 1-at-a-time", "quorum 1-at-a-time",
        "quorum-wc 1-at-a-time",
    }  # fmt: skip
    for run in report["runs"].values():
        assert run["records_per_s"] > 0 and run["p50_ms"] > 0
    assert report["runs"]["quorum acks=all"]["records"] == RECORDS
    comparison = report["comparison"]
    assert comparison["throughput_ratio_acks_all"] > 0
    assert set(comparison["one_at_a_time_p50_ms"]) == {"isr", "quorum", "quorum_write_caching"}
