"""``kraft sim raft ...``: run the deterministic simulator over a range of seeds."""

from __future__ import annotations

import argparse
from typing import Any


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
        epilog="example: kraft sim raft --seeds 1000 --start 0 --voters 5",
    )
    r.add_argument("--seeds", type=int, default=None, help="how many seeds to run")
    r.add_argument("--start", type=lambda s: int(s, 0), default=None, help="first seed")
    r.add_argument("--seed", type=lambda s: int(s, 0), default=None, help="replay one seed")
    r.add_argument("--voters", type=int, default=None, help="3 or 5 voters")
    r.add_argument("--observers", type=int, default=None, help="observers (brokers)")
    r.set_defaults(handler=_run_raft)


def _run_raft(args: argparse.Namespace) -> int:
    from kraft.sim import cli_raft

    argv: list[str] = []
    for name in ("seeds", "start", "seed", "voters", "observers"):
        value = getattr(args, name)
        if value is not None:
            argv += [f"--{name}", str(value)]
    result: int = cli_raft(argv)
    return result
