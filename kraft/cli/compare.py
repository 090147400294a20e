"""``kraft compare``: ISR and quorum replication under the same workload and faults."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="ISR vs quorum replication on a local cluster: report, results.json, plots",
        description="Start a local cluster and run the same workload and faults (slow follower,\n"
        "failures, leader kill, data loss, steady state) on an ISR topic and a quorum topic;\n"
        "write report.md, results.json and PNG plots into --out. With --network netns (root)\n"
        "every node runs on its own network host, and the slow-link scenario puts the same\n"
        "delay or bandwidth limit on their links.",
        epilog="examples:\n  kraft compare --quick --out /tmp/compare\n"
        "  sudo kraft compare --network netns --scenarios steady,slow-link --out /tmp/nc",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from kraft.compare.run import add_arguments

    add_arguments(p)
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from kraft.compare.run import main_args

    return main_args(args)
