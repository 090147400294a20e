"""``kraft features describe|upgrade|downgrade|disable``: the cluster's feature levels (KIP-584),
like ``kafka-features.sh``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from kraft.cli._connect import AdminSession, add_bootstrap_arguments, add_timeout_argument

_EPILOG = """\
examples:
  export KRAFT_BOOTSTRAP=127.0.0.1:9192
  kraft features describe
  kraft features downgrade --feature transaction.version=1
  kraft features upgrade --feature transaction.version=2 --dry-run
  kraft features upgrade --feature transaction.version=2

A level goes up with upgrade and down with downgrade (or disable, to 0); the active controller
refuses a level outside its own or any registered broker's supported range, and answers once
the level is committed (docs/transactions.md). Exits 1 with the controller's reason when it
refuses; nothing changes then.
"""


def feature_level(text: str) -> tuple[str, int]:
    """``NAME=LEVEL`` (LEVEL a short, as Kafka's tool parses it)."""
    name, sep, level = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=LEVEL, got {text!r}")
    try:
        value = int(level.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{level.strip()!r} is not a level") from None
    if not -(2**15) <= value < 2**15:
        raise argparse.ArgumentTypeError(f"level {value} is out of range")
    return name.strip(), value


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "features",
        help="describe and change feature levels (kafka-features)",
        description="Describe and change the cluster's finalized feature levels (KIP-584).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fsub = p.add_subparsers(dest="features_command", metavar="ACTION", required=True)
    d = fsub.add_parser(
        "describe",
        help="each feature's supported range, finalized level and epoch",
        description="Describe the features: supported range, finalized level, epoch.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("--json", action="store_true", help="print one JSON object")
    _common(d)
    d.set_defaults(handler=describe)
    for action, help_text in (
        ("upgrade", "raise (or keep) feature levels"),
        ("downgrade", "lower (or keep) feature levels"),
        ("disable", "set features to level 0"),
    ):
        a = fsub.add_parser(
            action,
            help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".",
            epilog=_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        a.add_argument(
            "--feature",
            action="append",
            required=True,
            type=str if action == "disable" else feature_level,
            metavar="NAME" if action == "disable" else "NAME=LEVEL",
            help="repeatable",
        )
        if action != "upgrade":
            a.add_argument(
                "--unsafe", action="store_true", help="an unsafe downgrade (Kafka's flag)"
            )
        a.add_argument(
            "--dry-run", action="store_true", help="check with the controller, change nothing"
        )
        _common(a)
        a.set_defaults(handler=update, action=action)


def _common(p: argparse.ArgumentParser) -> None:
    add_bootstrap_arguments(p)
    add_timeout_argument(p)


def describe(args: argparse.Namespace) -> int:
    with AdminSession(args) as session, session.reachable():
        features = session.admin.describe_features()
    names = sorted(set(features.supported) | set(features.finalized))
    if args.json:
        doc = {
            "epoch": features.epoch,
            "features": {
                n: {
                    "supported": list(features.supported.get(n, (0, 0))),
                    "finalized": features.finalized.get(n, 0),
                }
                for n in names
            },
        }
        print(json.dumps(doc))
        return 0
    epoch = str(features.epoch) if features.epoch >= 0 else "-"
    for name in names:
        low, high = features.supported.get(name, (0, 0))
        print(
            f"Feature: {name}\tSupportedMinVersion: {low}\tSupportedMaxVersion: {high}\t"
            f"FinalizedVersionLevel: {features.finalized.get(name, 0)}\tEpoch: {epoch}"
        )
    return 0


def update(args: argparse.Namespace) -> int:
    pairs = [(f, 0) for f in args.feature] if args.action == "disable" else args.feature
    levels = dict(pairs)
    if len(levels) != len(pairs):
        raise ValueError("a feature was given more than once")
    with AdminSession(args) as session, session.reachable():
        session.admin.update_features(
            levels,
            downgrade=args.action != "upgrade",
            unsafe=getattr(args, "unsafe", False),
            validate_only=args.dry_run,
        )
    verb = "can be" if args.dry_run else "was"
    for name, level in sorted(levels.items()):
        done = "disabled" if args.action == "disable" else f"{args.action}d to {level}"
        print(f"{name} {verb} {done}.")
    return 0
