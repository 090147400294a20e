"""``kraft cluster prometheus-config``: a Prometheus scrape config for the metrics endpoints a
``kraft cluster up`` cluster lists in its cluster.json (one target per node, labelled with its
role and node id), to paste under ``scrape_configs`` or run as is with
``prometheus --config.file=...``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

_EPILOG = """\
example:
  kraft cluster prometheus-config --data-dir /tmp/kraft > prometheus.yml
  prometheus --config.file=prometheus.yml

Then import docs/grafana/kraft-dashboard.json into Grafana (docs/operations.md, "Metrics").
The endpoints' ports are free ones chosen at each `kraft cluster up` unless --base-port was
given (then the ports after the nodes' own): run this again after a restart without it.
"""


def add_parser(csub: Any, data_dir_argument: Callable[[argparse.ArgumentParser], None]) -> None:
    p = csub.add_parser(
        "prometheus-config",
        help="print a Prometheus scrape config for the cluster's metrics endpoints",
        description="Print a Prometheus config scraping every node of the cluster in --data-dir.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    data_dir_argument(p)
    p.add_argument("--job", default="kraft", help="the job name (default kraft)")
    p.add_argument(
        "--scrape-interval", default="15s", help="Prometheus's scrape_interval (default 15s)"
    )
    p.set_defaults(handler=prometheus_config)


def scrape_config(info: dict[str, Any], job: str = "kraft", interval: str = "15s") -> str:
    """The YAML of a Prometheus config with one ``scrape_configs`` job over every node of a
    cluster.json that has a ``metrics_url``.

    Raises:
        ValueError: no node has one (the cluster was started with --no-metrics).
    """
    targets = []
    for role, key in (("controller", "controllers"), ("broker", "brokers")):
        for node in info.get(key, []):
            url = node.get("metrics_url")
            if url:
                targets.append((role, int(node["id"]), urlsplit(url)))
    if not targets:
        raise ValueError(
            "no metrics endpoint in cluster.json (started with --no-metrics?): "
            "start the cluster without --no-metrics"
        )
    paths = {t[2].path or "/metrics" for t in targets}
    lines = [
        f"# Prometheus scrape config for the kraft cluster in {info.get('data_dir')}",
        "# (kraft cluster prometheus-config; from its cluster.json)",
        "global:",
        f"  scrape_interval: {interval}",
        "scrape_configs:",
        f"  - job_name: {json.dumps(job)}",
        f"    metrics_path: {json.dumps(paths.pop() if len(paths) == 1 else '/metrics')}",
        "    static_configs:",
    ]
    for role, node_id, url in targets:
        lines.append(f"      - targets: [{json.dumps(url.netloc)}]")
        lines.append(f'        labels: {{role: {role}, node_id: "{node_id}"}}')
    return "\n".join(lines) + "\n"


def prometheus_config(args: argparse.Namespace) -> int:
    from kraft.cli.cluster import _read_info

    info = _read_info(Path(args.data_dir).resolve())
    print(scrape_config(info, args.job, args.scrape_interval), end="")
    return 0


__all__ = ["add_parser", "prometheus_config", "scrape_config"]
