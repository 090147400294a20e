"""``kraft configs describe|alter``: topic and broker configs, like ``kafka-configs.sh``."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from kraft.arguments import non_negative_int
from kraft.cli._connect import (
    AdminSession,
    add_bootstrap_arguments,
    add_timeout_argument,
    parse_key_values,
)

if TYPE_CHECKING:
    from kraft.controller.messages import DescribeConfigsEntry

_EPILOG = """\
examples:
  export KRAFT_BOOTSTRAP=127.0.0.1:9192,127.0.0.1:9193,127.0.0.1:9194
  kraft configs describe --topic events            # the topic's own settings
  kraft configs describe --topic events --all      # every key, its value and its source
  kraft configs describe --broker 101 --all
  kraft configs alter --topic events --add-config retention.ms=3600000,segment.bytes=1048576
  kraft configs alter --broker-defaults --add-config log.retention.ms=86400000
  kraft configs alter --topic events --delete-config retention.ms

Sources, most specific first (Kafka's names): DYNAMIC_TOPIC_CONFIG (set on the topic),
DYNAMIC_BROKER_CONFIG (set on one broker), DYNAMIC_DEFAULT_BROKER_CONFIG (set with
--broker-defaults; for a topic key, under its broker name: log.retention.ms for retention.ms),
DEFAULT_CONFIG. A broker's properties file (Kafka's STATIC_BROKER_CONFIG) is not shown: the
controllers answer, and they never see those files.
"""


def _entity(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", metavar="TOPIC", help="a topic")
    which.add_argument("--broker", type=non_negative_int, metavar="ID", help="one broker")
    which.add_argument(
        "--broker-defaults",
        action="store_true",
        help="the cluster-wide default of every broker (and of every topic key's synonym)",
    )


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "configs",
        help="describe and alter topic and broker configs (kafka-configs)",
        description="Describe and alter topic and broker configs (kafka-configs).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    csub = p.add_subparsers(dest="configs_command", metavar="ACTION", required=True)
    d = csub.add_parser(
        "describe",
        help="show configs with their effective values and sources",
        description="Show a topic's or a broker's configs: without --all only the ones set "
        "somewhere (not defaults), with --all every key.",
        epilog="example:\n  kraft configs describe --topic events --all\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _entity(d)
    d.add_argument("--all", action="store_true", help="every key, defaults included")
    add_bootstrap_arguments(d)
    add_timeout_argument(d)
    d.add_argument("--json", action="store_true", help="print JSON")
    d.set_defaults(handler=describe)
    a = csub.add_parser(
        "alter",
        help="set or delete configs (KIP-339 IncrementalAlterConfigs, all or nothing)",
        description="Set or delete configs of a topic or a broker, all or nothing.",
        epilog="example:\n  kraft configs alter --topic events --add-config retention.ms=3600000 "
        "--delete-config segment.ms\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _entity(a)
    a.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="K=V[,K=V...]",
        help="set configs (repeatable; comma-separated)",
    )
    a.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="K[,K...]",
        help="return configs to their default (repeatable; comma-separated)",
    )
    add_bootstrap_arguments(a)
    add_timeout_argument(a)
    a.add_argument("--json", action="store_true", help="print JSON")
    a.set_defaults(handler=alter)


def _resource(args: argparse.Namespace) -> tuple[str, str, str]:
    """(resource type, resource name, how to name it to a person)."""
    if args.topic is not None:
        return "topic", args.topic, f"topic {args.topic}"
    if args.broker is not None:
        return "broker", str(args.broker), f"broker {args.broker}"
    return "broker", "", "the default broker (cluster-wide)"


def _entry_doc(entry: DescribeConfigsEntry) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": entry.value,
        "source": entry.source.name,
        "synonyms": [
            {"name": s.name, "value": s.value, "source": s.source.name} for s in entry.synonyms
        ],
    }


def describe(args: argparse.Namespace) -> int:
    from kraft.controller.messages import ConfigSource

    kind, name, label = _resource(args)
    with AdminSession(args) as session, session.reachable():
        entries = session.admin.describe_configs(kind, name, include_synonyms=True)
    if not args.all:
        entries = tuple(e for e in entries if e.source is not ConfigSource.DEFAULT_CONFIG)
    if args.json:
        print(
            json.dumps(
                {
                    "resource_type": kind,
                    "resource_name": name,
                    "configs": [_entry_doc(e) for e in entries],
                },
                indent=2,
            )
        )
        return 0
    print(f"{'All' if args.all else 'Dynamic'} configs for {label} are:")
    for e in entries:
        synonyms = ", ".join(f"{s.source.name}:{s.name}={s.value}" for s in e.synonyms)
        print(f"  {e.name}={e.value} source={e.source.name} synonyms={{{synonyms}}}")
    return 0


def alter(args: argparse.Namespace) -> int:
    kind, name, label = _resource(args)
    items = [part for item in args.add_config for part in item.split(",") if part.strip()]
    configs = parse_key_values(items, "--add-config")
    deletes = [k.strip() for item in args.delete_config for k in item.split(",") if k.strip()]
    if not configs and not deletes:
        raise ValueError("nothing to change: give --add-config K=V or --delete-config K")
    with AdminSession(args) as session, session.reachable():
        if kind == "topic":
            session.admin.alter_topic_config(name, configs, deletes)
        else:
            session.admin.alter_broker_config(name, configs, deletes)
    if args.json:
        print(
            json.dumps(
                {"resource_type": kind, "resource_name": name, "set": configs, "deleted": deletes}
            )
        )
    else:
        changes = [f"{k}={v}" for k, v in configs.items()] + [f"-{k}" for k in deletes]
        print(f"Completed updating config for {label}: {', '.join(changes)}.")
    return 0


__all__ = ["add_parser"]
