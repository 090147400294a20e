"""``kraft bench idle``: the CPU a `LocalCluster` burns doing nothing.

A cluster at rest should cost next to nothing: idle JVM Kafka brokers sit near 1% of a core
each. Fixed timers (a shell that ticks every 50 ms whatever its cores' deadlines say, a
follower that re-polls an idle leader) show up here and nowhere else.

It starts a cluster (3 controllers and 3 brokers by default), creates one topic (6
partitions, RF 3; ``--partitions 0`` for none), waits until it is healthy and settled, then
reads every node's CPU time (user + system, from ``/proc/PID/stat``) at the start and the end
of ``--seconds`` of doing nothing, and prints CPU seconds per node and in total, and the share
of one core. The same figure before and after a change, on the same machine, is the
comparison: nothing else runs in the window.

The script uses only `LocalCluster`'s stable API, so it can also measure an older tree: copy
this file out of the tree (its folder holds a ``storage.py`` that would shadow the package) and
run ``PYTHONPATH=/path/to/old/tree python /tmp/idle.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (``/proc/PID/stat`` fields 14 and 15)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


def measure(
    *, controllers: int, brokers: int, partitions: int, seconds: float, settle_s: float
) -> dict[str, Any]:
    from kraft.cluster import LocalCluster

    with (
        tempfile.TemporaryDirectory(prefix="kraft-idle-") as data_dir,
        LocalCluster(controllers=controllers, brokers=brokers, data_dir=data_dir) as cluster,
    ):
        cluster.wait_until_healthy(timeout=120)
        if partitions and brokers:
            cluster.create_topic(
                "idle", partitions=partitions, replication_factor=min(3, brokers), timeout=60
            )
        time.sleep(settle_s)  # let start-up work (snapshots, ISR expansion) finish
        pids = cluster.pids()
        before = {pid: cpu_seconds(pid) for pid in pids}
        started = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - started
        used = {pid: cpu_seconds(pid) - before[pid] for pid in pids}
    total = sum(used.values())
    return {
        "controllers": controllers,
        "brokers": brokers,
        "partitions": partitions,
        "seconds": round(elapsed, 2),
        "cpu_seconds_total": round(total, 3),
        "share_of_one_core": round(total / elapsed, 4),
        "cpu_seconds_per_node": [round(v, 3) for v in used.values()],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kraft bench idle",
        description="CPU used by an idle LocalCluster (all nodes, /proc CPU time).",
        epilog="example: kraft bench idle --seconds 60 --json",
    )
    parser.add_argument("--controllers", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6, help="of one RF-3 topic (0: none)")
    parser.add_argument("--seconds", type=float, default=60.0, help="the idle window")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before the window")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if min(args.controllers, args.seconds) <= 0 or min(args.brokers, args.partitions) < 0:
        parser.error("counts and --seconds must be positive (--brokers/--partitions >= 0)")
    result = measure(
        controllers=args.controllers,
        brokers=args.brokers,
        partitions=args.partitions,
        seconds=args.seconds,
        settle_s=args.settle,
    )
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"idle {args.controllers}+{args.brokers} cluster, {args.partitions} partitions, "
            f"{result['seconds']:.0f} s: {result['cpu_seconds_total']:.2f} CPU-s "
            f"({100 * result['share_of_one_core']:.1f}% of one core); per node: "
            + ", ".join(f"{v:.2f}" for v in result["cpu_seconds_per_node"])
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
