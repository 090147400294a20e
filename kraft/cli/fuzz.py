"""``kraft fuzz``: hostile requests to every RPC of a local cluster's running processes, and
hostile input to its brokers' Kafka listeners."""

from __future__ import annotations

import argparse
import json
from typing import Any

from kraft.arguments import positive_int


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "fuzz",
        help="send malformed and adversarial requests to every RPC of a local cluster",
        description=(
            "Start a LocalCluster, write acknowledged records, then send every RPC of the "
            "broker, controller and Raft services malformed and adversarial payloads (random "
            "field values, extremes, broken record batches, bytes that are not the message, "
            "truncated messages, abandoned streams); and send the brokers' Kafka listeners "
            "requests of every served API and version with random fields, broken frames, "
            "thousands of connections and a client that never reads. Exit 1 if a call raised in "
            "its handler (status UNKNOWN, or a Kafka connection closed on a well-formed "
            "request), hung, a node died or stopped serving, or the acknowledged records "
            "changed."
        ),
        epilog="example: kraft fuzz --calls 10000 --seed 1 --json; kraft fuzz --target kafka",
    )
    p.add_argument("--calls", type=positive_int, default=1000, help="calls per RPC (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="the payloads' seed (default 0)")
    p.add_argument(
        "--concurrency",
        type=positive_int,
        default=None,
        help="calls in flight at once (default: replication.nemesis.fuzz.DEFAULT_CONCURRENCY)",
    )
    p.add_argument("--brokers", type=positive_int, default=3, help="brokers (default 3)")
    p.add_argument(
        "--rpc",
        action="append",
        default=None,
        metavar="NAME",
        help="only this RPC (Service.Method or Method; repeatable)",
    )
    p.add_argument("--oversized", action="store_true", help="also one 100 MiB request per RPC")
    p.add_argument(
        "--target",
        choices=("all", "grpc", "kafka"),
        default="all",
        help="the gRPC ports, the Kafka listeners, or both, one after the other (default all)",
    )
    p.add_argument(
        "--connections",
        type=positive_int,
        default=None,
        help="Kafka target: connections open at once (default "
        "replication.nemesis.kafka_fuzz.DEFAULT_MAX_CONNECTIONS, within the open-file limit)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kraft.cluster.local import LocalCluster

    progress = (lambda _: None) if args.json else (lambda line: print(line, flush=True))
    reports: dict[str, Any] = {}
    valid = True
    with LocalCluster(controllers=3, brokers=args.brokers) as cluster:
        cluster.wait_until_healthy(timeout=60)
        if args.target in ("all", "grpc"):
            ok, reports["grpc"] = _run_grpc(cluster, args, progress)
            valid = valid and ok
        if args.target in ("all", "kafka"):
            ok, reports["kafka"] = _run_kafka(cluster, args, progress)
            valid = valid and ok
    if args.json:
        out = next(iter(reports.values())) if len(reports) == 1 else {"valid": valid, **reports}
        print(json.dumps(out, indent=2))
    return 0 if valid else 1


def _run_kafka(
    cluster: Any, args: argparse.Namespace, progress: Any
) -> tuple[bool, dict[str, Any]]:
    from replication.nemesis.fuzz import DEFAULT_CONCURRENCY
    from replication.nemesis.kafka_fuzz import DEFAULT_MAX_CONNECTIONS, fuzz_kafka

    report = fuzz_kafka(
        cluster,
        calls_per_api=args.calls,
        seed=args.seed,
        concurrency=min(args.concurrency or DEFAULT_CONCURRENCY, 32),
        max_connections=args.connections or DEFAULT_MAX_CONNECTIONS,
        progress=progress,
    )
    if not args.json:
        print(
            f"\nKafka listeners: {report.calls:,} requests and frames to "
            f"{len(report.per_api)} APIs in {report.seconds:.0f}s; closed on a well-formed "
            f"request, hangs and bad responses: {report.violations}; crashed: "
            f"{report.crashed or 0}; not serving after a phase: "
            f"{ {k: v for k, v in report.serving_problems.items() if v} or 0 }; broker log "
            f"lines: {report.log_lines}\n"
            f"{'VALID' if report.valid else 'INVALID'} (seed {report.seed})"
        )
        for name, outcome in sorted({**report.per_api, **report.per_mutation}.items()):
            for example in outcome.examples:
                print(f"  {name}: {example}")
    return report.valid, report.as_dict()


def _run_grpc(cluster: Any, args: argparse.Namespace, progress: Any) -> tuple[bool, dict[str, Any]]:
    from replication.nemesis.fuzz import DEFAULT_CONCURRENCY, fuzz_cluster

    report = fuzz_cluster(
        cluster,
        calls_per_rpc=args.calls,
        seed=args.seed,
        concurrency=args.concurrency or DEFAULT_CONCURRENCY,
        oversized=args.oversized,
        methods=args.rpc,
        progress=progress,
    )
    if not args.json:
        violations = sum(o.violations for o in report.per_rpc.values())
        suspects = (
            f" (one of {len(report.crash_suspects)} calls: {', '.join(report.crash_suspects)})"
            if report.crash_suspects
            else ""
        )
        print(
            f"\n{report.calls:,} calls to {len(report.per_rpc)} RPCs in {report.seconds:.0f}s; "
            f"handler errors and hangs: {violations}; crashed: {report.crashed or 0}"
            f"{suspects}; "
            f"unhealthy: {report.unhealthy or 0}; acknowledged data intact: "
            f"{report.data_intact} {report.data_problem}\n"
            f"{'VALID' if report.valid else 'INVALID'} (seed {report.seed})"
        )
        for name, outcome in sorted(report.per_rpc.items()):
            for example in outcome.examples:
                print(f"  {name}: {example}")
    return report.valid, report.as_dict()
