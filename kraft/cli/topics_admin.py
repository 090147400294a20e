"""``kraft topics elect-leaders|alter|offsets``: the operator's tools around topics, like
``kafka-leader-election.sh``, ``kafka-topics --alter --partitions`` and
``kafka-get-offsets.sh``. `kraft.cli.topics` registers them beside create/list/describe."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kraft.arguments import int_at_least, positive_int
from kraft.cli._connect import AdminSession

if TYPE_CHECKING:
    from kraft.types import TopicPartition
    from storage.errors import KraftError

Action = Callable[[str, str, str], argparse.ArgumentParser]


def add_actions(action: Action, common: Callable[..., None]) -> None:
    """Register the actions with ``action(name, help, example)`` of `kraft.cli.topics`."""
    e = action(
        "elect-leaders",
        "elect preferred leaders, or unclean ones for offline partitions (kafka-leader-election)",
        "kraft topics elect-leaders --topic events --partition 0 --type preferred",
    )
    e.add_argument("--topic", help="one topic (default: every partition of the cluster)")
    e.add_argument(
        "--partition",
        type=int_at_least(0),
        action="append",
        default=[],
        help="one partition of --topic (repeatable; default: all of them)",
    )
    e.add_argument(
        "--type",
        choices=["preferred", "unclean"],
        default="preferred",
        help="preferred (default): move leadership back to the first replica; unclean: "
        "elect an out-of-sync replica of an offline partition (may lose records)",
    )
    common(e, json_output=True)
    e.set_defaults(handler=elect_leaders)

    a = action(
        "alter",
        "add partitions to a topic (kafka-topics --alter --partitions)",
        "kraft topics alter events --partitions 12",
    )
    a.add_argument("topic")
    a.add_argument(
        "--partitions",
        type=positive_int,
        required=True,
        help="the new partition count (more than now; keyed records then move)",
    )
    common(a, json_output=True)
    a.set_defaults(handler=alter)

    o = action(
        "offsets",
        "each partition's offset at a time: earliest, latest or a timestamp (kafka-get-offsets)",
        "kraft topics offsets events --time earliest",
    )
    o.add_argument("topic")
    o.add_argument(
        "--partition",
        type=int_at_least(0),
        action="append",
        default=[],
        help="one partition (repeatable; default: all)",
    )
    o.add_argument(
        "--time",
        default="latest",
        metavar="earliest|latest|TIMESTAMP",
        help="latest (default): the log end offset; earliest: the log start offset; "
        "TIMESTAMP (ms since the epoch): the first offset with a timestamp at or after it",
    )
    common(o, json_output=True)
    o.set_defaults(handler=offsets)


def _partitions_of(session: AdminSession, topic: str, chosen: list[int]) -> list[TopicPartition]:
    from kraft.types import TopicPartition
    from storage.errors import UnknownTopicOrPartitionError

    known = sorted(p.partition for p in session.describe_topic(topic).partitions)
    for p in chosen:
        if p not in known:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has no partition {p} (it has {len(known)})"
            )
    return [TopicPartition(topic, p) for p in (sorted(set(chosen)) or known)]


def elect_leaders(args: argparse.Namespace) -> int:
    from storage.errors import ElectionNotNeededError

    if args.partition and not args.topic:
        raise ValueError("--partition needs --topic")
    with AdminSession(args) as session:
        targets = (
            None if args.topic is None else _partitions_of(session, args.topic, args.partition)
        )
        with session.reachable():
            results = session.admin.elect_leaders(targets, args.type)
    elected = sorted((tp for tp, e in results.items() if e is None), key=tp_key)
    not_needed = sorted(
        (tp for tp, e in results.items() if isinstance(e, ElectionNotNeededError)), key=tp_key
    )
    failed = {
        tp: e
        for tp, e in sorted(results.items(), key=lambda i: tp_key(i[0]))
        if e is not None and not isinstance(e, ElectionNotNeededError)
    }
    kind = args.type.upper()
    if args.json:
        print(
            json.dumps(
                {
                    "election_type": args.type,
                    "elected": [tp_doc(tp) for tp in elected],
                    "not_needed": [tp_doc(tp) for tp in not_needed],
                    "failed": [tp_doc(tp, e) for tp, e in failed.items()],
                },
                indent=2,
            )
        )
    else:
        # The lines of Kafka's LeaderElectionCommand.
        if elected:
            shown = tps_text(elected)
            print(f"Successfully completed leader election ({kind}) for partitions {shown}")
        if not_needed:
            print(f"Valid replica already elected for partitions {tps_text(not_needed)}")
        if not elected and not not_needed and not failed:
            print(f"No partition needed a leader election ({kind}).")
        for tp, e in failed.items():
            print(f"Error completing leader election ({kind}) for partition: {tp}: {e.message}")
    return 1 if failed else 0


def alter(args: argparse.Namespace) -> int:
    with AdminSession(args) as session:
        before = len(session.describe_topic(args.topic).partitions)
        with session.reachable():
            session.admin.create_partitions(args.topic, args.partitions)
            topic = session.admin.wait_for_leaders(args.topic, timeout=args.timeout)
    if args.json:
        print(
            json.dumps(
                {
                    "topic": args.topic,
                    "partitions_before": before,
                    "partitions": len(topic.partitions),
                }
            )
        )
    else:
        print(f"Altered topic {args.topic}: {before} -> {len(topic.partitions)} partitions.")
    return 0


def offsets(args: argparse.Namespace) -> int:
    from replication.clients.offsets import ListedOffset, offset_spec

    spec = offset_spec(args.time)  # ValueError: one line, before any request
    with AdminSession(args) as session:
        targets = _partitions_of(session, args.topic, args.partition)
        with session.reachable():
            results = session.admin.list_offsets(dict.fromkeys(targets, spec))
    failed = 0
    rows: list[dict[str, Any]] = []
    for tp in sorted(results, key=tp_key):
        result = results[tp]
        if isinstance(result, ListedOffset):
            rows.append({**tp_doc(tp), "offset": result.offset, "timestamp": result.timestamp})
        else:
            failed += 1
            rows.append({**tp_doc(tp, result)})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        # kafka-get-offsets prints TOPIC:PARTITION:OFFSET, one line each.
        for row in rows:
            value = row["offset"] if "offset" in row else f"error {row['error']}"
            print(f"{row['topic']}:{row['partition']}:{value}")
    return 1 if failed else 0


def tp_key(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)


def tps_text(tps: list[TopicPartition]) -> str:
    shown = ", ".join(str(tp) for tp in tps[:50])
    return shown + (f" ... ({len(tps)} partitions)" if len(tps) > 50 else "")


def tp_doc(tp: TopicPartition, error: KraftError | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"topic": tp.topic, "partition": tp.partition}
    if error is not None:
        doc["error"] = error.code.name
        doc["message"] = error.message
    return doc


__all__ = ["add_actions"]
