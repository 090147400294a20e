"""``kraft soak``: a long steady load on a cluster with a fault every N seconds, its records/s
and each node's memory, descriptors, threads and disk recorded and drawn."""

from __future__ import annotations

import argparse
import json
from typing import Any

from kraft.arguments import positive_int, positive_seconds
from kraft.cli._node import add_role_config_arguments

_EPILOG = """\
examples:
  sudo kraft soak --network netns --minutes 30 --partitions 1000 --fault-every 30
  kraft soak --network local --minutes 5 --partitions 50 --rate 500 --out /tmp/soak
  sudo kraft soak --network netns --minutes 10 --faults network

A steady idempotent acks=all producer (--rate records/s over --partitions partitions, RF 3,
min.insync.replicas=2) and a consumer group member run for --minutes; every --fault-every
seconds one fault drawn from --seed (--faults, the nemesis's kinds; loss needs netns;
"network": partition,delay,bandwidth,loss, so no process is killed, paused or restarted and
the memory slopes cover processes that lived the whole run) lasts --fault-seconds and is
healed. Each second it samples the records acknowledged and consumed
and, from /proc, each node's resident memory, descriptors and threads (disk every 10 s).
At the end every acknowledged record is read back at its offset. OUT gets samples.jsonl,
summary.json (records lost, the steady rate, the seconds to recover after each heal, memory
and descriptor slopes after the warm-up and over the second half of the run, and each node's
descriptors at the start and end of them: a node holds a few dozen, so one more is a few
percent; per fault kind, how much a node's memory changed over each fault and the quiet after
it) and soak.png (matplotlib). Exit 1 if a record is lost.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "soak",
        help="a long steady load with a fault every N seconds, resources tracked",
        description="Soak a cluster: steady produce, a consumer group, periodic faults.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--network",
        choices=["netns", "local"],
        default="netns",
        help="netns (root): a host per node; local: loopback with fault proxies",
    )
    seconds = positive_seconds
    p.add_argument("--minutes", type=seconds, default=30.0, help="length (default 30)")
    p.add_argument("--partitions", type=positive_int, default=1000, help="default 1000")
    p.add_argument("--rate", type=positive_int, default=1000, help="records/s (default 1000)")
    p.add_argument("--fault-every", type=seconds, default=30.0, metavar="S", help="default 30")
    p.add_argument(
        "--fault-seconds", type=seconds, default=10.0, metavar="S", help="each fault (default 10)"
    )
    p.add_argument(
        "--faults",
        default="partition,loss,delay,bandwidth,kill,pause",
        help="the nemesis's fault kinds (default partition,loss,delay,bandwidth,kill,pause); "
        "network: partition,delay,bandwidth,loss (no process restarted)",
    )
    p.add_argument("--seed", type=int, default=0, help="the faults' seed (default 0)")
    p.add_argument(
        "--warmup", type=seconds, default=60.0, metavar="S", help="what slopes omit (default 60)"
    )
    add_role_config_arguments(p)
    p.add_argument("--out", default="soak-out", help="output directory (default soak-out)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from kraft.cli._connect import parse_key_values
    from kraft.logs import configure_logging
    from replication.nemesis.faults import parse_fault_kinds
    from replication.nemesis.soak import SoakConfig, run_soak

    try:
        kinds = parse_fault_kinds(args.faults, packets=args.network == "netns")
        broker_config = parse_key_values(args.broker_config, "--broker-config")
        controller_config = parse_key_values(args.controller_config, "--controller-config")
    except ValueError as e:
        print(f"kraft soak: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    configure_logging(args.log_level, json=True, stream=(out / "clients.log").open("a"))
    config = SoakConfig(
        network=args.network,
        minutes=args.minutes,
        partitions=args.partitions,
        rate=args.rate,
        fault_every_s=args.fault_every,
        fault_seconds=min(args.fault_seconds, args.fault_every * 0.8),
        faults=kinds,
        seed=args.seed,
        warmup_s=args.warmup,
        out=out,
        broker_config=broker_config,
        controller_config=controller_config,
    )
    progress = (lambda _: None) if args.json else (lambda line: print(line, flush=True))
    result = run_soak(config, progress)
    from dataclasses import asdict

    if args.json:
        print(json.dumps(asdict(result), indent=2))
    else:
        recovered = [r for r in result.recovery_s if r is not None]
        print(
            f"{result.acknowledged:,} acknowledged, {result.lost} lost, {result.consumed:,} "
            f"consumed by the group in {result.seconds:.0f} s; steady "
            f"{result.steady_records_per_s:,.0f} records/s; after {len(result.faults)} heals "
            f"back within 10% in {', '.join(f'{r:g}' for r in recovered) or '-'} s "
            f"({len(result.recovery_s) - len(recovered)} not before the next fault); "
            f"{result.stalled_s} s with nothing acknowledged after the warm-up"
        )
        for host, slope in result.slopes.items():
            restarts = int(slope["restarts"])
            lived = (
                "one process, the whole run"
                if restarts == 0
                else f"restarted {restarts} times: over its longest-lived process"
            )
            print(
                f"  {host:16} rss {slope['rss']:+.2f}%/10 min ({slope['rss_late']:+.2f} over the"
                f" second half), fds {slope['fds']:+.2f}%/10 min ({slope['fds_late']:+.2f}):"
                f" {slope['fds_start']:.0f} to {slope['fds_end']:.0f}, at most"
                f" {slope['fds_max']:.0f} ({lived})"
            )
        for kind, change in result.memory_by_fault.items():
            roles = ", ".join(f"{r} {v:+.2f}" for r, v in change.items() if r != "faults")
            print(
                f"  memory per {kind} fault and the quiet after it, MiB a node: {roles}"
                f" ({change['faults']:.0f} faults)"
            )
        if result.unhealthy_at_end:
            print(f"  not healthy 120 s after the last heal: {result.unhealthy_at_end}")
        for example in result.lost_examples:
            print(f"  lost: {example}")
        la = result.load_average
        print(f"load average {la[0]:.1f} {la[1]:.1f} {la[2]:.1f}; {out}/soak.png, summary.json")
    return 0 if result.valid else 1
