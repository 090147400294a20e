"""``kraft groups list|describe|reset-offsets|delete``: like ``kafka-consumer-groups``."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kraft.cli._connect import (
    AdminSession,
    action_adder,
    add_admin_arguments,
    print_table,
)

if TYPE_CHECKING:
    from kraft.types import TopicPartition
    from replication.clients.admin import AdminClient
    from replication.clients.group_admin import GroupDescription

_EPILOG = """\
examples:
  export KRAFT_BOOTSTRAP=127.0.0.1:9192,127.0.0.1:9193,127.0.0.1:9194
  kraft groups list
  kraft groups describe billing                 # offsets and lag per partition
  kraft groups describe billing --members
  kraft groups describe billing --state
  kraft groups reset-offsets billing --topic events --to-earliest            # the plan
  kraft groups reset-offsets billing --topic events:0,1 --shift-by -10 --execute
  kraft groups delete billing

reset-offsets prints the new offsets and writes them only with --execute, and only while
the group has no members (stop its consumers first), as kafka-consumer-groups does.
"""

_MISSING = "-"


def _offsets(admin: AdminClient, queries: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """`AdminClient.list_offsets` as plain offsets (-2 earliest, -1 latest, else a
    timestamp); the first partition's error is raised."""
    out: dict[TopicPartition, int] = {}
    for tp, listed in admin.list_offsets(queries).items():
        if isinstance(listed, Exception):
            raise listed
        out[tp] = listed.offset
    return out


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "groups",
        help="list, describe, reset and delete consumer groups",
        description="Manage consumer groups (kafka-consumer-groups).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gsub = p.add_subparsers(dest="groups_command", metavar="ACTION", required=True)

    action = action_adder(gsub)

    ls = action("list", "list the consumer groups", "kraft groups list --json")
    add_admin_arguments(ls)
    ls.set_defaults(handler=list_groups)

    d = action(
        "describe",
        "show a group's offsets and lag, members, or state",
        "kraft groups describe billing",
        "kraft groups describe billing --members",
    )
    d.add_argument("group")
    view = d.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="offsets and lag (the default)")
    view.add_argument("--members", action="store_true", help="members and their partitions")
    view.add_argument("--state", action="store_true", help="coordinator, assignor, state")
    add_admin_arguments(d)
    d.set_defaults(handler=describe)

    r = action(
        "reset-offsets",
        "plan (and with --execute write) new committed offsets",
        "kraft groups reset-offsets billing --topic events --to-earliest",
        "kraft groups reset-offsets billing --topic events:0,1 --shift-by -10 --execute",
    )
    r.add_argument("group")
    which = r.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--topic", action="append", metavar="TOPIC[:P,...]", help="a topic (repeatable)"
    )
    which.add_argument("--all-topics", action="store_true", help="every committed topic")
    to = r.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--shift-by", type=int, metavar="N")
    to.add_argument("--to-datetime", metavar="ISO", help="e.g. 2026-01-31T12:00:00Z")
    r.add_argument("--execute", action="store_true", help="write the plan (default: dry run)")
    add_admin_arguments(r)
    r.set_defaults(handler=reset_offsets)

    x = action(
        "delete", "delete an empty group and its committed offsets", "kraft groups delete billing"
    )
    x.add_argument("group")
    add_admin_arguments(x)
    x.set_defaults(handler=delete)


def list_groups(args: argparse.Namespace) -> int:
    with AdminSession(args) as session, session.reachable():
        groups = session.admin.list_groups()
    if args.json:
        print(json.dumps([{"group": g.group_id, "state": g.state} for g in groups]))
    else:
        for g in groups:
            print(g.group_id)
    return 0


def _describe_or_none(session: AdminSession, group: str) -> GroupDescription | None:
    from storage.errors import GroupIdNotFoundError

    try:
        return session.admin.describe_group(group)
    except GroupIdNotFoundError:
        return None


def describe(args: argparse.Namespace) -> int:
    with AdminSession(args) as session, session.reachable():
        description = _describe_or_none(session, args.group)
        if description is None:
            raise_not_found(args.group)
        assert description is not None
        if args.state:
            return _print_state(args, description)
        if args.members:
            return _print_members(args, description)
        committed = session.admin.list_group_offsets(args.group)
        owners = description.assignment()
        partitions = sorted(set(committed) | set(owners))
        ends = _offsets(session.admin, dict.fromkeys(partitions, -1)) if partitions else {}
    members = {m.member_id: m for m in description.members}
    rows = []
    for tp in partitions:
        current = committed.get(tp)
        end = ends.get(tp)
        lag = end - current if current is not None and end is not None and end >= 0 else None
        member = members.get(owners.get(tp, ""))
        rows.append(
            {
                "group": args.group,
                "topic": tp.topic,
                "partition": tp.partition,
                "current_offset": current,
                "log_end_offset": end,
                "lag": lag,
                "consumer_id": member.member_id if member else None,
                "host": member.client_host if member else None,
                "client_id": member.client_id if member else None,
            }
        )
    if args.json:
        print(json.dumps({"group": args.group, "state": description.state, "partitions": rows}))
        return 0
    if not description.members:
        print(f"Consumer group '{args.group}' has no active members.\n")
    print_table(
        [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ],
        [[_MISSING if v is None or v == "" else v for v in r.values()] for r in rows],
    )
    return 0


def raise_not_found(group: str) -> None:
    from storage.errors import GroupIdNotFoundError

    raise GroupIdNotFoundError(f"consumer group {group!r} does not exist")


def _print_state(args: argparse.Namespace, d: GroupDescription) -> int:
    doc = {
        "group": d.group_id,
        "coordinator": {"id": d.coordinator, "address": d.coordinator_address},
        "assignment_strategy": d.assignor,
        "state": d.state,
        "members": len(d.members),
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
    }
    if args.json:
        print(json.dumps(doc))
        return 0
    print_table(
        ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
        [
            [
                d.group_id,
                f"{d.coordinator_address} ({d.coordinator})",
                d.assignor or _MISSING,
                d.state,
                len(d.members),
            ]
        ],
    )
    return 0


def _print_members(args: argparse.Namespace, d: GroupDescription) -> int:
    rows = [
        {
            "group": d.group_id,
            "consumer_id": m.member_id,
            "host": m.client_host,
            "client_id": m.client_id,
            "partitions": sum(len(t.partitions) for t in m.assignment),
            "member_epoch": m.member_epoch,
            "assignment": [f"{t.topic}-{p}" for t in m.assignment for p in t.partitions],
        }
        for m in d.members
    ]
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print(f"Consumer group '{d.group_id}' has no active members.")
        return 0
    print_table(
        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
        [
            [
                r["group"],
                r["consumer_id"],
                r["host"] or _MISSING,
                r["client_id"] or _MISSING,
                r["partitions"],
            ]
            for r in rows
        ],
    )
    return 0


def _parse_topics(session: AdminSession, specs: list[str]) -> list[TopicPartition]:
    from kraft.types import TopicPartition

    out: list[TopicPartition] = []
    for spec in specs:
        name, _, parts = spec.partition(":")
        if parts:
            try:
                out.extend(TopicPartition(name, int(p)) for p in parts.split(","))
            except ValueError:
                raise ValueError(f"--topic {spec[:80]!r}: partitions are numbers") from None
        else:
            out.extend(
                TopicPartition(name, p.partition) for p in session.describe_topic(name).partitions
            )
    return out


def _timestamp_ms(text: str) -> int:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--to-datetime {text[:40]!r} is not an ISO date-time") from None
    if when.tzinfo is None:
        raise ValueError("--to-datetime needs a time zone (e.g. 2026-01-31T12:00:00Z)")
    return int(when.timestamp() * 1000)


def reset_offsets(args: argparse.Namespace) -> int:
    from storage.errors import NonEmptyGroupError

    with AdminSession(args) as session, session.reachable():
        admin = session.admin
        description = _describe_or_none(session, args.group)
        committed = admin.list_group_offsets(args.group) if description is not None else {}
        tps = sorted(committed) if args.all_topics else _parse_topics(session, args.topic)
        earliest = _offsets(admin, dict.fromkeys(tps, -2)) if tps else {}
        latest = _offsets(admin, dict.fromkeys(tps, -1)) if tps else {}
        plan: dict[TopicPartition, int] = {}
        for tp in tps:
            low, high = earliest[tp], latest[tp]
            if args.to_earliest:
                target = low
            elif args.to_latest:
                target = high
            elif args.to_offset is not None:
                target = args.to_offset
            elif args.shift_by is not None:
                target = committed.get(tp, high) + args.shift_by
            else:
                found = _offsets(admin, {tp: _timestamp_ms(args.to_datetime)})[tp]
                target = high if found < 0 else found
            plan[tp] = min(max(target, low), high)  # Kafka clamps into the log's range
        if args.execute:
            if description is not None and description.members:
                raise NonEmptyGroupError(
                    f"group {args.group!r} has {len(description.members)} active members: "
                    "stop its consumers before resetting its offsets"
                )
            if plan:
                admin.alter_group_offsets(args.group, plan)
    rows = [
        {"group": args.group, "topic": tp.topic, "partition": tp.partition, "new_offset": o}
        for tp, o in sorted(plan.items())
    ]
    if args.json:
        print(json.dumps({"executed": bool(args.execute), "offsets": rows}))
        return 0
    print_table(
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        [list(r.values()) for r in rows],
    )
    if not args.execute:
        print("\nDry run: nothing written. Add --execute to commit these offsets.", file=sys.stderr)
    return 0


def delete(args: argparse.Namespace) -> int:
    with AdminSession(args) as session, session.reachable():
        session.admin.delete_group(args.group)
    if args.json:
        print(json.dumps({"deleted": args.group}))
    else:
        print(f"Deletion of requested consumer groups ('{args.group}') was successful.")
    return 0
