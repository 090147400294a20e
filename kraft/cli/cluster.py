"""``kraft cluster up|down|status``: a `LocalCluster` on this machine, from the shell.

``up`` runs the cluster in this process (a *supervisor*) and shows a live status view until
Ctrl-C or SIGTERM, which stops the brokers (controlled shutdown), then the controllers, then
kills whatever is left. ``up --detach`` starts the same supervisor as a detached process (its
own session, output in ``DIR/cluster.log``) and returns once the cluster is healthy. Either
way the supervisor writes ``DIR/cluster.json`` when the cluster is healthy and removes it when
it stops; ``down`` and ``status`` read it. Node processes die with the supervisor (they arm
``PR_SET_PDEATHSIG``, see `kraft.cluster.process`), so killing it leaves nothing behind.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraft.arguments import positive_seconds
from kraft.cli._cluster_detach import supervisor_argv as _supervisor_argv  # noqa: F401 (tests)
from kraft.cli._cluster_status import (
    collect_status,
    metrics_urls,
    node_pid,
    pid_alive,
    render_status,
    stable_view,
)
from kraft.cli._node import add_role_config_arguments, check_directories
from kraft.logs import LEVELS

if TYPE_CHECKING:
    from kraft.cluster import LocalCluster
    from kraft.security.tls import TlsConfig

CLUSTER_FILE = "cluster.json"
_RATE_INTERVAL_S = 1.0
"""``cluster status``: the messages-in rate is measured over at least this long."""
LOG_FILE = "cluster.log"
LOCK_FILE = ".cluster.lock"
DATA_DIR_ENV = "KRAFT_DATA_DIR"
_DEFAULT_DATA_DIR = "kraft-data"

_EPILOG = """\
examples:
  kraft cluster up --controllers 3 --brokers 3 --data-dir /tmp/kraft
  kraft cluster up --data-dir /tmp/kraft --detach --broker-config replica.lag.time.max.ms=5000
  kraft cluster status --data-dir /tmp/kraft
  kraft cluster down --data-dir /tmp/kraft

--data-dir defaults to $KRAFT_DATA_DIR, else ./kraft-data. It holds every node's data,
configs (config/), logs (logs/), cluster.log and, while the cluster runs, cluster.json
(addresses and pids). Starting again on the same directory keeps the topics and records.
"""

_UP_EPILOG = """\
examples:
  kraft cluster up --controllers 3 --brokers 3 --data-dir /tmp/kraft
  kraft cluster up --data-dir /tmp/kraft --detach
  kraft cluster up --data-dir /tmp/kraft --detach --tls
  kraft cluster up --data-dir /tmp/kraft --detach --tls --authorizer --tls-clients alice
  kraft cluster up --data-dir /tmp/kraft --base-port 9091 \\
      --broker-config replica.lag.time.max.ms=5000 --controller-config num.partitions=6

In the foreground a status view (quorum leader and epoch, brokers fenced or not, partitions
with leader, ISR and under-replicated ones marked) refreshes every second; Ctrl-C stops the
brokers (controlled shutdown), then the controllers, and exits 0. With --detach the cluster
runs in the background (output in DIR/cluster.log); the command returns 0 once it is
healthy, having written DIR/cluster.json and printed the addresses. Controllers listen on
--base-port, --base-port+1, ...; brokers (ids 101, 102, ...) on the ports after them.
Every node serves Prometheus metrics (metrics.port; --no-metrics: none): on free ports, or
with --base-port on the ports after the nodes' own. cluster.json gives each node's
"metrics_url"; the status view reads them (partition counts per broker, messages in per
second, the active controller's offline partitions and fenced brokers), and
`kraft cluster prometheus-config` prints a Prometheus scrape config for them.
With --tls every port is mTLS: a CA and a certificate per node and for the client ("client")
are made in DIR/certs, cluster.json's "security" gives the client settings, and --detach prints
the KRAFT_SECURITY_PROTOCOL / KRAFT_SSL_* variables the other commands read
(`eval "$(kraft cluster env)"` sets them). --tls-clients alice,bob makes more client
certificates (cluster.json's "clients"; `kraft cluster env --client alice`).
With --authorizer (needs --tls) every node authorizes every call (authorizer.class.name, Kafka's
StandardAuthorizer rules): super.users are the nodes and the "admin" certificate, which is the
one cluster.json's "security" and `kraft cluster env` give; the other certificates may do
nothing until `kraft acls add` grants it (allow.everyone.if.no.acl.found=false).
"""


def _data_dir_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        default=os.environ.get(DATA_DIR_ENV, _DEFAULT_DATA_DIR),
        help=f"the cluster's directory (default: ${DATA_DIR_ENV}, else ./{_DEFAULT_DATA_DIR})",
    )


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "cluster",
        help="run a local cluster: up (live view or --detach), status, down",
        description="Run controllers and brokers on this machine (loopback).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    csub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)

    up_p = csub.add_parser(
        "up",
        help="start controllers and brokers; live status view, or --detach",
        description="Start a local cluster.",
        epilog=_UP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    up_p.add_argument("--controllers", type=int, default=3, help="controllers (default 3)")
    up_p.add_argument("--brokers", type=int, default=3, help="brokers (default 3)")
    _data_dir_argument(up_p)
    up_p.add_argument("--base-port", type=int, help="first port (default: free ports)")
    add_role_config_arguments(up_p)
    up_p.add_argument(
        "--detach", action="store_true", help="run in the background and return once healthy"
    )
    up_p.add_argument(
        "--wait-timeout",
        type=positive_seconds,
        default=60.0,
        metavar="SECONDS",
        help="how long the cluster may take to become healthy (default 60)",
    )
    up_p.add_argument(
        "--node-log-level",
        default="info",
        type=str.lower,
        choices=list(LEVELS),
        metavar="LEVEL",
        help="the nodes' log level: debug, info (default), warning, error or critical",
    )
    up_p.add_argument(
        "--tls",
        action="store_true",
        help="mTLS on every port (certificates made in DIR/certs; see below)",
    )
    up_p.add_argument(
        "--tls-clients",
        default="",
        metavar="NAME[,NAME...]",
        help="with --tls: more client certificates (CN=NAME), besides client's (and admin's)",
    )
    up_p.add_argument(
        "--authorizer",
        action="store_true",
        help="with --tls: authorize every call by ACLs; the admin certificate is a super user",
    )
    up_p.add_argument(
        "--no-metrics",
        dest="metrics",
        action="store_false",
        help="no Prometheus endpoints (by default every node serves one; see below)",
    )
    up_p.add_argument("--json", action="store_true", help="with --detach: print cluster.json")
    up_p.add_argument("--supervise", action="store_true", help=argparse.SUPPRESS)
    up_p.set_defaults(handler=up)

    status_p = csub.add_parser(
        "status",
        help="print the cluster's status once",
        description="Print the status of the cluster in --data-dir (from its cluster.json).",
        epilog=(
            "example:\n  kraft cluster status --data-dir /tmp/kraft --json\n\n"
            "Nodes with a metrics endpoint (cluster.json's metrics_url) are scraped twice, a\n"
            "second apart (the messages-in rate): per broker its leaders, replicas,\n"
            "under-replicated and under-min-ISR partitions; the active controller's offline\n"
            "partitions and active and fenced brokers.\n"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _data_dir_argument(status_p)
    status_p.add_argument("--json", action="store_true", help="print one JSON object")
    status_p.add_argument(
        "--timeout", type=float, default=5.0, help="seconds to wait for the controllers"
    )
    status_p.set_defaults(handler=status)

    down_p = csub.add_parser(
        "down",
        help="stop the cluster started with up --detach (or a foreground one)",
        description="Stop the cluster in --data-dir and wait until every process is gone.",
        epilog=(
            "example:\n  kraft cluster down --data-dir /tmp/kraft\n\n"
            "SIGTERM to the supervisor (brokers shut down in a controlled way, then the\n"
            "controllers); whatever still runs after --timeout is SIGKILLed. The data stays.\n"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _data_dir_argument(down_p)
    down_p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds before SIGKILL (default 30)",
    )
    down_p.set_defaults(handler=down)

    from kraft.cli.cluster_env import add_parser as add_env_parser
    from kraft.cli.cluster_prometheus import add_parser as add_prometheus_parser

    add_prometheus_parser(csub, _data_dir_argument)
    add_env_parser(csub, _data_dir_argument)


# -- processes ---------------------------------------------------------------------------------


def _is_kraft(pid: int) -> bool:
    """Whether ``pid`` is (still) one of ours, not a recycled pid."""
    try:
        return b"kraft" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False
    except OSError:
        return pid_alive(pid)


def _signal(pid: int, sig: signal.Signals) -> None:
    if pid_alive(pid) and _is_kraft(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def cluster_pids(info: dict[str, Any]) -> list[int]:
    """The supervisor's and every node's pid in a cluster.json, and the pid of each node that
    was restarted by hand (from its pid file, see `node_pid`)."""
    pids = [int(info["supervisor_pid"])] if info.get("supervisor_pid") else []
    for role, key in (("controller", "controllers"), ("broker", "brokers")):
        for node in info.get(key, []):
            if node.get("pid"):
                pids.append(int(node["pid"]))
            pid = node_pid(info, role, node)
            if pid and pid not in pids:
                pids.append(pid)
    return pids


def _restarted_by_hand(info: dict[str, Any]) -> list[int]:
    """Nodes the supervisor did not start (so does not stop): restarted by hand."""
    out = []
    for role, key in (("controller", "controllers"), ("broker", "brokers")):
        for node in info.get(key, []):
            pid = node_pid(info, role, node)
            if pid and pid != node.get("pid"):
                out.append(pid)
    return out


def _read_info(data_dir: Path) -> dict[str, Any]:
    """Raises: ValueError: no cluster.json (no cluster runs there)."""
    path = data_dir / CLUSTER_FILE
    try:
        info: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(
            f"no cluster running in {data_dir} (no {CLUSTER_FILE}; start one with "
            f"kraft cluster up --data-dir {data_dir})"
        ) from None
    return info


def _write_info(data_dir: Path, info: dict[str, Any]) -> None:
    tmp = data_dir / f".{CLUSTER_FILE}.tmp"
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    tmp.replace(data_dir / CLUSTER_FILE)


def _lock_data_dir(data_dir: Path) -> int:
    """Take ``DIR/.cluster.lock`` (held by the supervisor for as long as it runs) and remove a
    stale cluster.json; returns the lock's file descriptor.

    Raises:
        ValueError: another supervisor holds the lock.
    """
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        owner = ""
        with contextlib.suppress(OSError, ValueError, KeyError):
            pid = json.loads((data_dir / CLUSTER_FILE).read_text())["supervisor_pid"]
            owner = f" (supervisor pid {pid})"
        raise ValueError(
            f"a cluster is already running in {data_dir}{owner}; "
            f"stop it with: kraft cluster down --data-dir {data_dir}"
        ) from None
    (data_dir / CLUSTER_FILE).unlink(missing_ok=True)  # left by a supervisor that was killed
    return fd


# -- up ----------------------------------------------------------------------------------------


def up(args: argparse.Namespace) -> int:
    from kraft.cli._connect import parse_key_values
    from kraft.cli.cluster_env import check_security_arguments

    check_security_arguments(args)
    if args.controllers < 1 or args.brokers < 0:
        raise ValueError("--controllers must be >= 1 and --brokers >= 0")
    if args.base_port is not None and not 0 < args.base_port < 65536:
        raise ValueError(f"--base-port must be a port number, not {args.base_port}")
    parse_key_values(args.broker_config, "--broker-config")  # fail early, in the parent
    parse_key_values(args.controller_config, "--controller-config")
    check_directories([args.data_dir], "--data-dir")
    data_dir = Path(args.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if args.detach:
        from kraft.cli._cluster_detach import detach

        return detach(args, data_dir)
    lock = _lock_data_dir(data_dir)
    try:
        if not args.supervise:  # a detached supervisor: its parent checked
            _preflight(args, data_dir)
        return _supervise(args, data_dir, view=not args.supervise)
    finally:
        os.close(lock)


def _preflight(args: argparse.Namespace, data_dir: Path) -> None:
    """Once the data directory is ours: refuse to leave an earlier run's nodes out, and pick
    the ports (``args.base_port``), refusing taken ones (`kraft.cli._cluster_start`)."""
    from kraft.cli._cluster_start import check_earlier_nodes, choose_base_port

    check_earlier_nodes(data_dir, args.controllers, args.brokers)
    args.base_port = choose_base_port(
        args.controllers,
        args.brokers,
        metrics=args.metrics,
        base_port=args.base_port,
    )


class _Stop(BaseException):
    """SIGTERM or SIGHUP reached the supervisor."""


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def _supervise(args: argparse.Namespace, data_dir: Path, *, view: bool) -> int:
    from kraft.cli._cluster_start import without_error_prefixes
    from kraft.cli._connect import parse_key_values
    from kraft.cli.cluster_env import tls_client_names
    from kraft.cluster import LocalCluster
    from kraft.cluster.health import NodeExitedError

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_stop)
    cluster = LocalCluster(
        controllers=args.controllers,
        brokers=args.brokers,
        data_dir=data_dir,
        base_port=args.base_port,
        controller_config=parse_key_values(args.controller_config, "--controller-config"),
        broker_config=parse_key_values(args.broker_config, "--broker-config"),
        log_level=args.node_log_level,
        metrics=args.metrics,
        tls=args.tls,
        tls_clients=tls_client_names(args),
        authorizer=getattr(args, "authorizer", False),
    )
    say: Callable[[str], None] = _say if not view else _print
    info: dict[str, Any] | None = None
    try:
        say(f"starting {args.controllers} controllers and {args.brokers} brokers in {data_dir}")
        cluster.start()
        try:
            cluster.wait_until_healthy(timeout=args.wait_timeout)
        except (NodeExitedError, TimeoutError) as e:
            raise OSError(without_error_prefixes(str(e))) from None
        info = _cluster_info(cluster, data_dir)
        _write_info(data_dir, info)
        say(f"cluster healthy; bootstrap {info['bootstrap']}")

        def record_exits() -> None:
            _record_exits(cluster, info, data_dir, say)

        if view:
            _live_view(info, record_exits)
        else:
            _watch(record_exits)
    except (_Stop, KeyboardInterrupt) as e:
        say(f"stopping ({e.args[0] if e.args else 'Ctrl-C'})")
    finally:
        try:
            _graceful_stop(cluster, say)
        except (_Stop, KeyboardInterrupt):
            say("stopping at once")
        finally:
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                signal.signal(sig, signal.SIG_IGN)
            cluster.close()
            if info is not None:
                _remove_own_info(data_dir)
            say("stopped")
    return 0


def _print(message: str) -> None:
    print(message, flush=True)


def _say(message: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"{stamp} kraft cluster: {message}", flush=True)


def _metrics_url(cluster: LocalCluster, node_id: int) -> str | None:
    address = cluster.metrics_addresses.get(node_id)
    return f"http://{address}/metrics" if address else None


def _cluster_info(cluster: LocalCluster, data_dir: Path) -> dict[str, Any]:
    from kraft.cli.cluster_env import security_info

    return {
        "bootstrap": cluster.bootstrap,
        "kafka_bootstrap": cluster.kafka_bootstrap,
        "controller_bootstrap": cluster.controller_bootstrap,
        "controllers": [
            {
                "id": i,
                "address": cluster.controller_addresses[i],
                "pid": cluster.controller(i).pid,
                "metrics_url": _metrics_url(cluster, i),
            }
            for i in cluster.controller_ids
        ],
        "brokers": [
            {
                "id": b,
                "address": cluster.broker_addresses[b],
                "pid": cluster.broker(b).pid,
                "metrics_url": _metrics_url(cluster, b),
            }
            for b in cluster.broker_ids
        ],
        "supervisor_pid": os.getpid(),
        "data_dir": str(data_dir),
        "log": str(data_dir / LOG_FILE),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **security_info(cluster),
    }


def _remove_own_info(data_dir: Path) -> None:
    path = data_dir / CLUSTER_FILE
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("supervisor_pid") == os.getpid():
            path.unlink()


def _graceful_stop(cluster: LocalCluster, say: Callable[[str], None]) -> None:
    """SIGTERM every broker at once (controlled shutdown), wait, then every controller."""
    groups = (
        ("brokers", [cluster.broker(b) for b in cluster.broker_ids], 20.0),
        ("controllers", [cluster.controller(c) for c in cluster.controller_ids], 10.0),
    )
    for name, processes, limit in groups:
        running = [p for p in processes if p.is_running() and p.pid]
        for process in running:
            assert process.pid is not None
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + limit
        for process in running:
            process.wait_exit(max(0.0, deadline - time.monotonic()))
        left = [p.name for p in running if p.is_running()]
        if running:
            say(f"{name} stopped" + (f" (killing {', '.join(left)})" if left else ""))


def _watch(record_exits: Callable[[], None]) -> None:
    """Detached: sleep until a signal; note nodes that die."""
    while True:
        time.sleep(1.0)
        record_exits()


def _record_exits(
    cluster: LocalCluster, info: dict[str, Any], data_dir: Path, say: Callable[[str], None]
) -> None:
    """Note in cluster.json (each node's ``exit``) why a node the supervisor started ended,
    from its exit code: what ``kraft cluster status`` reports as its cause."""
    from kraft.cli._exit_cause import exit_cause

    changed = False
    for role, key in (("controller", "controllers"), ("broker", "brokers")):
        for node in info[key]:
            if "exit" in node or pid_alive(node["pid"]):
                continue
            node_id = node["id"]
            process = (
                cluster.controller(node_id) if role == "controller" else cluster.broker(node_id)
            )
            if process.pid != node["pid"]:
                continue
            log_path = data_dir / "logs" / f"{role}-{node['id']}.log"
            node["exit"] = exit_cause(process.wait_exit(0.0), log_path)
            say(f"{role} {node['id']} (pid {node['pid']}) {node['exit']}")
            changed = True
    if changed:
        _write_info(data_dir, info)


def _live_view(info: dict[str, Any], record_exits: Callable[[], None]) -> None:
    from kraft.controller.client import ControllerClient
    from kraft.metrics.scrape import MetricsWatch

    tty = sys.stdout.isatty()
    last = ""
    watch = MetricsWatch()  # each refresh's messages-in rate: since the one before
    with ControllerClient(
        info["controller_bootstrap"], timeout=2.0, request_timeout=1.0, tls=_info_tls(info)
    ) as c:
        while True:
            record_exits()
            doc = collect_status(info, c, watch)
            text = render_status(doc, max_partitions=40 if tty else None)
            if tty:
                footer = "\n(refreshing every second; Ctrl-C stops the cluster)"
                sys.stdout.write("\x1b[H\x1b[2J" + text + footer + "\n")
                sys.stdout.flush()
            else:
                key = stable_view(doc)
                if key != last:
                    print(time.strftime("-- %H:%M:%S --"), text, sep="\n", flush=True)
                    last = key
            time.sleep(1.0)


# -- down and status ---------------------------------------------------------------------------


def down(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    info = _read_info(data_dir)
    pids = cluster_pids(info)
    supervisor = int(info.get("supervisor_pid") or 0)
    if supervisor and pid_alive(supervisor) and _is_kraft(supervisor):
        _signal(supervisor, signal.SIGTERM)
        for pid in _restarted_by_hand(info):
            _signal(pid, signal.SIGTERM)
    else:  # no supervisor to do it: stop the nodes directly
        for pid in pids:
            _signal(pid, signal.SIGTERM)
    left = _wait_gone(pids, args.timeout)
    if left:
        for pid in left:
            _signal(pid, signal.SIGKILL)
        left = _wait_gone(left, 10.0)
    (data_dir / CLUSTER_FILE).unlink(missing_ok=True)
    if left:
        raise OSError(f"processes {left} are still running after SIGKILL")
    print(f"Stopped the cluster in {data_dir} ({len(pids)} processes).")
    return 0


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        left = [pid for pid in pids if pid_alive(pid)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def _info_tls(info: dict[str, Any]) -> TlsConfig | None:
    """The client TLS settings of a cluster.json (None: plaintext)."""
    from kraft.security.tls import client_tls

    settings = info.get("security") or {}
    return client_tls(
        settings.get("security_protocol", "PLAINTEXT"),
        settings.get("ssl_cafile"),
        settings.get("ssl_certfile"),
        settings.get("ssl_keyfile"),
    )


def status(args: argparse.Namespace) -> int:
    from kraft.controller.client import ControllerClient
    from kraft.metrics.scrape import MetricsWatch

    data_dir = Path(args.data_dir).resolve()
    info = _read_info(data_dir)
    if not any(pid_alive(pid) for pid in cluster_pids(info)):
        raise ValueError(
            f"the cluster in {data_dir} is not running (every pid in {CLUSTER_FILE} is gone)"
        )
    watch = MetricsWatch()
    watch.refresh(metrics_urls(info))  # the messages-in rate needs two scrapes: one now
    with ControllerClient(
        info["controller_bootstrap"],
        timeout=args.timeout,
        request_timeout=min(args.timeout, 2.0),
        tls=_info_tls(info),
    ) as client:
        doc = collect_status(info, client, watch, rate_interval=_RATE_INTERVAL_S)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(render_status(doc))
    if doc.get("error"):
        print(f"kraft: error: cluster unreachable: {doc['error']}", file=sys.stderr)
        return 1
    return 0
