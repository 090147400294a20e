"""``kraft topics create|list|describe|delete|alter-config``: like ``kafka-topics`` and
``kafka-configs --entity-type topics``; ``elect-leaders``, ``alter`` and ``offsets`` are in
`kraft.cli.topics_admin`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kraft.arguments import positive_int
from kraft.cli._connect import (
    AdminSession,
    add_bootstrap_arguments,
    add_timeout_argument,
    parse_key_values,
)

if TYPE_CHECKING:
    from kraft.controller.messages import TopicMetadata

_EPILOG = """\
examples:
  export KRAFT_BOOTSTRAP=127.0.0.1:9192,127.0.0.1:9193,127.0.0.1:9194
  kraft topics create events --partitions 6 --replication-factor 3 \\
      --config min.insync.replicas=2
  kraft topics create ledger --replication-factor 3 --config replication.mode=quorum
  kraft topics list
  kraft topics describe events
  kraft topics alter-config events --config retention.ms=3600000
  kraft topics alter events --partitions 12
  kraft topics offsets events --time earliest
  kraft topics describe --under-min-isr-partitions
  kraft topics elect-leaders --type preferred
  kraft topics delete events

Every action takes --bootstrap (brokers, which forward admin requests to the active
controller) or --bootstrap-controller, else $KRAFT_BOOTSTRAP / $KRAFT_BOOTSTRAP_CONTROLLER.
"""


def _common(p: argparse.ArgumentParser, *, json_output: bool = False) -> None:
    add_bootstrap_arguments(p)
    add_timeout_argument(p)
    if json_output:
        p.add_argument("--json", action="store_true", help="print JSON")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "topics",
        help="create, list, describe, alter, delete topics; offsets, leader elections",
        description="Manage topics (kafka-topics).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tsub = p.add_subparsers(dest="topics_command", metavar="ACTION", required=True)

    def action(name: str, help_text: str, example: str) -> argparse.ArgumentParser:
        return tsub.add_parser(  # type: ignore[no-any-return]
            name,
            help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".",
            epilog=f"example:\n  {example}\n",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    c = action(
        "create",
        "create a topic and wait until every partition has a leader",
        "kraft topics create events --partitions 6 --replication-factor 3 "
        "--config min.insync.replicas=2",
    )
    c.add_argument("topic")
    # NB: -1 ("the cluster's default", KIP-464) is what omitting the flag sends; typed, it is
    # refused like 0, since it would quietly give a one-partition topic.
    c.add_argument(
        "--partitions",
        type=positive_int,
        default=None,
        help="partition count, at least 1 (default: num.partitions)",
    )
    c.add_argument(
        "--replication-factor",
        type=positive_int,
        default=None,
        help="replicas per partition, at least 1 (default: default.replication.factor)",
    )
    c.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config (repeatable), e.g. min.insync.replicas=2; replication.mode=quorum "
        "makes each partition a Raft group of its replicas (chosen here, for good)",
    )
    c.add_argument("--if-not-exists", action="store_true", help="succeed if it already exists")
    _common(c, json_output=True)
    c.set_defaults(handler=create)

    ls = action("list", "list the topics' names", "kraft topics list --bootstrap 127.0.0.1:9192")
    ls.add_argument(
        "--internal",
        action="store_true",
        help="include internal topics (__consumer_offsets)",
    )
    _common(ls, json_output=True)
    ls.set_defaults(handler=list_topics)

    d = action(
        "describe",
        "show partitions: leader, leader epoch, replicas, ISR, under-replicated",
        "kraft topics describe events --under-replicated-partitions",
    )
    d.add_argument("topic", nargs="?", help="one topic (default: every topic)")
    only = d.add_mutually_exclusive_group()
    only.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="only partitions whose ISR is smaller than their replica set",
    )
    only.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="only partitions whose ISR is smaller than their min.insync.replicas "
        "(acks=all produce fails there)",
    )
    only.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="only partitions without a leader",
    )
    _common(d, json_output=True)
    d.set_defaults(handler=describe)

    x = action("delete", "delete a topic", "kraft topics delete events")
    x.add_argument("topic")
    x.add_argument("--if-exists", action="store_true", help="succeed if there is no such topic")
    _common(x, json_output=True)
    x.set_defaults(handler=delete)

    a = action(
        "alter-config",
        "set or delete topic configs (KIP-339 IncrementalAlterConfigs, all or nothing)",
        "kraft topics alter-config events --config retention.ms=3600000 "
        "--delete-config min.insync.replicas",
    )
    a.add_argument("topic")
    a.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config (repeatable)",
    )
    a.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="KEY",
        help="return a config to its default (repeatable)",
    )
    _common(a, json_output=True)
    a.set_defaults(handler=alter_config)

    from kraft.cli import topics_admin, topics_reassign

    topics_admin.add_actions(action, _common)
    topics_reassign.add_action(action, _common)


def create(args: argparse.Namespace) -> int:
    from storage.errors import TopicAlreadyExistsError

    if args.topic == "__consumer_offsets":
        raise ValueError(
            "__consumer_offsets is internal: the brokers create it for consumer groups "
            "(offsets.topic.num.partitions)"
        )
    configs = parse_key_values(args.config, "--config")
    partitions = -1 if args.partitions is None else args.partitions
    replication_factor = -1 if args.replication_factor is None else args.replication_factor
    with AdminSession(args) as session:
        try:
            with session.reachable():
                session.admin.create_topic(args.topic, partitions, replication_factor, configs)
        except TopicAlreadyExistsError:
            if not args.if_not_exists:
                raise
        with session.reachable():
            topic = session.admin.wait_for_leaders(args.topic, timeout=args.timeout)
    if args.json:
        print(json.dumps(_topic_doc(topic)))
    else:
        print(
            f"Created topic {args.topic} ({len(topic.partitions)} partitions, "
            f"replication factor {_replication_factor(topic)})."
        )
    return 0


def list_topics(args: argparse.Namespace) -> int:
    from kraft.types import INTERNAL_TOPICS

    with AdminSession(args) as session:
        names = sorted(
            t.name
            for t in session.describe_cluster().topics
            if args.internal or t.name not in INTERNAL_TOPICS
        )
    if args.json:
        print(json.dumps(names))
    else:
        for name in names:
            print(name)
    return 0


def describe(args: argparse.Namespace) -> int:
    with AdminSession(args) as session:
        if args.topic is not None:
            topics = [session.describe_topic(args.topic)]
        else:
            topics = sorted(session.describe_cluster().topics, key=lambda t: t.name)
        docs = [_topic_doc(t) for t in topics]
        if args.under_min_isr_partitions:
            with session.reachable():
                _add_min_isr(session, docs)
    keep = _partition_filter(args)
    if keep is not None:
        for doc in docs:
            doc["partitions"] = [p for p in doc["partitions"] if keep(p)]
    if args.json:
        print(json.dumps(docs[0] if args.topic is not None else docs, indent=2))
        return 0
    out = sys.stdout
    for doc in docs:
        if keep is not None and not doc["partitions"]:
            continue
        quorum = doc["replication_mode"] == "quorum"
        print(
            f"Topic: {doc['name']}\tTopicId: {doc['topic_id']}\t"
            f"PartitionCount: {doc['partition_count']}\t"
            f"ReplicationFactor: {doc['replication_factor']}\t"
            f"ReplicationMode: {doc['replication_mode']}",
            file=out,
        )
        if quorum:
            print(f"\t{QUORUM_NOTE}", file=out)
        for p in doc["partitions"]:
            flags = []
            if p["leader"] < 0:
                flags.append("offline")
            if p["under_replicated"]:
                flags.append("under-replicated")
            if p.get("under_min_isr"):
                flags.append("under-min-isr")
            print(
                f"\tTopic: {doc['name']}\tPartition: {p['partition']}\t"
                f"Leader: {p['leader'] if p['leader'] >= 0 else 'none'}\t"
                f"LeaderEpoch: {p['leader_epoch']}\t"
                f"Replicas: {_ids(p['replicas'])}\t"
                + (
                    f"Voters: {_ids(p['voters'])}"
                    if quorum
                    else f"Isr: {_ids(p['isr'])}\tElr: {_ids(p['elr'])}\t"
                    f"LastKnownElr: {_ids(p['last_known_elr'])}"
                )
                + (
                    f"\tAddingReplicas: {_ids(p['adding_replicas'])}"
                    if p["adding_replicas"]
                    else ""
                )
                + (
                    f"\tRemovingReplicas: {_ids(p['removing_replicas'])}"
                    if p["removing_replicas"]
                    else ""
                )
                + (f"\t({', '.join(flags)})" if flags else ""),
                file=out,
            )
    return 0


def delete(args: argparse.Namespace) -> int:
    from storage.errors import UnknownTopicOrPartitionError

    with AdminSession(args) as session:
        try:
            with session.reachable():
                session.admin.delete_topic(args.topic)
        except UnknownTopicOrPartitionError:
            if args.if_exists:
                if args.json:
                    print(json.dumps({"topic": args.topic, "deleted": False}))
                return 0
            raise UnknownTopicOrPartitionError(f"unknown topic {args.topic!r}") from None
    if args.json:
        print(json.dumps({"topic": args.topic, "deleted": True}))
    else:
        print(f"Deleted topic {args.topic}.")
    return 0


def alter_config(args: argparse.Namespace) -> int:
    from storage.errors import UnknownTopicOrPartitionError

    configs = parse_key_values(args.config, "--config")
    if not configs and not args.delete_config:
        raise ValueError("nothing to change: give --config KEY=VALUE or --delete-config KEY")
    with AdminSession(args) as session:
        try:
            with session.reachable():
                session.admin.alter_topic_config(args.topic, configs, args.delete_config)
        except UnknownTopicOrPartitionError:
            raise UnknownTopicOrPartitionError(f"unknown topic {args.topic!r}") from None
    if args.json:
        doc = {"topic": args.topic, "set": configs, "deleted": list(args.delete_config)}
        print(json.dumps(doc))
        return 0
    changes = [f"{k}={v}" for k, v in configs.items()] + [f"-{k}" for k in args.delete_config]
    print(f"Altered configs of topic {args.topic}: {', '.join(changes)}.")
    return 0


def _partition_filter(args: argparse.Namespace) -> Callable[[dict[str, Any]], bool] | None:
    """Which partitions ``describe`` keeps (kafka-topics' filters), None: all of them."""
    if args.under_replicated_partitions:
        return lambda p: bool(p["under_replicated"])
    if args.under_min_isr_partitions:
        return lambda p: bool(p["under_min_isr"])
    if args.unavailable_partitions:
        return lambda p: bool(p["leader"] < 0)
    return None


def _add_min_isr(session: AdminSession, docs: list[dict[str, Any]]) -> None:
    """Each partition's ``under_min_isr``: its ISR is smaller than the topic's effective
    ``min.insync.replicas`` (one DescribeConfigs per topic)."""
    for doc in docs:
        entries = session.admin.describe_configs("topic", doc["name"], timeout=session.timeout)
        min_isr = next(int(e.value) for e in entries if e.name == "min.insync.replicas")
        doc["min_insync_replicas"] = min_isr
        for p in doc["partitions"]:
            p["under_min_isr"] = len(p["isr"]) < min_isr


# -- rendering ---------------------------------------------------------------------------------


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids) or "-"


def _replication_factor(topic: TopicMetadata) -> int:
    return max((len(p.replicas) for p in topic.partitions), default=0)


QUORUM_NOTE = (
    "(quorum-replicated: each partition is a Raft group of its replicas, the Voters; its leader "
    "and leader epoch come from the Raft vote, not the controller; there is no ISR: a write "
    "commits on a majority of the voters)"
)


def _topic_doc(topic: TopicMetadata) -> dict[str, Any]:
    partitions = sorted(topic.partitions, key=lambda p: p.partition)
    mode = topic.replication_mode or "isr"
    quorum = mode == "quorum"
    return {
        "name": topic.name,
        "topic_id": topic.topic_id,
        "partition_count": len(partitions),
        "replication_factor": _replication_factor(topic),
        "replication_mode": mode,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "leader_elected_by": "raft_vote" if quorum else "controller",
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                **({"voters": list(p.replicas)} if quorum else {}),
                "offline_replicas": list(p.offline_replicas),
                "adding_replicas": list(p.adding_replicas),
                "removing_replicas": list(p.removing_replicas),
                # KIP-966: eligible leader replicas and the last known leader (ISR topics).
                "elr": list(p.elr),
                "last_known_elr": list(p.last_known_elr),
                # A quorum partition has no ISR: a replica with its log offline is missing.
                # During a reassignment the replicas being added do not count yet (Kafka's
                # replication factor of an ongoing reassignment).
                "under_replicated": (
                    bool(p.offline_replicas)
                    if quorum
                    else len(p.isr) < len(p.replicas) - len(p.adding_replicas)
                ),
            }
            for p in partitions
        ],
    }
