"""``kraft netns``: a cluster with one node per network namespace and real network faults
between them (`kraft.cluster.netns`, `kraft.cluster.netns_cluster`; needs root)."""

from __future__ import annotations

import argparse
import json
from typing import Any

_UP_EPILOG = """\
examples:
  sudo kraft netns up --controllers 3 --brokers 3 --tls --dir /tmp/kraft-netns
  sudo kraft netns up --controller-config controller.quorum.fetch.timeout.ms=2000

Makes a bridge with no uplink on a free 10.77.X.0/24 (this machine is .1), one network
namespace per node (.10, .11, ...), writes one properties file per node under DIR/config
exactly as docs/operations.md's multi-machine section does (controllers listen on :9091,
brokers on :9092 of their own address and serve the Kafka protocol on :9192 for any Kafka
client; with --tls, certificates from `kraft certs create --san` name each node's address and
both broker listeners are SSL), and runs `kraft controller|broker --config FILE` in each
namespace. It prints the hosts, the bootstrap addresses (kraft's and Kafka's) and the
client's TLS settings as export lines (KRAFT_* for kraft's commands, KAFKA_* for a Kafka
client such as librdkafka), then runs until Ctrl-C or SIGTERM (`kraft netns down`), when it
stops the nodes and removes every namespace and link.
"""

_FAULT_EPILOG = """\
examples:
  sudo kraft netns fault controller-1 --cut                     # its outbound, to everyone
  sudo kraft netns fault controller-1 --cut --to controller-2   # one way, one peer
  sudo kraft netns fault broker-101 --isolate                   # both ways (link down)
  sudo kraft netns fault broker-101 --loss 5 --direction both
  sudo kraft netns fault broker-102 --bandwidth 512             # kbit/s each way
  sudo kraft netns fault broker-103 --delay 100 --jitter 20     # ms, each way
  sudo kraft netns heal                                         # every host

Faults add up until healed (a second --delay of a host replaces its first). --delay uses the
kernel's netem qdisc where it has one, otherwise a delaying packet relay per direction (a
process started for it, stopped by heal); it prints which ran.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "netns",
        help="a cluster with one node per network namespace, and real network faults (root)",
        description="Test hosts on one machine: network namespaces on a private bridge.",
    )
    nsub = p.add_subparsers(dest="netns_command", metavar="ACTION", required=True)
    up = nsub.add_parser(
        "up",
        help="start a cluster, one node per namespace, until Ctrl-C",
        description="Start controllers and brokers in their own network namespaces.",
        epilog=_UP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    up.add_argument("--controllers", type=int, default=3, help="voters (default 3)")
    up.add_argument("--brokers", type=int, default=3, help="brokers (default 3)")
    up.add_argument("--tls", action="store_true", help="mTLS with per-host certificates")
    up.add_argument("--dir", metavar="DIR", help="configs, certificates, data and logs")
    from kraft.cli._node import add_role_config_arguments

    add_role_config_arguments(up)
    up.add_argument("--json", action="store_true", help="print the hosts as JSON")
    up.set_defaults(handler=run_up)

    fault = nsub.add_parser(
        "fault",
        help="cut, isolate, lose packets or limit bandwidth of one host",
        description="Add a fault to one host's link of a running `kraft netns up`.",
        epilog=_FAULT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fault.add_argument("host", metavar="HOST", help="controller-1, broker-101, ...")
    _run_argument(fault)
    kind = fault.add_mutually_exclusive_group(required=True)
    kind.add_argument("--cut", action="store_true", help="drop what HOST sends (one way)")
    kind.add_argument("--isolate", action="store_true", help="its link down (both ways)")
    kind.add_argument("--loss", type=float, metavar="PERCENT", help="drop packets at random")
    kind.add_argument("--bandwidth", type=int, metavar="KBIT", help="kbit/s each way (tbf)")
    kind.add_argument("--delay", type=float, metavar="MS", help="delay (netem, else a relay)")
    fault.add_argument(
        "--to", default="", metavar="HOST[,HOST...]", help="--cut: only towards these hosts"
    )
    fault.add_argument(
        "--direction",
        choices=("out", "in", "both"),
        default="both",
        help="--loss, --delay: which way",
    )
    fault.add_argument(
        "--jitter", type=float, default=0.0, metavar="MS", help="--delay: up to MS either way"
    )
    fault.add_argument(
        "--reorder", action="store_true", help="--delay: a packet may overtake another"
    )
    fault.add_argument(
        "--duplicate",
        type=float,
        default=0.0,
        metavar="PERCENT",
        help="--delay: send this share of packets twice",
    )
    fault.add_argument("--seed", type=int, default=0, help="--delay: the jitter's seed")
    fault.set_defaults(handler=run_fault)

    heal = nsub.add_parser(
        "heal",
        help="remove the faults of one host or all",
        description="Remove every fault of HOST (default: of every host).",
        epilog="examples:\n  sudo kraft netns heal\n  sudo kraft netns heal controller-1\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    heal.add_argument("host", nargs="?", metavar="HOST")
    _run_argument(heal)
    heal.set_defaults(handler=run_heal)

    down = nsub.add_parser(
        "down",
        help="stop a running `kraft netns up` (it cleans up)",
        description="SIGTERM to the process that runs the network: it stops its nodes and "
        "removes its namespaces and links.",
        epilog="examples:\n  sudo kraft netns down\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _run_argument(down)
    down.set_defaults(handler=run_down)

    sweep = nsub.add_parser(
        "sweep",
        help="remove what dead runs left behind",
        description="Delete the namespaces and links of every run whose owner is dead (a "
        "killed `kraft netns up` or test); --all: of every run.",
        epilog="examples:\n  sudo kraft netns sweep\n  sudo kraft netns sweep --all --json\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sweep.add_argument("--all", action="store_true", help="live runs too")
    sweep.add_argument("--json", action="store_true", help="print what was removed as JSON")
    sweep.set_defaults(handler=run_sweep)


def _run_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", metavar="ID", help="the run (default: the only one running)")


def _network(run: str | None) -> Any:
    from kraft.cluster.netns import NetnsNetwork, running_networks

    if run is None:
        runs = sorted(running_networks())
        if len(runs) != 1:
            raise ValueError(
                f"{len(runs)} netns networks run ({', '.join(runs) or 'none'}): give --run ID"
            )
        run = runs[0]
    return NetnsNetwork(run)


def run_up(args: argparse.Namespace) -> int:
    from kraft.cli._connect import parse_key_values
    from kraft.cluster.netns_cluster import NetnsCluster
    from kraft.security.tls import security_exports

    cluster = NetnsCluster(
        controllers=args.controllers,
        brokers=args.brokers,
        tls=args.tls,
        data_dir=args.dir,
        controller_config=parse_key_values(args.controller_config, "--controller-config"),
        broker_config=parse_key_values(args.broker_config, "--broker-config"),
    )
    with cluster:
        cluster.wait_until_running(120)
        assert cluster.network is not None
        doc: dict[str, Any] = {
            "run": cluster.network.run_id,
            "subnet": cluster.network.subnet,
            "this_machine": cluster.network.local_address,
            "hosts": {
                cluster.host_name(i): {
                    "address": address,
                    "namespace": cluster.network.hosts[cluster.host_name(i)].namespace,
                    "config": str(cluster.config_path(i)),
                    "log": str(cluster.log_path(i)),
                    **(
                        {"kafka_address": cluster.kafka_addresses[i]}
                        if i in cluster.kafka_addresses
                        else {}
                    ),
                }
                for i, address in cluster.addresses.items()
            },
            "bootstrap": cluster.bootstrap,
            "kafka_bootstrap": cluster.kafka_bootstrap,
            "controller_bootstrap": cluster.controller_bootstrap,
            "security": cluster.client_security(),
        }
        if args.json:
            print(json.dumps(doc, indent=2), flush=True)
        else:
            print(f"netns run {doc['run']} on {doc['subnet']} (this machine: .1)")
            for name, host in doc["hosts"].items():
                print(f"  {name:16} {host['address']:20} {host['config']}")
            print(f"bootstrap: {doc['bootstrap']}")
            print(f"kafka bootstrap: {doc['kafka_bootstrap']}")
            print(f"export KAFKA_BOOTSTRAP_SERVERS={doc['kafka_bootstrap']}")
            for line in security_exports(doc["security"]):
                print(f"export {line}")
            print("Ctrl-C stops the nodes and removes the network.", flush=True)
        try:
            _wait_for_signal(cluster)
        except SystemExit as stopped:  # SIGTERM (`kraft netns down`): a requested stop
            if stopped.code != 128 + 15:
                raise
    return 0


def _wait_for_signal(cluster: Any) -> None:
    """Sleep until SIGINT/SIGTERM (both end in an exception that unwinds `cluster`), failing
    if a node dies."""
    import time

    while True:
        for process in cluster.processes.values():
            if process.died():
                raise RuntimeError(f"{process.name} {process.exit_summary()}")
        time.sleep(0.5)


def run_fault(args: argparse.Namespace) -> int:
    network = _network(args.run)
    if args.host not in network.hosts:
        raise ValueError(f"no host {args.host!r} (hosts: {', '.join(network.hosts)})")
    if args.cut:
        to = [h.strip() for h in args.to.split(",") if h.strip()] or None
        network.cut(args.host, to)
    elif args.isolate:
        network.isolate(args.host)
    elif args.loss is not None:
        network.loss(args.host, args.loss, args.direction)
    elif args.bandwidth is not None:
        network.bandwidth(args.host, args.bandwidth)
    else:
        ran = network.delay(
            args.host,
            args.delay,
            jitter_ms=args.jitter,
            direction=args.direction,
            seed=args.seed,
            reorder=args.reorder,
            duplicate_percent=args.duplicate,
        )
        how = "netem" if ran == "netem" else "a delaying relay (this kernel has no netem)"
        extra = "".join(
            (
                ", reordered" if args.reorder else "",
                f", {args.duplicate:g}% twice" * bool(args.duplicate),
            )
        )
        print(
            f"{args.host}: {args.delay:g} ms ± {args.jitter:g} ms {args.direction}{extra} by {how}"
        )
    return 0


def run_heal(args: argparse.Namespace) -> int:
    network = _network(args.run)
    if args.host is not None and args.host not in network.hosts:
        raise ValueError(f"no host {args.host!r} (hosts: {', '.join(network.hosts)})")
    network.heal(args.host)
    return 0


def run_down(args: argparse.Namespace) -> int:
    import os
    import signal

    network = _network(args.run)
    os.kill(network.owner_pid, signal.SIGTERM)
    return 0


def run_sweep(args: argparse.Namespace) -> int:
    from kraft.cluster.netns import sweep

    removed = sweep(everything=args.all)
    print(json.dumps({"removed": removed}) if args.json else "\n".join(removed) or "nothing left")
    return 0
