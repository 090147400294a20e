"""The status of a local cluster, for ``kraft cluster up`` (live view) and ``cluster status``:
one JSON-able document built from cluster.json's pids and two controller RPCs (DescribeQuorum,
DescribeCluster), and its text rendering."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kraft.controller.client import ControllerClient

_RECENT_FETCH_MS = 2000
"""A voter that fetched within this long follows the leader (as `LocalCluster` judges it)."""


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


def collect_status(info: dict[str, Any], client: ControllerClient) -> dict[str, Any]:
    """The status document: processes from ``info`` (a cluster.json), the rest from the
    active controller; ``error`` says why the controllers did not answer (never raises for
    that)."""
    from storage.errors import KraftError

    now_ms = time.time_ns() // 1_000_000
    doc: dict[str, Any] = {
        "data_dir": info.get("data_dir"),
        "bootstrap": info.get("bootstrap"),
        "controller_bootstrap": info.get("controller_bootstrap"),
        "supervisor_pid": info.get("supervisor_pid"),
        "healthy": False,
        "error": None,
        "quorum": None,
        "controllers": [
            {**c, "alive": pid_alive(c.get("pid")), "role": None, "lag": None}
            for c in info.get("controllers", [])
        ],
        "brokers": [
            {**b, "alive": pid_alive(b.get("pid")), "state": "not registered"}
            for b in info.get("brokers", [])
        ],
        "topics": [],
        "partition_count": 0,
        "under_replicated_partitions": 0,
        "offline_partitions": 0,
    }
    try:
        quorum = client.describe_quorum()
        cluster = client.describe_cluster()
    except KraftError as e:
        doc["error"] = e.message
        return doc
    doc["quorum"] = {
        "leader_id": quorum.leader_id,
        "leader_epoch": quorum.leader_epoch,
        "high_watermark": quorum.high_watermark,
    }
    voters = {v.replica_id: v for v in quorum.voters}
    for c in doc["controllers"]:
        voter = voters.get(c["id"])
        if not c["alive"]:
            c["role"] = "down"
        elif c["id"] == quorum.leader_id:
            c["role"] = "leader"
        elif voter is not None and voter.last_fetch_timestamp_ms >= now_ms - _RECENT_FETCH_MS:
            c["role"] = "follower"
        else:
            c["role"] = "not fetching"
        c["lag"] = voter.lag if voter is not None else None
    registered = {b.broker_id: b for b in cluster.brokers}
    for b in doc["brokers"]:
        registration = registered.get(b["id"])
        if not b["alive"]:
            b["state"] = (
                "down" if registration is None or registration.fenced else "down (unfenced)"
            )
        elif registration is not None:
            b["state"] = (
                "fenced"
                if registration.fenced
                else "controlled shutdown"
                if registration.in_controlled_shutdown
                else "unfenced"
            )
    for topic in sorted(cluster.topics, key=lambda t: t.name):
        partitions = []
        for p in sorted(topic.partitions, key=lambda p: p.partition):
            under = len(p.isr) < len(p.replicas)
            offline = p.leader < 0
            doc["partition_count"] += 1
            doc["under_replicated_partitions"] += under
            doc["offline_partitions"] += offline
            partitions.append(
                {
                    "partition": p.partition,
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replicas": list(p.replicas),
                    "isr": list(p.isr),
                    "under_replicated": under,
                    "offline": offline,
                }
            )
        doc["topics"].append({"name": topic.name, "partitions": partitions})
    doc["healthy"] = (
        quorum.leader_id >= 0
        and all(c["role"] in ("leader", "follower") for c in doc["controllers"])
        and all(b["state"] == "unfenced" for b in doc["brokers"])
        and doc["under_replicated_partitions"] == 0
        and doc["offline_partitions"] == 0
    )
    return doc


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
        lag = "-" if c["lag"] is None else str(c["lag"])
        lines.append(f"  {c['id']:<11}{c['address']:<22}{c['pid'] or '-'!s:<9}{role:<14}{lag}")
    lines.append("")
    lines.append(f"  {'BROKER':<11}{'ADDRESS':<22}{'PID':<9}STATE")
    for b in doc["brokers"]:
        state = b["state"] if doc["quorum"] is not None else ("running" if b["alive"] else "down")
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
    return "\n".join(lines)
