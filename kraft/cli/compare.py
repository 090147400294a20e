"""``kraft compare``: ISR and quorum replication under the same workload and faults."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="ISR vs quorum replication on a local cluster: report, results.json, plots",
        description="Start a local cluster and run the same workload and faults (slow "
        "follower, failures, leader kill, data loss, steady state) on an ISR topic and a "
        "quorum topic; write report.md, results.json and PNG plots into --out.",
        epilog="example: kraft compare --quick --out /tmp/compare",
    )
    from kraft.compare.run import add_arguments

    add_arguments(p)
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from kraft.compare.run import main_args

    return main_args(args)
