"""``kraft nemesis``: a Jepsen-style fault run on a local cluster of real processes."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kraft.arguments import non_negative_int, positive_int


def _seconds(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "nemesis",
        help="faults on a local cluster (kill, pause, partition...), the history checked",
        description=(
            "Start a LocalCluster with a fault proxy on every link, run idempotent producers "
            "and readers, inject faults drawn from --seed, then check the whole history "
            "(lost, duplicated, inconsistent, non-monotonic, vanished writes) and that the "
            "replicas' logs are identical below the high watermark. Exit 1 on a violation."
        ),
        epilog=(
            "examples: kraft nemesis --seed 7 --duration 120 --faults kill,pause,partition "
            "--out /tmp/nemesis; sudo kraft nemesis --network netns --faults "
            "partition,loss,delay,bandwidth,kill,pause"
        ),
    )
    p.add_argument("--seed", type=int, default=0, help="the fault schedule's seed (default 0)")
    p.add_argument("--duration", type=_seconds, default=60.0, help="seconds of faults (default 60)")
    p.add_argument(
        "--faults",
        default="kill,pause,partition",
        help="comma-separated: kill, kill-controller, pause, stop, partition, roll, delay, "
        "bandwidth, stale-leader, lone-leader, loss (--network netns), or all",
    )
    p.add_argument(
        "--network",
        choices=["local", "netns"],
        default="local",
        help="local: every node on loopback, network faults by TCP proxies; netns (root): "
        "every node on a host of its own (a network namespace on a private bridge), faults on "
        "the hosts' links: partitions and one-way cuts dropping packets, loss, bandwidth (tbf), "
        "delay with jitter (netem, or a delaying relay where the kernel has none)",
    )
    p.add_argument("--brokers", type=positive_int, default=3, help="brokers (default 3)")
    p.add_argument("--partitions", type=positive_int, default=6, help="partitions (default 6)")
    p.add_argument("--producers", type=positive_int, default=3, help="producers (default 3)")
    p.add_argument("--readers", type=positive_int, default=2, help="readers (default 2)")
    p.add_argument(
        "--rate", type=_seconds, default=200.0, help="records/s per producer (default 200)"
    )
    p.add_argument("--acks", choices=["all", "1"], default="all", help="producer acks")
    p.add_argument(
        "--min-insync-replicas", type=positive_int, default=2, help="the topic's (default 2)"
    )
    p.add_argument(
        "--unclean",
        action="store_true",
        help="unclean.leader.election.enable=true, and eligible.leader.replicas.enable=false "
        "(with KIP-966's eligible leader replicas a stale replica is never elected)",
    )
    p.add_argument(
        "--metadata-workers",
        type=non_negative_int,
        default=0,
        help="threads creating, deleting and reconfiguring topics during the faults (default 0)",
    )
    p.add_argument(
        "--group-members",
        type=non_negative_int,
        default=0,
        help="consumer-group member slots reading the topic, joining and leaving (default 0)",
    )
    p.add_argument(
        "--workload",
        choices=["plain", "txn"],
        default="plain",
        help="plain: idempotent producers and readers (kraft's clients); txn: transactional "
        "producers (commits and aborts) and read_committed readers, confluent-kafka over the "
        "Kafka listener, checked for aborted reads, lost commits and partial transactions",
    )
    p.add_argument("--out", default="nemesis-out", help="output directory (default nemesis-out)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from replication.nemesis.faults import parse_fault_kinds
    from replication.nemesis.run import NemesisConfig, run_nemesis

    try:
        kinds = parse_fault_kinds(args.faults, packets=args.network == "netns")
    except ValueError as e:
        print(f"kraft nemesis: {e}", file=sys.stderr)
        return 2
    config = NemesisConfig(
        seed=args.seed,
        duration_s=args.duration,
        faults=kinds,
        brokers=args.brokers,
        partitions=args.partitions,
        producers=args.producers,
        readers=args.readers,
        rate_per_producer=args.rate,
        acks=args.acks,
        min_insync_replicas=args.min_insync_replicas,
        unclean=args.unclean,
        metadata_workers=args.metadata_workers,
        group_members=args.group_members,
        workload=args.workload,
        network=args.network,
        out=Path(args.out),
    )
    from kraft.logs import configure_logging

    # The clients' warnings (stalled requests while a leader is paused...) go to a file of
    # the run: they are expected under faults, and the terminal shows the progress instead.
    config.out.mkdir(parents=True, exist_ok=True)
    configure_logging(args.log_level, json=True, stream=(config.out / "clients.log").open("a"))
    progress = (lambda _: None) if args.json else (lambda line: print(line, flush=True))
    result = run_nemesis(config, progress)
    summary = result.summary()
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        report = result.report
        print(f"\nfaults: {summary['faults_by_kind']}")
        if args.workload == "txn":
            _print_txn(result.txn)
        else:
            print(
                f"sends {report.sends:,}, acknowledged {report.acknowledged:,}, failed "
                f"{report.failed_definite:,} definite / {report.failed_indeterminate:,} "
                f"indeterminate, polls {report.polls:,}, read back {report.final_records:,}\n"
                f"violations: {report.violations()} (unseen, informational: "
                f"{report.unseen.count})"
            )
            for line in report.examples():
                print(f"  {line}")
        print(
            f"replicas identical below the high watermark: {result.replicas_identical}\n"
            f"{'VALID' if result.valid else 'INVALID'} in {result.seconds:.0f}s; "
            f"history, summary and timeline in {args.out}\n"
            f"replay: {summary['replay']}"
        )
        for problem in result.replica_problems[:5]:
            print(f"  replicas: {problem}")
        if args.metadata_workers:
            meta = result.metadata
            print(
                f"metadata: {meta.ops:,} operations, {meta.acknowledged:,} acknowledged, "
                f"{meta.indeterminate:,} indeterminate, {meta.final_topics} topics at the end; "
                f"{'valid' if meta.valid else 'INVALID'}"
            )
            for name in meta.VIOLATIONS:
                for example in getattr(meta, name)[:5]:
                    print(f"  {name}: {example}")
        if args.group_members:
            groups = result.groups
            print(
                f"group: {groups.assignments:,} assignments, {groups.revocations:,} revocations "
                f"({groups.lost_revocations} lost), {groups.commits_acknowledged:,} commits "
                f"acknowledged ({groups.commits_failed:,} failed), "
                f"{groups.checked_records:,} records checked processed, "
                f"{len(groups.zombie_overlaps)} zombie overlaps; "
                f"{'valid' if groups.valid else 'INVALID'}"
            )
            for name in groups.VIOLATIONS:
                for example in getattr(groups, name)[:5]:
                    print(f"  {name}: {example}")
    return 0 if result.valid else 1


def _print_txn(txn: Any) -> None:
    """The transactional checker's counts and violations (`TxnReport`)."""
    print(
        f"transactions: {txn.transactions:,} ({txn.committed:,} committed, {txn.aborted:,} "
        f"aborted, {txn.indeterminate:,} indeterminate of which {txn.indeterminate_visible:,} "
        f"visible), {txn.records_sent:,} records, {txn.restarts} producer restarts\n"
        f"polls {txn.polls:,} ({txn.uncommitted_seen:,} aborted records seen by the "
        f"read_uncommitted reader), read back read_committed {txn.final_records:,}; "
        f"{txn.copies:,} copies committed by the copier (consume-transform-produce)\n"
        f"violations: {txn.violations()}"
    )
    for line in txn.examples():
        print(f"  {line}")
