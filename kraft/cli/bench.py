"""``kraft bench ...``: benchmarks that print each figure beside a baseline measured in the
same run (raw file I/O, raw gRPC, a peer library), never an absolute target."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

from kraft.arguments import positive_int


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="run a benchmark (storage, ...)",
        description="Run a benchmark and print it beside a baseline measured in the same run.",
    )
    bsub = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    s = bsub.add_parser(
        "storage",
        help="log append/read throughput vs raw os.write/os.read",
        epilog="example: kraft bench storage --total-mb 512 --json",
    )
    s.add_argument("--dir", default=None, help="directory to write in (default: a temp dir)")
    s.add_argument("--total-mb", type=positive_int, default=256, help="MB to append without fsync")
    s.add_argument(
        "--synced-mb", type=positive_int, default=32, help="MB to append with fsync each"
    )
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(handler=_run_storage)
    r = bsub.add_parser(
        "raft",
        help="3-process Raft log: throughput, latency and failover vs PySyncObj",
        epilog="example: kraft bench raft --entries 200000 --latency-ops 500 --json",
        add_help=False,  # its own parser (kraft.bench.raft) answers --help
    )
    r.set_defaults(handler=_passthrough("kraft.bench.raft:main"), passthrough=True)
    f = bsub.add_parser(
        "failover",
        help="3 controller processes: kill -9 of the active one to the next committed write",
        epilog="example: kraft bench failover --runs 10 --json",
        add_help=False,  # its own parser (kraft.bench.failover) answers --help
    )
    f.set_defaults(handler=_passthrough("kraft.bench.failover:main"), passthrough=True)
    qf = bsub.add_parser(
        "host-faults",
        help="network hosts (root): the controller epoch through loss, a paused leader and "
        "a starved host; a killed leader's replacement",
        epilog="example: sudo kraft bench host-faults --phases loss,pause,load,kill,isr-cut",
        add_help=False,  # its own parser (kraft.bench.host_faults) answers --help
    )
    qf.set_defaults(handler=_passthrough("kraft.bench.host_faults:main"), passthrough=True)
    pr = bsub.add_parser(
        "produce",
        help="producer records/s, MB/s, p50/p99/p99.9 (acks=all and 1) vs raw gRPC streaming",
        epilog="example: kraft bench produce --records 200000 --acks all --json",
        add_help=False,  # its own parser (kraft.bench.produce_consume) answers --help
    )
    pr.set_defaults(
        handler=_passthrough("kraft.bench.produce_consume:main_produce"), passthrough=True
    )
    co = bsub.add_parser(
        "consume",
        help="consumer records/s, MB/s, poll p50/p99/p99.9 vs raw gRPC streaming",
        epilog="example: kraft bench consume --records 200000 --json",
        add_help=False,  # its own parser (kraft.bench.produce_consume) answers --help
    )
    co.set_defaults(
        handler=_passthrough("kraft.bench.produce_consume:main_consume"), passthrough=True
    )
    e2e = bsub.add_parser(
        "e2e",
        help="produce-to-consume latency p50/p99/p99.9 at a fixed rate vs a raw gRPC round trip",
        epilog="example: kraft bench e2e --rate 10000 --seconds 10 --json",
        add_help=False,  # its own parser (kraft.bench.e2e) answers --help
    )
    e2e.set_defaults(handler=_passthrough("kraft.bench.e2e:main"), passthrough=True)
    sp = bsub.add_parser(
        "spark",
        help="Spark reading a topic (format kraft) vs the same records as Parquet and JSON lines",
        epilog="example: kraft bench spark --records 1000000 --json",
        add_help=False,  # its own parser (kraft.bench.spark) answers --help
    )
    sp.set_defaults(handler=_passthrough("kraft.bench.spark:main"), passthrough=True)
    idle = bsub.add_parser(
        "idle",
        help="CPU an idle LocalCluster uses (all nodes, /proc CPU time)",
        epilog="example: kraft bench idle --seconds 60 --json",
        add_help=False,  # its own parser (kraft.bench.idle) answers --help
    )
    idle.set_defaults(handler=_passthrough("kraft.bench.idle:main"), passthrough=True)
    grp = bsub.add_parser(
        "group",
        help="consumer groups: rebalance time (graceful leave, kill -9), 3 members vs 1",
        epilog="example: kraft bench group --runs 10 --json",
        add_help=False,  # its own parser (kraft.bench.group) answers --help
    )
    grp.set_defaults(handler=_passthrough("kraft.bench.group:main"), passthrough=True)
    md = bsub.add_parser(
        "metadata",
        help="many partitions: creation rate, elections, broker and controller failover times",
        epilog="example: kraft bench metadata --partitions 10000 --json",
        add_help=False,  # its own parser (kraft.bench.metadata) answers --help
    )
    md.set_defaults(handler=_passthrough("kraft.bench.metadata:main"), passthrough=True)
    mdd = bsub.add_parser(
        "metadata-delta",
        help="event-loop stalls while a large metadata delta lands (create, fence, delete)",
        epilog="example: kraft bench metadata-delta --partitions 1000 --json",
        add_help=False,  # its own parser (kraft.bench.metadata_delta) answers --help
    )
    mdd.set_defaults(handler=_passthrough("kraft.bench.metadata_delta:main"), passthrough=True)
    ffr = bsub.add_parser(
        "fetch-from-follower",
        help="a partition leader's CPU with and without fetch from the closest replica (KIP-392)",
        epilog="example: kraft bench fetch-from-follower --records 200000 --json",
        add_help=False,  # its own parser (kraft.bench.fetch_from_follower) answers --help
    )
    ffr.set_defaults(handler=_passthrough("kraft.bench.fetch_from_follower:main"), passthrough=True)
    trees = bsub.add_parser(
        "trees",
        help="one bench on a base commit's tree and on this one, alternated (head/base)",
        epilog="example: kraft bench trees --base main --rounds 3 -- produce --records 300000",
        add_help=False,  # its own parser (kraft.bench.trees) answers --help
    )
    trees.set_defaults(handler=_passthrough("kraft.bench.trees:main"), passthrough=True)


def _run_storage(args: argparse.Namespace) -> int:
    from kraft.bench.storage import main

    argv = ["--total-mb", str(args.total_mb), "--synced-mb", str(args.synced_mb)]
    if args.dir:
        argv += ["--dir", args.dir]
    if args.json:
        argv.append("--json")
    result: int = main(argv)
    return result


def _passthrough(target: str) -> Callable[[argparse.Namespace], int]:
    """The handler of a bench whose own parser takes the rest of the command line:
    ``module:function``, imported when the bench runs (each pulls in its own dependencies)."""
    module, function = target.split(":")

    def run(args: argparse.Namespace) -> int:
        main = getattr(importlib.import_module(module), function)
        result: int = main(list(args.rest))
        return result

    return run
