"""``kraft peer kafka fetch|up|down|tool``: Apache Kafka itself, beside kraft, on this machine.

``fetch`` copies Kafka's jars (and Spark's Kafka source's) from Maven Central into the cache
once, at the versions of ``kraft/peer/pom.xml``. ``up`` starts a detached supervisor (its own
session, output in ``DIR/kafka-cluster.log``) that runs a `KafkaCluster` and returns once every
broker serves; the supervisor writes ``DIR/cluster.json`` and removes it when it stops.
``down`` sends it SIGTERM: brokers shut down in a controlled way, then the controllers. The
JVMs die with the supervisor (``PR_SET_PDEATHSIG``), so killing it leaves nothing behind.
``tool`` runs one of Kafka's command-line tools from the cached jars, against any Kafka-protocol
bootstrap: a Kafka peer's, or kraft's own Kafka listeners (``kraft cluster env``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kraft.cli._node import add_role_config_arguments

SUPERVISOR_LOG = "kafka-cluster.log"
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

_EPILOG = """\
examples:
  kraft peer kafka fetch
  kraft peer kafka up --controllers 3 --brokers 3 --data-dir /tmp/kafka
  kraft peer kafka down --data-dir /tmp/kafka
  kraft peer kafka tool kafka-topics --bootstrap-server 127.0.0.1:9092 --list

The jars' versions are in kraft/peer/pom.xml (the one build file); they are cached in
~/.cache/kraft/jars ($KRAFT_JARS_DIR). Java 17+ runs Kafka; Maven fetches it.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "peer",
        help="Apache Kafka beside kraft: kafka fetch, up, down, tool",
        description="Run the reference system, Apache Kafka in KRaft mode, on this machine.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    psub = p.add_subparsers(dest="peer_system", metavar="SYSTEM", required=True)
    k = psub.add_parser(
        "kafka",
        help="Apache Kafka 4.x: fetch, up, down, tool",
        description="Apache Kafka 4.x in KRaft mode: JVM controllers and brokers on loopback.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ksub = k.add_subparsers(dest="peer_command", metavar="ACTION", required=True)

    fetch_p = ksub.add_parser(
        "fetch",
        help="fetch Kafka's and Spark's Kafka-source jars into the cache (once)",
        description="Copy Apache Kafka (server, tools) and spark-sql-kafka-0-10 with their "
        "runtime dependencies from Maven Central into the cache, at the versions of "
        "kraft/peer/pom.xml. A set already fetched is not fetched again.",
        epilog="example:\n  kraft peer kafka fetch\n  KRAFT_JARS_DIR=/data/jars kraft peer "
        "kafka fetch --only kafka\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fetch_p.add_argument("--only", choices=["kafka", "spark"], help="fetch one set (default: both)")
    fetch_p.set_defaults(handler=fetch)

    up_p = ksub.add_parser(
        "up",
        help="start controllers and brokers in the background; return once they serve",
        description="Format KRaft storage and start Kafka's controllers and brokers (one JVM "
        "each) on loopback; return once every broker lists every broker. Fetches Kafka's jars "
        "first if they are not in the cache.",
        epilog=(
            "example:\n  kraft peer kafka up --controllers 3 --brokers 3 --data-dir /tmp/kafka\n"
            "\nPrints the bootstrap (bootstrap.servers for any Kafka client). DIR holds\n"
            "cluster.json, config/, logs/ (one per node) and the nodes' log.dirs; starting\n"
            "again on the same DIR keeps the topics.\n"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    up_p.add_argument("--controllers", type=int, default=3, help="controllers (default 3)")
    up_p.add_argument("--brokers", type=int, default=3, help="brokers (default 3)")
    up_p.add_argument("--data-dir", metavar="DIR", required=True, help="the cluster's directory")
    up_p.add_argument("--heap", default="384m", help="each JVM's -Xmx (default 384m)")
    add_role_config_arguments(up_p)
    up_p.add_argument(
        "--wait-timeout",
        type=float,
        default=180.0,
        metavar="SECONDS",
        help="how long the cluster may take to serve (default 180)",
    )
    up_p.add_argument("--json", action="store_true", help="print cluster.json")
    up_p.add_argument("--supervise", action="store_true", help=argparse.SUPPRESS)
    up_p.set_defaults(handler=up)

    down_p = ksub.add_parser(
        "down",
        help="stop the Kafka cluster started with up",
        description="Stop the Kafka cluster in --data-dir and wait until every JVM is gone.",
        epilog=(
            "example:\n  kraft peer kafka down --data-dir /tmp/kafka\n\n"
            "SIGTERM to the supervisor (brokers shut down in a controlled way, then the\n"
            "controllers); whatever still runs after --timeout is SIGKILLed. The data stays.\n"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    down_p.add_argument("--data-dir", metavar="DIR", required=True, help="the cluster's directory")
    down_p.add_argument(
        "--timeout", type=float, default=60.0, help="seconds before SIGKILL (default 60)"
    )
    down_p.set_defaults(handler=down)

    tool_p = ksub.add_parser(
        "tool",
        help="run one of Kafka's command-line tools (kafka-topics, kafka-console-consumer, ...)",
        description="Run one of Apache Kafka's command-line tools, named as its bin/ script "
        "without .sh, on the cached jars (fetched first if they are missing). The arguments "
        "go to the tool as they are; so do stdin, stdout and the exit status.",
        epilog=_TOOL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tool_p.add_argument("tool", metavar="NAME", help="kafka-topics, kafka-console-producer, ...")
    tool_p.add_argument("tool_args", nargs=argparse.REMAINDER, metavar="ARGS", help="its arguments")
    tool_p.set_defaults(handler=tool)


_TOOL_EPILOG = """\
examples (against kraft's Kafka listeners: the Kafka bootstrap of kraft cluster up):
  kraft peer kafka tool kafka-topics --bootstrap-server 127.0.0.1:9092 --list
  echo hello | kraft peer kafka tool kafka-console-producer \\
      --bootstrap-server 127.0.0.1:9092 --topic t
  kraft peer kafka tool kafka-console-consumer --bootstrap-server 127.0.0.1:9092 \\
      --topic t --partition 0 --offset earliest --max-messages 1

NAME is a bin/ script's name without .sh (an unknown NAME lists the known ones). The tool
runs on Java 17+ with a 256 MiB heap and logs warnings to stderr: stdout is only its output.
"""


def _fail(message: object) -> int:
    print(f"kraft: error: {message}", file=sys.stderr)
    return 1


# -- fetch -------------------------------------------------------------------------------------


def fetch(args: argparse.Namespace) -> int:
    from kraft.peer import jars

    sets = {"kafka": jars.kafka_jars(), "spark": jars.spark_kafka_jars()}
    for name, jar_set in sets.items():
        if args.only not in (None, name):
            continue
        began = time.monotonic()
        try:
            fetched = jars.fetch(jar_set)
        except jars.PeerToolError as e:
            return _fail(e)
        took = f"fetched in {time.monotonic() - began:.1f}s" if fetched else "already fetched"
        print(
            f"{name} {jar_set.version}: {len(jar_set.jars())} jars in {jar_set.directory} ({took})"
        )
    pyspark = jars.installed_pyspark_version()
    spark = sets["spark"].version
    if args.only != "kafka" and pyspark is not None and pyspark != spark:
        print(
            f"note: pyspark {pyspark} is installed; spark-sql-kafka {spark} is the newest the "
            "registry serves (kraft/peer/pom.xml, docs/benchmarks.md)",
            file=sys.stderr,
        )
    return 0


# -- up and down -------------------------------------------------------------------------------


def _read_info(data_dir: Path) -> dict[str, Any] | None:
    from kraft.peer.kafka import CLUSTER_FILE

    try:
        info: dict[str, Any] = json.loads((data_dir / CLUSTER_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return info


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ours(pid: int) -> bool:
    """Whether ``pid`` is still a kraft supervisor or a Kafka JVM, not a recycled pid."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"kraft" in cmdline or b"kafka" in cmdline


def up(args: argparse.Namespace) -> int:
    from kraft.cli._connect import parse_key_values
    from kraft.peer.jars import PeerToolError, fetch, find_java, kafka_jars

    if args.controllers < 1 or args.brokers < 1:
        return _fail("--controllers and --brokers must be >= 1")
    parse_key_values(args.broker_config, "--broker-config")  # fail early, in the parent
    parse_key_values(args.controller_config, "--controller-config")
    try:
        find_java()
        jar_set = kafka_jars()
        if not jar_set.complete and not args.supervise:
            print(f"fetching Apache Kafka {jar_set.version} into {jar_set.directory} (once)")
            fetch(jar_set)
    except PeerToolError as e:
        return _fail(e)
    data_dir = Path(args.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if args.supervise:
        return _supervise(args, data_dir)
    info = _read_info(data_dir)
    if info and _alive(int(info["supervisor_pid"])) and _ours(int(info["supervisor_pid"])):
        return _fail(
            f"a Kafka cluster is already running in {data_dir} (supervisor pid "
            f"{info['supervisor_pid']}); stop it with: kraft peer kafka down --data-dir {data_dir}"
        )
    return _detach(args, data_dir)


def _detach(args: argparse.Namespace, data_dir: Path) -> int:
    from kraft.cluster.process import PARENT_PID_ENV, last_log_line
    from kraft.peer.kafka import CLUSTER_FILE

    (data_dir / CLUSTER_FILE).unlink(missing_ok=True)  # left by a supervisor that was killed
    env = {k: v for k, v in os.environ.items() if k != PARENT_PID_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    argv = [sys.executable, "-m", "kraft.cli", "peer", "kafka", "up", "--supervise"]
    argv += ["--controllers", str(args.controllers), "--brokers", str(args.brokers)]
    argv += ["--data-dir", str(data_dir), "--heap", args.heap]
    argv += ["--wait-timeout", str(args.wait_timeout)]
    for item in args.broker_config:
        argv += ["--broker-config", item]
    for item in args.controller_config:
        argv += ["--controller-config", item]
    log_path = data_dir / SUPERVISOR_LOG
    with log_path.open("ab") as log:
        supervisor = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + args.wait_timeout + 30
    while time.monotonic() < deadline:
        info = _read_info(data_dir)
        if info is not None and info.get("supervisor_pid") == supervisor.pid:
            if args.json:
                print(json.dumps(info, indent=2))
            else:
                print(
                    f"Apache Kafka {info['kafka_version']} serving in {info['startup_s']}s: "
                    f"bootstrap {info['bootstrap']} (stop: kraft peer kafka down --data-dir "
                    f"{data_dir})"
                )
            return 0
        if supervisor.poll() is not None:
            return _fail(f"Kafka did not start: {last_log_line(log_path)} (log: {log_path})")
        time.sleep(0.2)
    supervisor.terminate()
    return _fail(f"Kafka was not serving after {args.wait_timeout:.0f}s (log: {log_path})")


def _supervise(args: argparse.Namespace, data_dir: Path) -> int:
    from kraft.cli._connect import parse_key_values
    from kraft.peer.jars import PeerToolError
    from kraft.peer.kafka import KafkaCluster, KafkaNodeExitedError

    stop = threading.Event()
    for sig in _STOP_SIGNALS:
        signal.signal(sig, lambda signum, frame: stop.set())
    cluster = KafkaCluster(
        controllers=args.controllers,
        brokers=args.brokers,
        data_dir=data_dir,
        controller_config=parse_key_values(args.controller_config, "--controller-config"),
        broker_config=parse_key_values(args.broker_config, "--broker-config"),
        heap=args.heap,
    )
    _say(f"starting {args.controllers} controllers and {args.brokers} brokers in {data_dir}")
    try:
        cluster.start(timeout=args.wait_timeout)
        _say(f"serving in {cluster.startup_s:.1f}s; bootstrap {cluster.bootstrap}")
        while not stop.wait(0.5):
            dead = [i for i, p in cluster.processes.items() if p.died()]
            if dead:
                _say(f"node {dead[0]} {cluster.processes[dead[0]].exit_summary()}")
        _say("stopping: brokers (controlled shutdown), then controllers")
        cluster.stop()
        return 0
    except (KafkaNodeExitedError, TimeoutError, PeerToolError) as e:
        _say(f"error: {e}")
        return 1
    finally:
        cluster.close()
        _say("stopped")


def _say(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} kraft peer kafka: {message}", flush=True)


def down(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    info = _read_info(data_dir)
    if info is None:
        return _fail(f"no Kafka cluster running in {data_dir} (no cluster.json)")
    supervisor = int(info["supervisor_pid"])
    nodes = [n["pid"] for n in [*info["controllers"], *info["brokers"]] if n.get("pid")]
    if _alive(supervisor) and _ours(supervisor):
        os.kill(supervisor, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if not any(_alive(p) and _ours(p) for p in [supervisor, *nodes]):
            print(f"stopped the Kafka cluster in {data_dir}")
            return 0
        time.sleep(0.2)
    for pid in [supervisor, *nodes]:
        if _alive(pid) and _ours(pid):
            os.kill(pid, signal.SIGKILL)
    print(f"killed what was left of the Kafka cluster in {data_dir} after {args.timeout:.0f}s")
    return 0


# -- tool --------------------------------------------------------------------------------------


def tool(args: argparse.Namespace) -> int:
    from kraft.peer.jars import PeerToolError, fetch, kafka_jars
    from kraft.peer.tools import TOOL_MAIN_CLASSES, tool_command

    if args.tool not in TOOL_MAIN_CLASSES:
        return _fail(f"no Kafka tool {args.tool!r}; one of: {', '.join(sorted(TOOL_MAIN_CLASSES))}")
    try:
        if fetch(kafka_jars()):
            print(f"fetched Kafka's jars into {kafka_jars().directory}", file=sys.stderr)
        command = tool_command(args.tool, *args.tool_args)
    except PeerToolError as e:
        return _fail(e)
    sys.stdout.flush()
    os.execv(command[0], command)  # the tool's stdin, stdout and exit status are the user's
