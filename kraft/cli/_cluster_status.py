"""The status of a local cluster, for ``kraft cluster up`` (live view) and ``cluster status``:
one JSON-able document built from cluster.json's pids, each node's gRPC health and two
controller RPCs (DescribeQuorum, DescribeCluster), judged by `kraft.cluster.health` (the check
``LocalCluster.wait_until_healthy`` makes), what each node's metrics endpoint says (its
``metrics_url``, read by `kraft.metrics.scrape`; a node without one shows what it showed
before), and its text rendering."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kraft.controller.client import ControllerClient
    from kraft.metrics.scrape import MetricsWatch


def pid_alive(pid: int | None) -> bool:
    """Whether ``pid`` runs (a zombie counts as gone)."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def node_pid(info: dict[str, Any], role: str, node: dict[str, Any]) -> int | None:
    """The pid of a node of a cluster.json: the one recorded there while it runs, else the one
    in the node's pid file (a node restarted by hand: ``kraft broker --config ...``), if that
    one runs."""
    from kraft.cli._node import read_pid_file

    recorded = node.get("pid")
    if pid_alive(recorded):
        return int(recorded) if recorded else None
    directory = Path(info.get("data_dir") or ".") / f"{role}-{node['id']}"
    restarted = read_pid_file(directory)
    if restarted and restarted != recorded and pid_alive(restarted):
        return restarted
    return int(recorded) if recorded else None


def metrics_urls(info: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """``{"broker-101": ("broker", url), ...}`` of the nodes of a cluster.json that have a
    ``metrics_url``."""
    urls = {}
    for role, key in (("controller", "controllers"), ("broker", "brokers")):
        for n in info.get(key, []):
            if n.get("metrics_url"):
                urls[f"{role}-{n['id']}"] = (role, str(n["metrics_url"]))
    return urls


def collect_status(
    info: dict[str, Any],
    client: ControllerClient,
    watch: MetricsWatch | None = None,
    *,
    rate_interval: float = 0.0,
) -> dict[str, Any]:
    """The status document: processes from ``info`` (a cluster.json), their gRPC health, and
    the controllers' view, judged by `kraft.cluster.health.check_cluster_health` (the check
    `LocalCluster.wait_until_healthy` makes); ``problems`` says what is not healthy and
    ``error`` why the controllers did not answer (never raises for that).

    Each node with a ``metrics_url`` is scraped through ``watch`` (a fresh one: no rates);
    its ``metrics`` hold its figures (`kraft.metrics.scrape.node_view`), ``{"error": ...}``
    if it did not answer, None without an endpoint. The messages-in rate is measured against
    the watch's previous scrape, at least ``rate_interval`` seconds before (it waits)."""
    from kraft.cli._exit_cause import gone_cause
    from kraft.cluster.health import EXITED, RUNNING, NodeProcess, check_cluster_health

    logs = Path(info.get("data_dir") or ".") / "logs"
    nodes = []
    current: dict[tuple[str, int], dict[str, Any]] = {}
    for role, key in (("controller", "controllers"), ("broker", "brokers")):
        for n in info.get(key, []):
            pid = node_pid(info, role, n)
            if pid != n.get("pid"):  # the recorded exit was the old process's
                n = {**n, "pid": pid, "restarted_by_hand": True, "exit": None}
            current[(role, n["id"])] = n
            alive = pid_alive(pid)
            log_path = logs / f"{role}-{n['id']}.log"
            nodes.append(
                NodeProcess(
                    role=role,
                    node_id=n["id"],
                    address=n["address"],
                    pid=n.get("pid"),
                    process=RUNNING if alive else EXITED,
                    exit_detail=""
                    if alive
                    else f"(pid {n.get('pid')}) is gone: {n.get('exit') or gone_cause(log_path)}",
                )
            )
    health = check_cluster_health(nodes, client, require_full_isr=True)
    by_id = {(n.role, n.node_id): n for n in health.nodes}
    urls = metrics_urls(info)
    if watch is None:
        from kraft.metrics.scrape import MetricsWatch  # prometheus and grpc: not for --help

        watch = MetricsWatch()
    age = watch.age()
    if urls and age is not None and age < rate_interval:
        time.sleep(rate_interval - age)
    scraped = watch.refresh(urls)

    def node_doc(role: str, recorded: dict[str, Any]) -> dict[str, Any]:
        n = current[(role, recorded["id"])]
        seen = by_id[(role, n["id"])]
        doc = {
            **n,
            "alive": seen.process == RUNNING,
            "serving": seen.serving,
            "metrics": scraped.get(f"{role}-{n['id']}"),
        }
        if role == "controller":
            return {**doc, "role": None if health.error else seen.state, "lag": seen.lag}
        return {**doc, "state": "not registered" if health.error else seen.state}

    controllers = [node_doc("controller", c) for c in info.get("controllers", [])]
    brokers = [node_doc("broker", b) for b in info.get("brokers", [])]
    partitions = health.partitions
    topics: dict[str, list[dict[str, Any]]] = {}
    for p in partitions:
        topics.setdefault(p.topic, []).append(
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "under_replicated": p.under_replicated,
                "offline": p.offline,
            }
        )
    return {
        "data_dir": info.get("data_dir"),
        "bootstrap": info.get("bootstrap"),
        "controller_bootstrap": info.get("controller_bootstrap"),
        "supervisor_pid": info.get("supervisor_pid"),
        "healthy": health.healthy,
        "problems": list(health.problems),
        "error": health.error,
        "quorum": None
        if health.error
        else {
            "leader_id": health.quorum_leader_id,
            "leader_epoch": health.quorum_epoch,
            "high_watermark": health.high_watermark,
        },
        "controllers": controllers,
        "brokers": brokers,
        "metrics": _metrics_summary(controllers, brokers) if urls else None,
        "topics": [{"name": name, "partitions": ps} for name, ps in topics.items()],
        "partition_count": len(partitions),
        "under_replicated_partitions": sum(p.under_replicated for p in partitions),
        "offline_partitions": sum(p.offline for p in partitions),
    }


def _metrics_summary(
    controllers: list[dict[str, Any]], brokers: list[dict[str, Any]]
) -> dict[str, Any]:
    """The cluster's figures from the endpoints: the active controller's (the one that says
    ActiveControllerCount 1), and the brokers' summed over those that answered."""
    active = next((c for c in controllers if (c.get("metrics") or {}).get("active") == 1), None)
    answered = [b["metrics"] for b in brokers if b.get("metrics") and "error" not in b["metrics"]]
    rates = [m["messages_in_per_s"] for m in answered if m["messages_in_per_s"] is not None]

    def total(key: str) -> int | None:
        values = [m[key] for m in answered if m.get(key) is not None]
        return sum(values) if values else None

    figures = active["metrics"] if active else {}
    return {
        "active_controller": active["id"] if active else None,
        "offline_partitions": figures.get("offline_partitions"),
        "fenced_brokers": figures.get("fenced_brokers"),
        "active_brokers": figures.get("active_brokers"),
        "brokers_answered": len(answered),
        "under_replicated_partitions": total("under_replicated"),
        "under_min_isr_partitions": total("under_min_isr"),
        "messages_in_per_s": round(sum(rates), 1) if rates else None,
    }


def stable_view(doc: dict[str, Any]) -> str:
    """The document without what changes all the time (lags, the high watermark, rates)."""
    quorum = doc.get("quorum") or {}

    def still(metrics: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if metrics is None else {**metrics, "messages_in_per_s": None}

    return json.dumps(
        {
            **doc,
            "quorum": {k: v for k, v in quorum.items() if k != "high_watermark"},
            "controllers": [{**c, "lag": None} for c in doc["controllers"]],
            "brokers": [{**b, "metrics": still(b.get("metrics"))} for b in doc["brokers"]],
            "metrics": still(doc.get("metrics")),
        },
        sort_keys=True,
    )


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids) or "-"


def _health_mark(node: dict[str, Any]) -> str:
    """`` [NOT_SERVING]`` or `` [no answer]`` for a running node whose health check failed."""
    serving = node.get("serving")
    return f" [{serving}]" if serving not in (None, "SERVING") else ""


def _figure(value: Any) -> str:
    return "-" if value is None else str(value)


def _controller_metrics_line(metrics: dict[str, Any]) -> str:
    """The active controller's figures, from its endpoint."""
    if metrics["active_controller"] is None:
        return "  metrics: no controller endpoint reports itself active"
    return (
        f"  metrics of active controller {metrics['active_controller']}: offline partitions "
        f"{_figure(metrics['offline_partitions'])}, brokers active "
        f"{_figure(metrics['active_brokers'])}, fenced {_figure(metrics['fenced_brokers'])}"
    )


def _broker_metrics_columns(m: dict[str, Any] | None) -> str:
    """LEADERS, REPLICAS, URP, <MIN-ISR and MSG IN/S of a broker's endpoint."""
    if m is None:
        return "(no metrics endpoint)"
    if "error" in m:
        return f"(metrics: no answer: {m['error'][:60]})"
    rate = m.get("messages_in_per_s")
    return (
        f"{_figure(m['leader_count']):<9}{_figure(m['partition_count']):<10}"
        f"{_figure(m['under_replicated']):<5}{_figure(m['under_min_isr']):<10}"
        f"{'-' if rate is None else f'{rate:,.0f}'}"
    )


def render_status(doc: dict[str, Any], *, max_partitions: int | None = None) -> str:
    """Text for people: quorum, controllers, brokers, partitions (under-replicated marked)."""
    lines: list[str] = []
    state = "UNREACHABLE" if doc["error"] else "healthy" if doc["healthy"] else "DEGRADED"
    lines.append(f"kraft cluster in {doc['data_dir']}: {state}")
    lines.append(f"  bootstrap:            {doc['bootstrap']}")
    lines.append(f"  controller bootstrap: {doc['controller_bootstrap']}")
    lines.append("")
    quorum = doc["quorum"]
    if quorum is None:
        lines.append(f"Quorum: no answer ({doc['error']})")
    else:
        leader = quorum["leader_id"] if quorum["leader_id"] >= 0 else "none"
        lines.append(
            f"Quorum: leader {leader}, epoch {quorum['leader_epoch']}, "
            f"high watermark {quorum['high_watermark']}"
        )
    lines.append(f"  {'CONTROLLER':<11}{'ADDRESS':<22}{'PID':<9}{'ROLE':<14}LAG")
    for c in doc["controllers"]:
        role = c["role"] or ("running" if c["alive"] else "down")
        role += _health_mark(c)
        lag = "-" if c["lag"] is None else str(c["lag"])
        lines.append(f"  {c['id']:<11}{c['address']:<22}{c['pid'] or '-'!s:<9}{role:<14}{lag}")
    metrics = doc.get("metrics")
    if metrics is not None:
        lines.append(_controller_metrics_line(metrics))
    lines.append("")
    header = f"  {'BROKER':<11}{'ADDRESS':<22}{'PID':<9}"
    if metrics is None:
        lines.append(f"{header}STATE")
    else:
        lines.append(
            f"{header}{'STATE':<24}{'LEADERS':<9}{'REPLICAS':<10}{'URP':<5}{'<MIN-ISR':<10}MSG IN/S"
        )
    for b in doc["brokers"]:
        state = b["state"] if doc["quorum"] is not None else ("running" if b["alive"] else "down")
        state += _health_mark(b)
        row = f"  {b['id']:<11}{b['address']:<22}{b['pid'] or '-'!s:<9}"
        if metrics is None:
            lines.append(f"{row}{state}")
        else:
            lines.append(f"{row}{state:<24}{_broker_metrics_columns(b.get('metrics'))}")
    lines.append("")
    summary = (
        f"Topics: {len(doc['topics'])}, partitions: {doc['partition_count']}, "
        f"under-replicated: {doc['under_replicated_partitions']}, "
        f"offline: {doc['offline_partitions']}"
    )
    if metrics is not None and metrics["under_min_isr_partitions"] is not None:
        summary += f", under min ISR: {metrics['under_min_isr_partitions']}"
    if metrics is not None and metrics["messages_in_per_s"] is not None:
        summary += f"; messages in: {metrics['messages_in_per_s']:,.0f}/s"
    lines.append(summary)
    rows = [(t["name"], p) for t in doc["topics"] for p in t["partitions"]]
    if rows:
        width = max(5, *(len(name) for name, _ in rows)) + 2
        lines.append(
            f"  {'TOPIC':<{width}}{'PARTITION':<11}{'LEADER':<8}{'EPOCH':<7}{'REPLICAS':<16}ISR"
        )
        shown = rows if max_partitions is None else rows[:max_partitions]
        for name, p in shown:
            mark = (
                "  offline"
                if p["offline"]
                else "  under-replicated"
                if p["under_replicated"]
                else ""
            )
            leader = p["leader"] if p["leader"] >= 0 else "none"
            lines.append(
                f"  {name:<{width}}{p['partition']:<11}{leader!s:<8}{p['leader_epoch']:<7}"
                f"{_ids(p['replicas']):<16}{_ids(p['isr'])}{mark}"
            )
        if len(shown) < len(rows):
            lines.append(f"  ... {len(rows) - len(shown)} more (kraft topics describe)")
    problems = doc.get("problems") or []
    if problems:
        lines.append("")
        lines.append("Not healthy because:")
        lines.extend(f"  - {problem}" for problem in problems)
    return "\n".join(lines)
