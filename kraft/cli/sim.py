"""``kraft sim raft|cluster|power|group ...``: run the deterministic simulator over seeds."""

from __future__ import annotations

import argparse
from typing import Any

from kraft.arguments import non_negative_int, positive_int, seed_int


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sim",
        help="run the deterministic simulator",
        description="Run seeds of the simulator; a failure prints the command that replays it.",
    )
    ssub = p.add_subparsers(dest="workload", metavar="WORKLOAD", required=True)
    r = ssub.add_parser(
        "raft",
        help="Raft quorum under faults",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: kraft sim raft --seeds 1000 --start 0 --voters 5\n"
        "         kraft sim raft --seeds 1000 --membership --observers 2",
    )
    r.add_argument("--seeds", type=positive_int, default=None, help="how many seeds to run")
    r.add_argument("--start", type=seed_int, default=None, help="first seed")
    r.add_argument("--seed", type=seed_int, default=None, help="replay one seed")
    r.add_argument("--voters", type=positive_int, default=None, help="3 or 5 voters")
    r.add_argument("--observers", type=non_negative_int, default=None, help="observers (brokers)")
    r.add_argument(
        "--membership",
        action="store_true",
        help="KIP-853: add and remove voters (among voters + observers) during the faults",
    )
    r.add_argument("--processes", type=positive_int, default=None, help="worker processes")
    r.set_defaults(handler=_run_raft)
    c = ssub.add_parser(
        "cluster",
        help="controller + ISR brokers + producers under faults",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: kraft sim cluster --seeds 1000 --start 0 --partitions 3\n"
        "         kraft sim cluster --seeds 20 --scenario last-replica-standing --no-elr",
    )
    c.add_argument("--seeds", type=positive_int, default=None, help="how many seeds to run")
    c.add_argument("--start", type=seed_int, default=None, help="first seed")
    c.add_argument("--seed", type=seed_int, default=None, help="replay one seed")
    c.add_argument("--brokers", type=positive_int, default=None, help="brokers (default 3)")
    c.add_argument("--partitions", type=positive_int, default=None, help="partitions (default 2)")
    c.add_argument("--processes", type=positive_int, default=None, help="worker processes")
    c.add_argument(
        "--unsafe-hw-truncation",
        action="store_true",
        help="followers truncate to their HW (Kafka before KIP-101), to see the checker fail",
    )
    c.add_argument(
        "--unsafe-answer-uncommitted-reads",
        action="store_true",
        help="the active controller answers from its uncommitted image, to see the checker fail",
    )
    c.add_argument(
        "--quorum-write-caching",
        action="store_true",
        help="quorum partitions acknowledge before the fsync (with --mode quorum): a "
        "correlated power loss loses acknowledged writes",
    )
    c.add_argument(
        "--schedule",
        choices=("mixed", "random", "targeted"),
        default=None,
        help="the nemesis: random and targeted faults together (mixed, the default), or "
        "either alone",
    )
    c.add_argument(
        "--mode",
        choices=("isr", "quorum", "mixed"),
        default=None,
        help="replication.mode of the partitions: isr (default), quorum (each partition a "
        "Raft group of its replicas) or mixed (even partitions quorum, odd ones ISR)",
    )
    c.add_argument(
        "--reassign",
        action="store_true",
        help="an operator moves the partitions to random brokers during the faults (KIP-455); "
        "use --brokers 4 or more",
    )
    c.add_argument(
        "--scenario",
        choices=("last-replica-standing",),  # replication.sim.scenarios.SCENARIOS
        default=None,
        help="scripted faults instead of the random nemesis: last-replica-standing (KIP-966: "
        "the leader alone in the ISR loses power while an in-sync replica is cut off; "
        "acknowledged records are lost without eligible leader replicas, kept with them)",
    )
    c.add_argument(
        "--no-elr",
        action="store_true",
        help="eligible.leader.replicas.enable=false on the controllers (as Kafka before 4.0)",
    )
    c.add_argument(
        "--workload",
        choices=("replication", "transactions"),
        default=None,
        help="the clients: idempotent and acks=1 producers with consumers (replication, the "
        "default), or transactional producers with read_committed consumers and the "
        "transaction coordinator (transactions)",
    )
    c.set_defaults(handler=_run_cluster)
    w = ssub.add_parser(
        "power",
        help="seeds-to-failure of every deliberately unsafe switch (the simulators' power)",
        epilog="example: kraft sim power --seeds 20 --processes 2",
    )
    w.add_argument("--seeds", type=positive_int, default=None, help="seeds per switch (10)")
    w.add_argument("--start", type=seed_int, default=None, help="first seed")
    w.add_argument("--processes", type=positive_int, default=None, help="worker processes")
    w.add_argument("--switch", action="append", default=None, help="only this switch")
    w.add_argument(
        "--schedule",
        choices=("mixed", "random", "targeted"),
        default=None,
        help="the cluster nemesis (random alone: without the targeted faults)",
    )
    w.set_defaults(handler=_run_power)
    g = ssub.add_parser(
        "group",
        help="consumer-group members against the group coordinator under faults",
        epilog="example: kraft sim group --seeds 300 --start 0",
    )
    g.add_argument("--seeds", type=positive_int, default=None, help="how many seeds to run")
    g.add_argument("--start", type=seed_int, default=None, help="first seed")
    g.add_argument("--seed", type=seed_int, default=None, help="replay one seed")
    g.add_argument("--processes", type=positive_int, default=None, help="worker processes")
    g.set_defaults(handler=_run_group)


def _run_raft(args: argparse.Namespace) -> int:
    from kraft.sim import cli_raft

    argv: list[str] = []
    for name in ("seeds", "start", "seed", "voters", "observers", "processes"):
        value = getattr(args, name)
        if value is not None:
            argv += [f"--{name}", str(value)]
    if args.membership:
        argv.append("--membership")
    result: int = cli_raft(argv)
    return result


def _run_cluster(args: argparse.Namespace) -> int:
    from replication.sim import cli_cluster

    argv: list[str] = []
    names = (
        "seeds",
        "start",
        "seed",
        "brokers",
        "partitions",
        "processes",
        "mode",
        "scenario",
        "workload",
    )
    for name in names:
        value = getattr(args, name)
        if value is not None:
            argv += [f"--{name}", str(value)]
    if args.schedule is not None:
        argv += ["--schedule", args.schedule]
    for flag in (
        "unsafe_hw_truncation",
        "unsafe_answer_uncommitted_reads",
        "quorum_write_caching",
        "reassign",
        "no_elr",
    ):
        if getattr(args, flag):
            argv.append("--" + flag.replace("_", "-"))
    result: int = cli_cluster(argv)
    return result


def _run_power(args: argparse.Namespace) -> int:
    from replication.sim.power import cli_power

    argv: list[str] = []
    for name in ("seeds", "start", "processes", "schedule"):
        value = getattr(args, name)
        if value is not None:
            argv += [f"--{name}", str(value)]
    for switch in args.switch or ():
        argv += ["--switch", switch]
    result: int = cli_power(argv)
    return result


def _run_group(args: argparse.Namespace) -> int:
    from replication.groupsim import cli_group

    argv: list[str] = []
    for name in ("seeds", "start", "seed", "processes"):
        value = getattr(args, name)
        if value is not None:
            argv += [f"--{name}", str(value)]
    result: int = cli_group(argv)
    return result
