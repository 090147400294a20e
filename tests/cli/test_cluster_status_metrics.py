"""``kraft cluster status`` and the live view read each node's metrics endpoint (cluster.json's
``metrics_url``): per broker its partition figures and messages-in rate, the active
controller's offline partitions and brokers; a node without an endpoint shows what it showed
before. Over canned exposition texts and a stub controller client (no cluster)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kraft.cli._cluster_status import collect_status, render_status, stable_view
from kraft.cli.cluster import _supervisor_argv
from kraft.cli.cluster_prometheus import scrape_config
from kraft.metrics.scrape import MetricsWatch
from tests.controller_process.test_cluster_health import cluster_view
from tests.metrics.test_scrape import ACTIVE_CONTROLLER_TEXT, BROKER_TEXT, canned_endpoint


def _info(tmp_path: Path, controller_url: str | None, broker_url: str | None) -> dict[str, object]:
    return {
        "data_dir": str(tmp_path),
        "controllers": [{"id": 1, "address": "c1", "pid": None, "metrics_url": controller_url}],
        "brokers": [
            {"id": 101, "address": "b1", "pid": None, "metrics_url": broker_url},
            {"id": 102, "address": "b2", "pid": None},
        ],
    }


def test_status_shows_what_the_endpoints_say_and_the_messages_in_rate(tmp_path: Path) -> None:
    with (
        canned_endpoint(ACTIVE_CONTROLLER_TEXT) as (controller_url, _),
        canned_endpoint(BROKER_TEXT) as (broker_url, page),
    ):
        info = _info(tmp_path, controller_url, broker_url)
        watch = MetricsWatch()
        first = collect_status(info, cluster_view(), watch)  # type: ignore[arg-type]
        page["text"] = BROKER_TEXT.replace("} 1500.0", "} 2500.0")
        doc = collect_status(info, cluster_view(), watch, rate_interval=0.05)  # type: ignore[arg-type]
    assert first["metrics"]["messages_in_per_s"] is None  # one scrape: no rate yet
    summary = doc["metrics"]
    assert summary["active_controller"] == 1
    assert (summary["offline_partitions"], summary["fenced_brokers"]) == (3, 1)
    assert summary["active_brokers"] == 2
    assert summary["under_replicated_partitions"] == 2
    assert summary["under_min_isr_partitions"] == 1
    assert summary["messages_in_per_s"] > 0
    b101, b102 = doc["brokers"]
    assert b101["metrics"]["leader_count"] == 4 and b101["metrics"]["partition_count"] == 12
    assert b102["metrics"] is None
    text = render_status(doc)
    assert (
        "metrics of active controller 1: offline partitions 3, brokers active 2, fenced 1" in text
    )
    assert "LEADERS" in text and "(no metrics endpoint)" in text
    assert "under min ISR: 1" in text and "messages in:" in text
    row = next(line for line in text.splitlines() if line.startswith("  101 "))
    assert row.split()[-5:-1] == ["4", "12", "2", "1"]
    # The non-tty live view prints again only on a change that is not a rate.
    assert stable_view(first) == stable_view(doc)


def test_a_node_whose_endpoint_does_not_answer_is_named_and_the_others_still_shown(
    tmp_path: Path,
) -> None:
    with canned_endpoint(ACTIVE_CONTROLLER_TEXT) as (controller_url, _):
        # NB: port 1 on loopback: nothing listens, the connection is refused at once.
        info = _info(tmp_path, controller_url, "http://127.0.0.1:1/metrics")
        doc = collect_status(info, cluster_view())  # type: ignore[arg-type]
    assert "error" in doc["brokers"][0]["metrics"]
    assert doc["metrics"]["active_controller"] == 1
    assert doc["metrics"]["under_replicated_partitions"] is None
    assert "(metrics: no answer:" in render_status(doc)


def test_without_endpoints_the_status_is_todays(tmp_path: Path) -> None:
    doc = collect_status(_info(tmp_path, None, None), cluster_view())  # type: ignore[arg-type]
    assert doc["metrics"] is None
    assert all(n["metrics"] is None for n in [*doc["controllers"], *doc["brokers"]])
    text = render_status(doc)
    assert "LEADERS" not in text and "metrics" not in text
    assert "  BROKER     ADDRESS               PID      STATE" in text


def test_prometheus_config_targets_each_endpoint_and_refuses_a_cluster_without_any(
    tmp_path: Path,
) -> None:
    info = _info(tmp_path, "http://127.0.0.1:9001/metrics", "http://127.0.0.1:9002/metrics")
    config = scrape_config(info, job="lab", interval="5s")
    assert "  scrape_interval: 5s" in config and '  - job_name: "lab"' in config
    assert '      - targets: ["127.0.0.1:9001"]' in config
    assert '        labels: {role: broker, node_id: "101"}' in config
    assert "102" not in config  # no endpoint, no target
    with pytest.raises(ValueError, match="--no-metrics"):
        scrape_config(_info(tmp_path, None, None))


def test_up_no_metrics_reaches_the_detached_supervisor() -> None:
    args = argparse.Namespace(
        controllers=1,
        brokers=1,
        wait_timeout=5.0,
        node_log_level="info",
        base_port=None,
        tls=False,
        metrics=False,
        broker_config=[],
        controller_config=[],
    )
    assert "--no-metrics" in _supervisor_argv(args, Path("/tmp/x"))
    args.metrics = True
    assert "--no-metrics" not in _supervisor_argv(args, Path("/tmp/x"))
