"""``kraft broker``: run one broker (``process.roles=broker``)."""

from __future__ import annotations

import argparse
from typing import Any

_EPILOG = """\
examples:
  kraft broker --config config/broker-101.properties
  kraft broker --node-id 101 --listen 127.0.0.1:9192 --data-dir /tmp/kraft/broker-101 \\
      --controller-quorum-voters 1@127.0.0.1:9091,2@127.0.0.1:9092,3@127.0.0.1:9093
  kraft broker --config b.properties --override replica.lag.time.max.ms=10000

A properties file uses Kafka's keys: node.id, controller.quorum.voters, listeners, log.dirs,
broker.rack, broker.heartbeat.interval.ms, replica.lag.time.max.ms, replica.fetch.wait.max.ms,
replica.fetch.max.bytes. Flags override the file. Broker ids must differ from controller ids.
SIGTERM does a controlled shutdown (the controller moves leadership away first) and exits 0.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "broker",
        help="run a broker (partition replicas + Broker API + admin forwarding, one port)",
        description="Run one broker: a metadata observer that stores and replicates partitions.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", metavar="FILE", help="a Kafka-style properties file")
    p.add_argument("--node-id", type=int, help="node.id (distinct from every controller id)")
    p.add_argument(
        "--controller-quorum-voters",
        metavar="ID@HOST:PORT,...",
        help="controller.quorum.voters, e.g. 1@127.0.0.1:9091,2@127.0.0.1:9092",
    )
    p.add_argument("--listen", metavar="HOST:PORT", help="listeners: the address to serve on")
    p.add_argument("--data-dir", metavar="DIR", help="log.dirs: partition logs and metadata")
    p.add_argument("--rack", metavar="RACK", help="broker.rack")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set any property (repeatable), e.g. replica.lag.time.max.ms=10000",
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
        "broker.rack": args.rack,
    }
    props.update({k: v for k, v in flags.items() if v is not None})
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--override expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    return props


def run(args: argparse.Namespace) -> int:
    from replication.broker import BrokerNodeConfig, run_broker

    return run_broker(BrokerNodeConfig.from_properties(properties_from_args(args)))
