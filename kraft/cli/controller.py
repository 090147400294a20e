"""``kraft controller``: run one controller quorum member (``process.roles=controller``)."""

from __future__ import annotations

import argparse
from typing import Any

from kraft.cli._node import add_node_arguments, add_override_argument, node_properties

_EPILOG = """\
examples:
  kraft controller --config config/controller-1.properties
  kraft controller --node-id 1 \\
      --controller-quorum-voters 1@127.0.0.1:9091,2@127.0.0.1:9092,3@127.0.0.1:9093 \\
      --data-dir /tmp/kraft/controller-1
  kraft controller --config c1.properties --override broker.session.timeout.ms=6000
  kraft controller --node-id 1 --data-dir /var/lib/kraft/controller \\
      --controller-quorum-voters 1@10.0.0.1:9091,2@10.0.0.2:9091,3@10.0.0.3:9091

A properties file uses Kafka's keys: node.id, controller.quorum.voters, listeners,
log.dirs, broker.session.timeout.ms, metadata.log.max.record.bytes.between.snapshots and
the controller.quorum.* Raft timeouts. Flags override the file. SIGTERM stops the node
gracefully (a leader hands over with EndQuorumEpoch) and exits 0. On separate hosts every
address is the host's own, never 127.0.0.1 (docs/operations.md: a multi-machine deployment,
TLS across hosts, ports to open, timeouts on a real network).
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "controller",
        help="run a controller quorum member (Raft + controller API + health, one port)",
        description="Run one member of the KRaft controller quorum.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_node_arguments(
        p,
        node_id_help="node.id",
        listen_help="listeners (default: this node's voter address)",
        data_dir_help="log.dirs: the metadata log's directory",
    )
    add_override_argument(p, example="controller.quorum.fetch.timeout.ms=500")
    p.set_defaults(handler=run)


def properties_from_args(args: argparse.Namespace) -> dict[str, str]:
    """The file's properties, overridden by the flags."""
    return node_properties(args, data_dir_replaces=("metadata.log.dir",))


def run(args: argparse.Namespace) -> int:
    from kraft.cli._node import check_ports_free, claim_data_dir
    from kraft.controller.node_config import ControllerNodeConfig
    from kraft.controller.server import run_controller

    config = ControllerNodeConfig.from_properties(properties_from_args(args))
    # The lock first: a second start of a running node fails on it, before anything is touched.
    claim_data_dir(config.data_dir)  # .lock, then kraft.pid (`kraft cluster status|down`)
    check_ports_free(config.listen, config.metrics_port)
    return run_controller(config)
