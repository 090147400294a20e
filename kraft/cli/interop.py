"""``kraft interop diff``: the same requests to kraft and to Apache Kafka, answers compared."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from typing import Any

_EPILOG = """\
examples:
  kraft interop diff
  kraft interop diff --json > diff.json
  kraft interop diff --kraft-bootstrap 127.0.0.1:9092 --kafka-bootstrap 127.0.0.1:19092 \\
      --kraft-admin-bootstrap 127.0.0.1:9082 --step produce_fetch_edges

Without bootstraps it starts a kraft cluster and an Apache Kafka cluster (1 controller and
3 brokers each; Kafka's jars from `kraft peer kafka fetch`) and stops them at the end.
Exit code 0 when every difference is an accepted one (docs/kafka-compatibility.md).
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "interop",
        help="differential test: the same requests to kraft and to Apache Kafka",
        description="Compare kraft's Kafka-protocol answers with Apache Kafka's.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    isub = p.add_subparsers(dest="interop_command", metavar="ACTION", required=True)
    d = isub.add_parser(
        "diff",
        help="run the scripted sequence on both systems and list the differing fields",
        description="Send one scripted sequence of Kafka requests (bad topic names, produce "
        "and fetch at the edges, ListOffsets by time, an idempotent producer's duplicate and "
        "out-of-sequence batch, describe-configs, ACL refusals, delete and recreate, ...) "
        "through the same client to kraft and to Apache Kafka; compare the normalized "
        "answers field by field.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("--kraft-bootstrap", metavar="HOST:PORT,...", help="kraft's Kafka listeners")
    d.add_argument("--kafka-bootstrap", metavar="HOST:PORT,...", help="Apache Kafka's brokers")
    d.add_argument(
        "--kraft-admin-bootstrap",
        metavar="HOST:PORT,...",
        help="kraft's gRPC bootstrap, to create each step's topics while kraft's Kafka "
        "listener does not serve CreateTopics",
    )
    d.add_argument(
        "--step",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this step (repeatable; default: the whole sequence)",
    )
    d.add_argument("--json", action="store_true", help="print results and differences as JSON")
    d.set_defaults(handler=diff)


def diff(args: argparse.Namespace) -> int:
    from kraft.interop.diff import as_json, as_table, compare, exit_code
    from kraft.interop.run import run_diff, started_clusters

    if bool(args.kraft_bootstrap) != bool(args.kafka_bootstrap):
        print(
            "kraft interop diff: give both --kraft-bootstrap and --kafka-bootstrap, or neither",
            file=sys.stderr,
        )
        return 2
    began = time.monotonic()
    steps = args.step or None
    if args.kraft_bootstrap:
        results, meta = run_diff(
            args.kraft_bootstrap,
            args.kafka_bootstrap,
            kraft_admin=args.kraft_admin_bootstrap,
            steps=steps,
        )
    else:
        with tempfile.TemporaryDirectory(prefix="kraft-interop-") as tmp:
            with started_clusters(tmp) as (kraft_kafka, kraft_grpc, kafka):
                started = time.monotonic() - began
                results, meta = run_diff(kraft_kafka, kafka, kraft_admin=kraft_grpc, steps=steps)
            meta["clusters_start_s"] = round(started, 1)
    meta["total_s"] = round(time.monotonic() - began, 1)
    differences = compare(results)
    if args.json:
        print(as_json(results, differences, meta))
    else:
        print(as_table(differences, list(results)))
        if any(meta["not_served"].values()):
            for system, apis in meta["not_served"].items():
                if apis:
                    print(f"{system} does not serve: {', '.join(apis)}")
        print(f"{meta['total_s']} s")
    return exit_code(differences)
