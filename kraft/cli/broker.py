"""``kraft broker``: run one broker (``process.roles=broker``)."""

from __future__ import annotations

import argparse
from typing import Any

from kraft.cli._node import add_node_arguments, add_override_argument, node_properties

_EPILOG = """\
examples:
  kraft broker --config config/broker-101.properties
  kraft broker --node-id 101 --listen 127.0.0.1:9192 --data-dir /tmp/kraft/broker-101 \\
      --controller-quorum-voters 1@127.0.0.1:9091,2@127.0.0.1:9092,3@127.0.0.1:9093
  kraft broker --config b.properties --override replica.lag.time.max.ms=10000
  kraft broker --node-id 101 --listen 10.0.0.11:9092 --data-dir /var/lib/kraft/broker \\
      --controller-quorum-voters 1@10.0.0.1:9091,2@10.0.0.2:9091,3@10.0.0.3:9091

A properties file uses Kafka's keys: node.id, controller.quorum.voters, listeners, log.dirs,
broker.rack, broker.heartbeat.interval.ms, replica.lag.time.max.ms, replica.fetch.wait.max.ms,
replica.fetch.max.bytes. Flags override the file. Broker ids must differ from controller ids.
SIGTERM does a controlled shutdown (the controller moves leadership away first) and exits 0.
On separate hosts listen on (or advertise) an address the other hosts reach, never 127.0.0.1
(docs/operations.md: a multi-machine deployment).
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "broker",
        help="run a broker (partition replicas + Broker API + admin forwarding, one port)",
        description="Run one broker: a metadata observer that stores and replicates partitions.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_node_arguments(
        p,
        node_id_help="node.id (distinct from every controller id)",
        listen_help="listeners: the address to serve on",
        data_dir_help="log.dirs: partition logs and metadata",
    )
    p.add_argument("--rack", metavar="RACK", help="broker.rack")
    add_override_argument(p, example="replica.lag.time.max.ms=10000")
    p.set_defaults(handler=run)


def properties_from_args(args: argparse.Namespace) -> dict[str, str]:
    """The file's properties, overridden by the flags."""
    return node_properties(args, {"broker.rack": args.rack})


def run(args: argparse.Namespace) -> int:
    from kraft.cli._node import check_ports_free, claim_data_dir
    from replication.broker import BrokerNodeConfig, run_broker

    config = BrokerNodeConfig.from_properties(properties_from_args(args))
    # The lock first: a second start of a running node fails on it, before anything is touched.
    claim_data_dir(config.data_dir)  # .lock, then kraft.pid (`kraft cluster status|down`)
    check_ports_free(config.listen, config.metrics_port, [k.listen for k in config.kafka_listeners])
    return run_broker(config)
