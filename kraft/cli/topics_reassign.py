"""``kraft topics reassign``: move partitions between brokers (KIP-455), like
``kafka-reassign-partitions.sh``, with its reassignment JSON::

    {"version": 1,
     "partitions": [{"topic": "events", "partition": 0, "replicas": [2, 3, 4]}]}

``--execute`` starts the plan's reassignments (and prints the current assignment, to roll
back with), ``--verify`` reports each partition as complete, in progress or different,
``--cancel`` reverts the ones in progress to their original replicas, ``--generate`` proposes a
plan that spreads the named topics' partitions over the named brokers. `kraft.cli.topics`
registers it beside the other actions.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraft.arguments import positive_int
from kraft.cli._connect import AdminSession
from kraft.cli.topics_admin import tp_doc, tp_key, tps_text

if TYPE_CHECKING:
    from kraft.types import TopicPartition

Action = Callable[[str, str, str], argparse.ArgumentParser]

PLAN_VERSION = 1
MAX_PLAN_BYTES = 16 << 20
"""A plan file larger than this is refused before it is parsed."""
_THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")

_EXAMPLE = """kraft topics reassign --plan move.json --execute --throttle 10000000
  kraft topics reassign --plan move.json --verify
  kraft topics reassign --plan move.json --cancel
  kraft topics reassign --generate --topics events --brokers 2,3,4

move.json (Kafka's reassignment JSON; the first replica is the preferred leader):
  {"version": 1, "partitions": [{"topic": "events", "partition": 0, "replicas": [2, 3, 4]}]}"""


def add_action(action: Action, common: Callable[..., None]) -> None:
    """Register ``reassign`` with ``action(name, help, example)`` of `kraft.cli.topics`."""
    r = action(
        "reassign",
        "move partitions to other brokers: execute, verify or cancel a plan "
        "(kafka-reassign-partitions)",
        _EXAMPLE,
    )
    mode = r.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--execute",
        action="store_true",
        help="start the plan's reassignments (a partition already moving gets the new target)",
    )
    mode.add_argument(
        "--verify",
        action="store_true",
        help="report each partition of the plan (exit 0 only when all are complete); once all "
        "are, remove the throttle --execute --throttle set",
    )
    mode.add_argument(
        "--cancel",
        action="store_true",
        help="revert the plan's reassignments in progress to their original replicas",
    )
    mode.add_argument(
        "--generate",
        action="store_true",
        help="print a plan that spreads --topics over --brokers (replication factors kept)",
    )
    r.add_argument("--plan", metavar="FILE", type=Path, help="the reassignment JSON")
    r.add_argument("--topics", metavar="T1,T2", help="--generate: the topics to move")
    r.add_argument("--brokers", metavar="ID,ID", help="--generate: the brokers to use")
    r.add_argument(
        "--throttle",
        type=positive_int,
        metavar="BYTES_PER_S",
        help="--execute: set leader/follower.replication.throttled.rate (cluster default) "
        "for the reassignment traffic; --verify removes it once every move is complete",
    )
    common(r, json_output=True)
    r.set_defaults(handler=reassign)


def reassign(args: argparse.Namespace) -> int:
    if args.generate:
        if args.plan is not None or args.throttle is not None:
            raise ValueError("--generate takes --topics and --brokers, not --plan or --throttle")
        return _generate(args)
    if args.plan is None:
        raise ValueError("--execute, --verify and --cancel need --plan FILE")
    if args.topics or args.brokers:
        raise ValueError("--topics and --brokers are for --generate")
    if args.throttle is not None and not args.execute:
        raise ValueError("--throttle goes with --execute")
    plan = read_plan(args.plan)
    if args.execute:
        return _execute(args, plan)
    if args.verify:
        return _verify(args, plan)
    return _cancel(args, plan)


def read_plan(path: Path) -> dict[TopicPartition, tuple[int, ...]]:
    """The target replicas of each partition in a reassignment JSON file.

    Raises:
        ValueError: the file cannot be read or is not a valid plan (the message says where).
    """
    from kraft.types import TopicPartition

    if path.stat().st_size > MAX_PLAN_BYTES:
        raise ValueError(f"{path}: larger than {MAX_PLAN_BYTES} bytes")
    try:
        doc = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ValueError(f'{path}: expected {{"version": 1, "partitions": [...]}}')
    if doc.get("version", PLAN_VERSION) != PLAN_VERSION:
        raise ValueError(f"{path}: unsupported version {str(doc.get('version'))[:20]}")
    plan: dict[TopicPartition, tuple[int, ...]] = {}
    for i, entry in enumerate(doc["partitions"]):
        where = f"{path}: partitions[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected an object")
        topic, partition, replicas = (
            entry.get("topic"),
            entry.get("partition"),
            entry.get("replicas"),
        )
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"{where}: topic must be a non-empty string")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise ValueError(f"{where}: partition must be an integer >= 0")
        if (
            not isinstance(replicas, list)
            or not replicas
            or not all(_is_int(r) and r >= 0 for r in replicas)
        ):
            raise ValueError(f"{where}: replicas must be a non-empty list of broker ids")
        if len(set(replicas)) != len(replicas):
            raise ValueError(f"{where}: replicas name a broker twice")
        tp = TopicPartition(topic, partition)
        if tp in plan:
            raise ValueError(f"{where}: {tp} is in the plan twice")
        plan[tp] = tuple(replicas)
    if not plan:
        raise ValueError(f"{path}: the plan has no partitions")
    return plan


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def plan_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> dict[str, Any]:
    """Kafka's reassignment JSON for ``assignment``, partitions in order."""
    return {
        "version": PLAN_VERSION,
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(assignment[tp])}
            for tp in sorted(assignment, key=tp_key)
        ],
    }


def _current(
    session: AdminSession, tps: Sequence[TopicPartition]
) -> dict[TopicPartition, tuple[int, ...]]:
    """Each partition's current replicas (a partition of an unknown topic is left out)."""
    from storage.errors import ErrorCode

    topics = sorted({tp.topic for tp in tps})
    described = session.describe_cluster(topics).topics
    replicas = {
        (t.name, p.partition): tuple(p.replicas)
        for t in described
        if t.error_code is ErrorCode.NONE
        for p in t.partitions
    }
    return {
        tp: replicas[(tp.topic, tp.partition)] for tp in tps if (tp.topic, tp.partition) in replicas
    }


def _execute(args: argparse.Namespace, plan: dict[TopicPartition, tuple[int, ...]]) -> int:
    with AdminSession(args) as session:
        current = _current(session, list(plan))
        with session.reachable():
            if args.throttle is not None:
                session.admin.alter_broker_config(
                    "", dict.fromkeys(_THROTTLE_KEYS, str(args.throttle))
                )
            results = session.admin.alter_partition_reassignments(plan)
    started = sorted((tp for tp, e in results.items() if e is None), key=tp_key)
    failed = {
        tp: e for tp, e in sorted(results.items(), key=lambda i: tp_key(i[0])) if e is not None
    }
    if args.json:
        print(
            json.dumps(
                {
                    "current": plan_json(current),
                    "started": [tp_doc(tp) for tp in started],
                    "failed": [tp_doc(tp, e) for tp, e in failed.items()],
                    "throttle": args.throttle,
                },
                indent=2,
            )
        )
    else:
        # The lines of Kafka's ReassignPartitionsCommand.
        print("Current partition replica assignment\n")
        print(json.dumps(plan_json(current)))
        print("\nSave this to use as the --plan of a rollback (--execute) if needed.\n")
        if args.throttle is not None:
            print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
        if started:
            print(f"Successfully started partition reassignments for {tps_text(started)}")
        for tp, e in failed.items():
            print(f"Error reassigning partition {tp}: {e.message} ({e.code.name})")
    return 1 if failed else 0


def _verify(args: argparse.Namespace, plan: dict[TopicPartition, tuple[int, ...]]) -> int:
    from kraft.controller.messages import ConfigSource

    with AdminSession(args) as session:
        with session.reachable():
            ongoing = session.admin.list_partition_reassignments(list(plan))
        current = _current(session, list(plan))
        states: dict[TopicPartition, str] = {}
        for tp in sorted(plan, key=tp_key):
            if tp in ongoing:
                states[tp] = "in_progress"
            elif tp not in current:
                states[tp] = "unknown"
            elif current[tp] == plan[tp]:
                states[tp] = "complete"
            else:
                states[tp] = "different"
        done = all(s == "complete" for s in states.values())
        cleared = False
        if done:
            with session.reachable():
                entries = session.admin.describe_configs("broker", "")
                if any(
                    e.name in _THROTTLE_KEYS
                    and e.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
                    for e in entries
                ):
                    session.admin.alter_broker_config("", delete_configs=_THROTTLE_KEYS)
                    cleared = True
    if args.json:
        rows = [
            {
                **tp_doc(tp),
                "status": states[tp],
                "target": list(plan[tp]),
                "replicas": list(current.get(tp, ())),
            }
            for tp in states
        ]
        print(
            json.dumps(
                {"partitions": rows, "complete": done, "throttle_removed": cleared}, indent=2
            )
        )
    else:
        print("Status of partition reassignment:")
        for tp, state in states.items():
            if state == "in_progress":
                print(f"Reassignment of partition {tp} is still in progress.")
            elif state == "complete":
                print(f"Reassignment of partition {tp} is completed.")
            elif state == "unknown":
                print(f"Partition {tp} does not exist.")
            else:
                print(
                    f"There is no active reassignment of partition {tp}, but replica set is "
                    f"{list(current[tp])} rather than {list(plan[tp])}."
                )
        if cleared:
            print("\nClearing broker-level throttles (the reassignment is complete).")
    return 0 if done else 1


def _cancel(args: argparse.Namespace, plan: dict[TopicPartition, tuple[int, ...]]) -> int:
    from storage.errors import NoReassignmentInProgressError

    with AdminSession(args) as session, session.reachable():
        results = session.admin.alter_partition_reassignments(dict.fromkeys(plan))
    cancelled = sorted((tp for tp, e in results.items() if e is None), key=tp_key)
    not_moving = sorted(
        (tp for tp, e in results.items() if isinstance(e, NoReassignmentInProgressError)),
        key=tp_key,
    )
    failed = {
        tp: e
        for tp, e in sorted(results.items(), key=lambda i: tp_key(i[0]))
        if e is not None and not isinstance(e, NoReassignmentInProgressError)
    }
    if args.json:
        print(
            json.dumps(
                {
                    "cancelled": [tp_doc(tp) for tp in cancelled],
                    "not_in_progress": [tp_doc(tp) for tp in not_moving],
                    "failed": [tp_doc(tp, e) for tp, e in failed.items()],
                },
                indent=2,
            )
        )
    else:
        if cancelled:
            print(f"Successfully cancelled partition reassignments for: {tps_text(cancelled)}")
        if not_moving:
            print(f"None of these partitions was being reassigned: {tps_text(not_moving)}")
        for tp, e in failed.items():
            print(f"Error cancelling the reassignment of {tp}: {e.message} ({e.code.name})")
    return 1 if failed else 0


def _int_list(value: str, flag: str) -> list[int]:
    try:
        ids = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{flag} expects comma-separated broker ids, got {value[:60]!r}") from None
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise ValueError(f"{flag} expects distinct broker ids >= 0, got {value[:60]!r}")
    return ids


def generate_plan(
    current: dict[TopicPartition, tuple[int, ...]], brokers: Sequence[int]
) -> dict[TopicPartition, tuple[int, ...]]:
    """Spread the partitions over ``brokers``, round robin, each keeping its replication
    factor: partition i of a topic gets ``brokers[(i + j) % n]`` for j < its factor (Kafka's
    rack-unaware assignment without the random start, so a plan is reproducible).

    Raises:
        ValueError: a partition has more replicas than there are brokers.
    """
    n = len(brokers)
    proposed: dict[TopicPartition, tuple[int, ...]] = {}
    for tp in sorted(current, key=tp_key):
        factor = len(current[tp])
        if factor > n:
            raise ValueError(f"{tp} has {factor} replicas but --brokers names only {n} brokers")
        proposed[tp] = tuple(brokers[(tp.partition + j) % n] for j in range(factor))
    return proposed


def _generate(args: argparse.Namespace) -> int:
    from kraft.types import TopicPartition

    if not args.topics or not args.brokers:
        raise ValueError("--generate needs --topics T1,T2 and --brokers ID,ID")
    topics = [t.strip() for t in args.topics.split(",") if t.strip()]
    if not topics:
        raise ValueError("--topics names no topic")
    brokers = _int_list(args.brokers, "--brokers")
    with AdminSession(args) as session:
        current: dict[TopicPartition, tuple[int, ...]] = {}
        for name in topics:
            for p in session.describe_topic(name).partitions:
                current[TopicPartition(name, p.partition)] = tuple(p.replicas)
    proposed = generate_plan(current, brokers)
    if args.json:
        print(
            json.dumps({"current": plan_json(current), "proposed": plan_json(proposed)}, indent=2)
        )
    else:
        print("Current partition replica assignment")
        print(json.dumps(plan_json(current)))
        print("\nProposed partition reassignment configuration")
        print(json.dumps(plan_json(proposed)))
    return 0


__all__ = ["add_action", "generate_plan", "plan_json", "read_plan"]
