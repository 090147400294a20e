"""``kraft bench produce|consume --tls``: the cost of mTLS on every connection, against
plaintext in the same run (issue 17's target: at least 0.8x plaintext throughput).

Two local clusters of 3 controllers and 3 brokers run side by side, one plaintext and one with
``LocalCluster(tls=True)`` (every node-to-node and client connection mTLS). The runs alternate
(plaintext, TLS, plaintext, TLS, ...: ``--rounds`` of each), so a change of the machine's load
shifts both alike; the figures are the median and the best of each, and their ratios, and the
CPU time a record costs the client and the three brokers (steadier on a loaded machine than
records/s, which measure how much of the cores a run got). Produce
is acks=all (idempotent) with the bench's defaults; consume reads back a topic filled (untimed)
on each cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from typing import Any

from kraft.bench import BenchError
from kraft.bench.ab import alternate, summarize
from kraft.bench.produce_consume import (
    PARTITIONS,
    REPLICATION_FACTOR,
    consume,
    ensure_topic,
    produce,
)

TARGET_RATIO = 0.8
"""mTLS throughput / plaintext throughput that issue 17 asks for, at least."""


def _one(
    args: argparse.Namespace, bootstrap: str, topic: str, security: dict[str, str]
) -> dict[str, Any]:
    if args.bench == "produce":
        return produce(
            bootstrap,
            topic,
            args.records,
            args.record_size,
            "all",
            args.window,
            args.linger_ms,
            args.batch_size,
            security=security,
        )
    return consume(bootstrap, topic, args.records, args.max_poll_records, security=security)


def run_tls(args: argparse.Namespace) -> dict[str, Any]:
    from kraft import LocalCluster

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    result: dict[str, Any] = {
        "bench": f"{args.bench} --tls",
        "records": args.records,
        "record_size": args.record_size,
        "rounds": args.rounds,
        "partitions": PARTITIONS,
        "replication_factor": REPLICATION_FACTOR,
        "load_average": {"before": [round(x, 2) for x in os.getloadavg()]},
    }
    say("starting two local clusters (3 controllers, 3 brokers each): plaintext and mTLS")
    with LocalCluster(3, 3) as plain, LocalCluster(3, 3, tls=True) as tls:
        plain.wait_until_healthy(timeout=90)
        tls.wait_until_healthy(timeout=90)
        clusters = {"plaintext": (plain, {}), "tls": (tls, tls.client_security)}
        topics: dict[str, str] = {}
        for name, (cluster, security) in clusters.items():
            topic = topics[name] = f"bench-{uuid.uuid4().hex[:8]}"
            ensure_topic(cluster.bootstrap, topic, say, security=security)
            if args.bench == "consume":
                say(f"{name}: filling {topic} with {args.records} records (acks=all, not timed)")
                produce(
                    cluster.bootstrap,
                    topic,
                    args.records,
                    args.record_size,
                    "all",
                    20_000,
                    5,
                    security=security,
                )
        runs = alternate(
            {name: cluster for name, (cluster, _) in clusters.items()},
            args.rounds,
            lambda name, cluster: _one(args, cluster.bootstrap, topics[name], clusters[name][1]),
            args.records,
            say,
        )
    result["load_average"]["after"] = [round(x, 2) for x in os.getloadavg()]
    result["runs"] = runs
    result["summary"] = summarize(runs, "plaintext", "tls", TARGET_RATIO)
    return result


def render(result: dict[str, Any]) -> str:
    s = result["summary"]
    lines = [
        f"kraft bench {result['bench']}: {result['records']} records of "
        f"{result['record_size']} B, {PARTITIONS} partitions, RF={REPLICATION_FACTOR}, "
        f"{result['rounds']} alternated runs of each",
        f"load average before: {result['load_average']['before']}, "
        f"after: {result['load_average']['after']}",
        "",
        f"{'cluster':<12}{'median records/s':>18}{'best records/s':>16}{'median p50 ms':>15}"
        f"{'client µs/rec':>15}{'brokers µs/rec':>16}",
    ]
    for name in ("plaintext", "tls"):
        row = s[name]
        lines.append(
            f"{name:<12}{row['median_records_per_s']:>18,.0f}{row['best_records_per_s']:>16,.0f}"
            f"{row['median_p50_ms']:>15.2f}{row['median_client_cpu_us_per_record']:>15.1f}"
            f"{row['median_brokers_cpu_us_per_record']:>16.1f}"
        )
    verdict = "met" if s["target_met"] else "MISSED"
    lines.append(
        f"mTLS / plaintext: {s['ratio_median']:.2f}x (median), {s['ratio_best']:.2f}x (best); "
        f"target >= {TARGET_RATIO}x: {verdict}"
    )
    lines.append(
        "  (µs/rec: CPU time per record during a run, medians: the client process, and the three"
        " brokers together)"
    )
    return "\n".join(lines)


def main_tls(args: argparse.Namespace) -> int:
    from storage.errors import KraftError

    if args.bench not in ("produce", "consume"):
        print("kraft bench: --tls is for produce and consume", file=sys.stderr)
        return 2
    if args.bootstrap:
        print(
            f"kraft bench {args.bench} --tls starts its own clusters: no --bootstrap",
            file=sys.stderr,
        )
        return 2
    try:
        result = run_tls(args)
    except (BenchError, KraftError, TimeoutError) as e:
        print(f"kraft bench {args.bench} --tls: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


__all__ = ["TARGET_RATIO", "main_tls", "run_tls"]
