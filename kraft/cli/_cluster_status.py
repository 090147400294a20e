"""The status of a local cluster, for ``kraft cluster up`` (live view) and ``cluster status``:
one JSON-able document built from cluster.json's pids, each node's gRPC health and two
controller RPCs (DescribeQuorum, DescribeCluster), judged by `kraft.cluster.health` (the check
``LocalCluster.wait_until_healthy`` makes), and its text rendering."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kraft.controller.client import ControllerClient


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


def collect_status(info: dict[str, Any], client: ControllerClient) -> dict[str, Any]:
    """The status document: processes from ``info`` (a cluster.json), their gRPC health, and
    the controllers' view, judged by `kraft.cluster.health.check_cluster_health` (the check
    `LocalCluster.wait_until_healthy` makes); ``problems`` says what is not healthy and
    ``error`` why the controllers did not answer (never raises for that)."""
    from kraft.cluster.health import EXITED, RUNNING, NodeProcess, check_cluster_health
    from kraft.cluster.process import last_log_line

    logs = Path(info.get("data_dir") or ".") / "logs"
    nodes = []
    current: dict[tuple[str, int], dict[str, Any]] = {}
    for role, key in (("controller", "controllers"), ("broker", "brokers")):
        for n in info.get(key, []):
            pid = node_pid(info, role, n)
            if pid != n.get("pid"):
                n = {**n, "pid": pid, "restarted_by_hand": True}
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
                    else f"(pid {n.get('pid')}) is gone: {last_log_line(log_path)}",
                )
            )
    health = check_cluster_health(nodes, client, require_full_isr=True)
    by_id = {(n.role, n.node_id): n for n in health.nodes}

    def node_doc(role: str, recorded: dict[str, Any]) -> dict[str, Any]:
        n = current[(role, recorded["id"])]
        seen = by_id[(role, n["id"])]
        doc = {**n, "alive": seen.process == RUNNING, "serving": seen.serving}
        if role == "controller":
            return {**doc, "role": None if health.error else seen.state, "lag": seen.lag}
        return {**doc, "state": "not registered" if health.error else seen.state}

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
        "controllers": [node_doc("controller", c) for c in info.get("controllers", [])],
        "brokers": [node_doc("broker", b) for b in info.get("brokers", [])],
        "topics": [{"name": name, "partitions": ps} for name, ps in topics.items()],
        "partition_count": len(partitions),
        "under_replicated_partitions": sum(p.under_replicated for p in partitions),
        "offline_partitions": sum(p.offline for p in partitions),
    }


def stable_view(doc: dict[str, Any]) -> str:
    """The document without what changes all the time (lags, the high watermark)."""
    quorum = doc.get("quorum") or {}
    return json.dumps(
        {
            **doc,
            "quorum": {k: v for k, v in quorum.items() if k != "high_watermark"},
            "controllers": [{**c, "lag": None} for c in doc["controllers"]],
        },
        sort_keys=True,
    )


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids) or "-"


def _health_mark(node: dict[str, Any]) -> str:
    """`` [NOT_SERVING]`` or `` [no answer]`` for a running node whose health check failed."""
    serving = node.get("serving")
    return f" [{serving}]" if serving not in (None, "SERVING") else ""


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
    lines.append("")
    lines.append(f"  {'BROKER':<11}{'ADDRESS':<22}{'PID':<9}STATE")
    for b in doc["brokers"]:
        state = b["state"] if doc["quorum"] is not None else ("running" if b["alive"] else "down")
        state += _health_mark(b)
        lines.append(f"  {b['id']:<11}{b['address']:<22}{b['pid'] or '-'!s:<9}{state}")
    lines.append("")
    lines.append(
        f"Topics: {len(doc['topics'])}, partitions: {doc['partition_count']}, "
        f"under-replicated: {doc['under_replicated_partitions']}, "
        f"offline: {doc['offline_partitions']}"
    )
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
