"""``kraft transactions list|describe|abort``: like Kafka's ``kafka-transactions.sh`` (KIP-664)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kraft.cli._connect import (
    AdminSession,
    action_adder,
    add_admin_arguments,
    print_table,
)

_EPILOG = """\
examples:
  export KRAFT_BOOTSTRAP=127.0.0.1:9192,127.0.0.1:9193,127.0.0.1:9194
  kraft transactions list
  kraft transactions list --state Ongoing --min-duration-ms 60000     # long-running ones
  kraft transactions describe --transactional-id billing-etl
  kraft transactions abort --topic events --partition 0 --start-offset 1234
  kraft transactions abort --topic events --partition 0 \\
      --producer-id 4000 --producer-epoch 3 --coordinator-epoch 7

abort writes an abort marker for one producer's open transaction in one partition (a hanging
transaction holds the partition's last stable offset back, so read_committed consumers stop
there); it needs CLUSTER_ACTION. With --start-offset (the offset read_committed consumers are
stuck at), the partition's leader names the producer whose transaction opened there
(DescribeProducers), as kafka-transactions.sh does; otherwise take the producer id and epoch
from `describe`, and the coordinator epoch from the leader epoch of the id's
__transaction_state partition.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "transactions",
        help="list, describe and abort transactions",
        description="Inspect and abort transactions (kafka-transactions).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tsub = p.add_subparsers(dest="transactions_command", metavar="ACTION", required=True)

    action = action_adder(tsub)

    ls = action(
        "list",
        "list the transactional ids the coordinators know",
        "kraft transactions list --state Ongoing --min-duration-ms 60000",
    )
    ls.add_argument(
        "--state", action="append", default=[], help="only this state (Ongoing, ...; repeatable)"
    )
    ls.add_argument(
        "--producer-id", action="append", type=int, default=[], help="only this producer id"
    )
    ls.add_argument(
        "--min-duration-ms",
        type=int,
        default=-1,
        metavar="MS",
        help="only transactions running longer than this",
    )
    add_admin_arguments(ls)
    ls.set_defaults(handler=list_transactions)

    d = action(
        "describe",
        "show one transactional id's transaction",
        "kraft transactions describe --transactional-id billing-etl",
    )
    d.add_argument("--transactional-id", required=True, metavar="ID")
    add_admin_arguments(d)
    d.set_defaults(handler=describe)

    a = action(
        "abort",
        "write an abort marker for a hanging transaction",
        "kraft transactions abort --topic events --partition 0 --producer-id 4000 "
        "--producer-epoch 3 --coordinator-epoch 7",
    )
    a.add_argument("--topic", required=True)
    a.add_argument("--partition", required=True, type=int)
    a.add_argument(
        "--start-offset",
        type=int,
        metavar="OFFSET",
        help="the first offset of the open transaction: its producer is found with "
        "DescribeProducers (instead of the three options below)",
    )
    a.add_argument("--producer-id", type=int)
    a.add_argument("--producer-epoch", type=int)
    a.add_argument("--coordinator-epoch", type=int)
    add_admin_arguments(a)
    a.set_defaults(handler=abort)


def list_transactions(args: argparse.Namespace) -> int:
    with AdminSession(args) as session, session.reachable():
        listed = session.admin.list_transactions(
            states=args.state, producer_ids=args.producer_id, min_duration_ms=args.min_duration_ms
        )
    rows = [[t.transactional_id, t.producer_id, t.state] for t in listed]
    if args.json:
        print(
            json.dumps(
                [{"transactional_id": r[0], "producer_id": r[1], "state": r[2]} for r in rows]
            )
        )
    else:
        print_table(["TransactionalId", "ProducerId", "TransactionState"], rows)
    return 0


def describe(args: argparse.Namespace) -> int:
    with AdminSession(args) as session, session.reachable():
        t = session.admin.describe_transaction(args.transactional_id)
    partitions = [f"{topic.name}-{p}" for topic in t.topics for p in topic.partitions]
    view = {
        "transactional_id": t.transactional_id,
        "producer_id": t.producer_id,
        "producer_epoch": t.producer_epoch,
        "state": t.state,
        "timeout_ms": t.timeout_ms,
        "start_ms": t.start_ms,
        "partitions": partitions,
    }
    if args.json:
        print(json.dumps(view))
    else:
        print_table(
            [
                "TransactionalId",
                "ProducerId",
                "ProducerEpoch",
                "TransactionState",
                "TransactionTimeoutMs",
                "TransactionStartTimeMs",
                "TopicPartitions",
            ],
            [[*list(view.values())[:6], ",".join(partitions) or "-"]],
        )
    return 0


def abort(args: argparse.Namespace) -> int:
    from kraft.types import TopicPartition
    from replication.clients.txn_admin import AbortSpec, abort_spec_at

    tp = TopicPartition(args.topic, args.partition)
    explicit = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.start_offset is None and None in explicit:
        print(
            "error: name the transaction with --start-offset, or with --producer-id, "
            "--producer-epoch and --coordinator-epoch",
            file=sys.stderr,
        )
        return 2
    with AdminSession(args) as session, session.reachable():
        if args.start_offset is not None:  # as kafka-transactions.sh: DescribeProducers first
            producers = session.admin.describe_producers(tp)
            spec = abort_spec_at(tp, args.start_offset, producers)
        else:
            spec = AbortSpec(
                partition=tp,
                producer_id=args.producer_id,
                producer_epoch=args.producer_epoch,
                coordinator_epoch=max(args.coordinator_epoch, 0),
            )
        session.admin.abort_transaction(spec)
    name = f"{args.topic}-{args.partition}"
    if args.json:
        print(json.dumps({"aborted": name, "producer_id": spec.producer_id}))
    else:
        print(f"wrote an abort marker for producer {spec.producer_id} to {name}")
    return 0
