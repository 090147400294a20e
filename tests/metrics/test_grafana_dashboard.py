"""The Grafana dashboard shipped in docs/grafana/ uses only metric names a node exports, and
covers what issue 17 asks to watch: the dashboard cannot drift from the code."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kraft.metrics import RequestMetrics, registry
from kraft.metrics.kafka import BROKER_GAUGES, CONTROLLER_GAUGES, GROUP_GAUGES, RAFT_GAUGES
from kraft.metrics.raft import RaftLatency
from replication.broker.replicas.replica_metrics import ReplicaMetrics

DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana" / "kraft-dashboard.json"
_NAME = re.compile(r"\b(kafka_[a-z0-9_]+)\b")
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gauge": ("",),
}


def exported_names() -> set[str]:
    """Every sample name a controller or broker can serve: the state gauges' specs, and the
    counters and histograms of the process registry once the code that makes them ran."""
    names = {spec.name for specs in (BROKER_GAUGES, CONTROLLER_GAUGES) for spec in specs}
    names |= {spec.name for specs in (GROUP_GAUGES, RAFT_GAUGES) for spec in specs}
    RequestMetrics()  # the counter and histogram of every server
    RaftLatency()  # the Raft histograms
    ReplicaMetrics("t")  # ISR and messages/bytes in counters
    for family in registry().collect():
        names |= {family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",))}
    return names


def queries(node: Any) -> Iterator[str]:
    """Every PromQL string of the dashboard: panel targets and template variables."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "query", "definition") and isinstance(value, str):
                yield value
            else:
                yield from queries(value)
    elif isinstance(node, list):
        for item in node:
            yield from queries(item)


def test_every_metric_the_dashboard_uses_is_one_a_node_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    used = {name for query in queries(dashboard) for name in _NAME.findall(query)}
    assert used, "no metric found in the dashboard"
    unknown = used - exported_names()
    assert not unknown, f"the dashboard uses metrics no node exports: {sorted(unknown)}"


def test_the_dashboard_has_a_panel_for_each_thing_to_watch() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    text = "\n".join(queries(dashboard))
    for needed in (
        "kafka_server_replicamanager_underreplicatedpartitions",
        "kafka_server_replicamanager_underminisrpartitioncount",
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        "kafka_controller_kafkacontroller_activecontrollercount",
        "kafka_controller_kafkacontroller_fencedbrokercount",
        "kafka_server_replicamanager_leadercount",
        "kafka_server_replicamanager_isrshrinks_total",
        "kafka_server_replicamanager_isrexpands_total",
        "kafka_server_brokertopicmetrics_messagesin_total",
        "kafka_server_brokertopicmetrics_bytesin_total",
        "kafka_network_requestmetrics_requests_total",
        "histogram_quantile(0.99, sum by (request, le) "
        "(rate(kafka_network_requestmetrics_totaltime_seconds_bucket",
        "kafka_server_raftmetrics_commit_latency_seconds_bucket",
        "kafka_server_raftmetrics_election_latency_seconds_bucket",
        "kafka_consumergroup_lag",
    ):
        assert needed in text, needed
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert dashboard["__inputs"][0]["pluginId"] == "prometheus"
