"""``kraft controller``: run one controller quorum member (``process.roles=controller``)."""

from __future__ import annotations

import argparse
from typing import Any

_EPILOG = """\
examples:
  kraft controller --config config/controller-1.properties
  kraft controller --node-id 1 \\
      --controller-quorum-voters 1@127.0.0.1:9091,2@127.0.0.1:9092,3@127.0.0.1:9093 \\
      --data-dir /tmp/kraft/controller-1
  kraft controller --config c1.properties --override broker.session.timeout.ms=6000

A properties file uses Kafka's keys: node.id, controller.quorum.voters, listeners,
log.dirs, broker.session.timeout.ms, metadata.log.max.record.bytes.between.snapshots and
the controller.quorum.* Raft timeouts. Flags override the file. SIGTERM stops the node
gracefully (a leader hands over with EndQuorumEpoch) and exits 0.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "controller",
        help="run a controller quorum member (Raft + controller API + health, one port)",
        description="Run one member of the KRaft controller quorum.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", metavar="FILE", help="a Kafka-style properties file")
    p.add_argument("--node-id", type=int, help="node.id")
    p.add_argument(
        "--controller-quorum-voters",
        metavar="ID@HOST:PORT,...",
        help="controller.quorum.voters, e.g. 1@127.0.0.1:9091,2@127.0.0.1:9092",
    )
    p.add_argument(
        "--listen", metavar="HOST:PORT", help="listeners (default: this node's voter address)"
    )
    p.add_argument("--data-dir", metavar="DIR", help="log.dirs: the metadata log's directory")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set any property (repeatable), e.g. controller.quorum.fetch.timeout.ms=500",
    )
    p.set_defaults(handler=run)


def properties_from_args(args: argparse.Namespace) -> dict[str, str]:
    """The file's properties, overridden by the flags."""
    from kraft.config import load_properties

    props = load_properties(args.config) if args.config else {}
    flags = {
        "node.id": None if args.node_id is None else str(args.node_id),
        "controller.quorum.voters": args.controller_quorum_voters,
        "listeners": args.listen,
        "log.dirs": args.data_dir,
    }
    props.update({k: v for k, v in flags.items() if v is not None})
    if args.data_dir is not None:
        props.pop("metadata.log.dir", None)
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--override expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    return props


def run(args: argparse.Namespace) -> int:
    from kraft.config import ControllerNodeConfig
    from kraft.controller.server import run_controller

    config = ControllerNodeConfig.from_properties(properties_from_args(args))
    return run_controller(config)
