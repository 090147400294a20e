"""``kraft quorum describe|add-controller|remove-controller``: the metadata quorum, like
``kafka-metadata-quorum.sh``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from kraft.arguments import non_negative_int, positive_seconds

_EPILOG = """\
example:
  kraft quorum describe --bootstrap-controller 127.0.0.1:9091,127.0.0.1:9092
  kraft quorum describe --bootstrap-controller 127.0.0.1:9091 --json

Asks the active controller (following redirects) for KIP-595 DescribeQuorum: the leader, its
epoch and high watermark, and for every voter and observer its log end offset, its lag behind
the leader and when it last fetched. Exits 1 with a one-line error when no controller answers.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "quorum",
        help="describe and change the controller quorum (kafka-metadata-quorum)",
        description="Inspect the KRaft controller quorum.",
    )
    qsub = p.add_subparsers(dest="quorum_command", metavar="ACTION", required=True)
    d = qsub.add_parser(
        "describe",
        help="leader, epoch, high watermark and each replica's progress",
        description="Describe the metadata quorum (KIP-595 DescribeQuorum).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument(
        "--bootstrap-controller",
        "--bootstrap-controllers",
        metavar="HOST:PORT[,...]",
        help="one or more controllers to ask (default: $KRAFT_BOOTSTRAP_CONTROLLER)",
    )
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.add_argument(
        "--timeout",
        type=positive_seconds,
        default=10.0,
        help="seconds to find an answer (default 10)",
    )
    d.set_defaults(handler=describe)
    a = qsub.add_parser(
        "add-controller",
        help="make a controller that runs as an observer a voter (KIP-853)",
        description="Add a controller to the voter set (KIP-853 AddRaftVoter).",
        epilog=_ADD_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    a.add_argument("--controller-id", type=non_negative_int, required=True, metavar="N")
    a.add_argument(
        "--controller-address",
        required=True,
        metavar="HOST:PORT",
        help="where the other controllers reach it (its listener)",
    )
    _common(a, timeout=30.0)
    a.set_defaults(handler=add_controller)
    r = qsub.add_parser(
        "remove-controller",
        help="remove a controller from the voter set (KIP-853)",
        description="Remove a controller from the voter set (KIP-853 RemoveRaftVoter).",
        epilog=_REMOVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("--controller-id", type=non_negative_int, required=True, metavar="N")
    _common(r, timeout=30.0)
    r.set_defaults(handler=remove_controller)


_ADD_EPILOG = """\
example:
  kraft controller --config controller-4.properties     # bootstrap.servers, not in it: observer
  kraft quorum add-controller --controller-id 4 --controller-address 127.0.0.1:9094 \\
      --bootstrap-controller 127.0.0.1:9091

The controllers must run with controller.quorum.bootstrap.servers (a static
controller.quorum.voters set cannot change). The active controller adds the node once it has
caught up as an observer, one change at a time, and this returns when the change committed.
"""

_REMOVE_EPILOG = """\
example:
  kraft quorum remove-controller --controller-id 1 --bootstrap-controller 127.0.0.1:9092

Removing the active controller is allowed: it leads until the change commits, then hands
over. Stop the removed controller afterwards; it follows the log as an observer until then.
"""


def _common(p: Any, *, timeout: float) -> None:
    p.add_argument(
        "--bootstrap-controller",
        "--bootstrap-controllers",
        metavar="HOST:PORT[,...]",
        help="one or more controllers to ask (default: $KRAFT_BOOTSTRAP_CONTROLLER)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=timeout,
        help=f"seconds to get it done (default {timeout:g})",
    )


def add_controller(args: argparse.Namespace) -> int:
    return _change(args, add=True)


def remove_controller(args: argparse.Namespace) -> int:
    return _change(args, add=False)


def _change(args: argparse.Namespace, *, add: bool) -> int:
    from kraft.cli._connect import controller_bootstrap
    from kraft.controller.client import ControllerClient
    from kraft.security.tls import client_tls_from_env

    bootstrap = controller_bootstrap(args)
    with ControllerClient(
        bootstrap, timeout=args.timeout, tls=client_tls_from_env(), fail_fast=True
    ) as client:
        if add:
            client.add_raft_voter(args.controller_id, args.controller_address, timeout=args.timeout)
        else:
            client.remove_raft_voter(args.controller_id, timeout=args.timeout)
        voters = sorted(r.replica_id for r in client.describe_quorum().voters)
    verb = "added" if add else "removed"
    if args.json:
        print(json.dumps({"controller_id": args.controller_id, verb: True, "voters": voters}))
    else:
        print(f"Controller {args.controller_id} {verb}; voters now {voters}")
    return 0


def describe(args: argparse.Namespace) -> int:
    from kraft.cli._connect import controller_bootstrap
    from kraft.controller.client import ControllerClient
    from kraft.security.tls import client_tls_from_env

    bootstrap = controller_bootstrap(args)
    with ControllerClient(
        bootstrap, timeout=args.timeout, tls=client_tls_from_env(), fail_fast=True
    ) as client:
        quorum = client.describe_quorum()
    now_ms = time.time_ns() // 1_000_000
    doc: dict[str, Any] = {
        "leader_id": quorum.leader_id,
        "leader_epoch": quorum.leader_epoch,
        "high_watermark": quorum.high_watermark,
        "max_follower_lag": max((r.lag for r in quorum.voters), default=0),
        "voters": [_replica(r, now_ms) for r in quorum.voters],
        "observers": [_replica(r, now_ms) for r in quorum.observers],
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    out = sys.stdout
    print(f"LeaderId:            {doc['leader_id']}", file=out)
    print(f"LeaderEpoch:         {doc['leader_epoch']}", file=out)
    print(f"HighWatermark:       {doc['high_watermark']}", file=out)
    print(f"MaxFollowerLag:      {doc['max_follower_lag']}", file=out)
    print(f"CurrentVoters:       {[r['id'] for r in doc['voters']]}", file=out)
    print(f"CurrentObservers:    {[r['id'] for r in doc['observers']]}", file=out)
    print(file=out)
    header = f"{'NodeId':<8}{'LogEndOffset':>14}{'Lag':>8}{'LastFetchMsAgo':>16}  Status"
    print(header, file=out)
    for kind, rows in (("Voter", doc["voters"]), ("Observer", doc["observers"])):
        for r in rows:
            status = (
                "Leader"
                if r["id"] == doc["leader_id"]
                else ("Follower" if kind == "Voter" else kind)
            )
            ago = "-" if r["last_fetch_ms_ago"] is None else str(r["last_fetch_ms_ago"])
            print(
                f"{r['id']:<8}{r['log_end_offset']:>14}{r['lag']:>8}{ago:>16}  {status}",
                file=out,
            )
    return 0


def _replica(r: Any, now_ms: int) -> dict[str, Any]:
    fetched = r.last_fetch_timestamp_ms
    return {
        "id": r.replica_id,
        "log_end_offset": r.log_end_offset,
        "lag": r.lag,
        "last_fetch_timestamp_ms": fetched if fetched >= 0 else None,
        "last_fetch_ms_ago": max(0, now_ms - fetched) if fetched >= 0 else None,
    }
