"""`KafkaCluster`: Apache Kafka in KRaft mode on this machine, beside kraft, as a yardstick.

::

    from kraft.peer import KafkaCluster

    with KafkaCluster(controllers=3, brokers=3) as kafka:   # formats, starts, waits
        producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap})
        ...

Each node is one JVM (``java -cp '<jars>/*' kafka.Kafka <node>.properties``) started as a
`ManagedProcess`: it never outlives the Python process that started it (the child arms
``PR_SET_PDEATHSIG`` before it becomes the JVM, see `_EXEC`). The jars come from
``kraft peer kafka fetch`` (`kraft.peer.jars`); the nodes' properties from
`kraft.peer.settings` (Kafka's keys, kraft's values). Under ``data_dir`` (a temporary
directory removed on exit unless given)::

    cluster-id            the KRaft cluster id, kept so a restart reuses the formatted logs
    config/               controller-<id>.properties, broker-<id>.properties, log4j2.properties
    controller-<id>/      broker-<id>/   the nodes' log.dirs
    logs/                 controller-<id>.log, broker-<id>.log, format-<id>.log
    cluster.json          bootstrap, nodes, pids, Kafka's version (while it runs)

Controllers have ids 1, 2, 3 and brokers 101, 102, ... as in `LocalCluster`. Storage is
formatted (``kafka-storage format``, one JVM per node, in parallel) with a static voter set
(``controller.quorum.voters``). `start` returns when every broker's Metadata answer lists
every broker (`kraft.peer.probe`): registered and unfenced.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

from kraft.cluster.local import BROKER_ID_BASE
from kraft.cluster.ports import free_ports
from kraft.cluster.process import ManagedProcess, last_log_line
from kraft.peer.jars import JarSet, find_java, kafka_jars, require
from kraft.peer.probe import listed_brokers
from kraft.peer.settings import LOG4J2_PROPERTIES, broker_properties, controller_properties
from kraft.properties import write_properties

CLUSTER_FILE = "cluster.json"
SERVER_MAIN = "kafka.Kafka"
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
DEFAULT_HEAP = "384m"
"""``-Xmx`` of each node: 6 nodes fit a small machine (Kafka's scripts default to 1 GiB)."""
JVM_OPTIONS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
"""Kafka's own scripts' performance options, less what needs a bigger machine."""
_TOOL_JVM_OPTIONS = ("-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""A short-lived tool (the storage format): start fast rather than run fast."""
_EXEC = (
    "import ctypes, os, signal, sys\n"
    "parent = os.environ.get('KRAFT_PARENT_PID')\n"
    "if parent:\n"
    "    ctypes.CDLL('libc.so.6').prctl(1, signal.SIGKILL)\n"
    "    if os.getppid() != int(parent):\n"
    "        os._exit(1)\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)
"""``python -c``: ask for SIGKILL when the parent dies (``PR_SET_PDEATHSIG``, which survives
``execve``), then become the JVM (same pid). `ManagedProcess` starts Python programs only."""


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, never starting
    with ``-`` (the storage tool would take it for an option; Kafka's own ids avoid it too)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaNodeExitedError(RuntimeError):
    """A Kafka node exited while the cluster was starting."""


class KafkaCluster:
    """Apache Kafka controllers and brokers (JVMs) on loopback.

    Args:
        controllers: KRaft voters (ids 1..N).
        brokers: brokers (ids 101, 102, ...).
        data_dir: logs, configs and data (default: a temporary directory, removed on close).
        controller_config: extra properties for every controller (Kafka keys).
        broker_config: extra properties for every broker.
        heap: each JVM's ``-Xmx``.
        log_level: Kafka's root log level (log4j2: INFO, WARN, ...).
        jars: the Kafka jar set (default: the build file's version, which must be fetched).
    """

    def __init__(
        self,
        controllers: int = 3,
        brokers: int = 3,
        data_dir: str | Path | None = None,
        *,
        controller_config: Mapping[str, str] | None = None,
        broker_config: Mapping[str, str] | None = None,
        heap: str = DEFAULT_HEAP,
        log_level: str = "INFO",
        jars: JarSet | None = None,
    ) -> None:
        if controllers < 1 or brokers < 1:
            raise ValueError("a Kafka cluster needs at least one controller and one broker")
        self.jars = require(jars or kafka_jars())
        self.java = find_java()
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="kraft-kafka-")).resolve()
        ports = free_ports(controllers + brokers)
        self.controller_ids = list(range(1, controllers + 1))
        self.broker_ids = [BROKER_ID_BASE + i for i in range(1, brokers + 1)]
        self.controller_addresses = {
            i: f"127.0.0.1:{p}" for i, p in zip(self.controller_ids, ports, strict=False)
        }
        self.broker_addresses = {
            b: f"127.0.0.1:{p}" for b, p in zip(self.broker_ids, ports[controllers:], strict=True)
        }
        self.heap = heap
        self.log_level = log_level
        self._controller_extra = dict(controller_config or {})
        self._broker_extra = dict(broker_config or {})
        self.cluster_id = ""
        self.startup_s: float | None = None
        """Seconds from `start` until every broker served (formatting included)."""
        self.processes: dict[int, ManagedProcess] = {}
        # NB: PR_SET_PDEATHSIG follows the thread that started the child: one long-lived one.
        self._launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-launcher")

    # -- addresses and files -------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of the brokers, as a Kafka client's ``bootstrap.servers``."""
        return ",".join(self.broker_addresses[b] for b in self.broker_ids)

    @property
    def version(self) -> str:
        return self.jars.version

    def node_ids(self) -> list[int]:
        return [*self.controller_ids, *self.broker_ids]

    def role(self, node_id: int) -> str:
        return "controller" if node_id in self.controller_addresses else "broker"

    def node_name(self, node_id: int) -> str:
        return f"{self.role(node_id)}-{node_id}"

    def log_path(self, node_id: int) -> Path:
        return self.data_dir / "logs" / f"{self.node_name(node_id)}.log"

    def pids(self) -> dict[int, int]:
        """Node id -> pid of every running node (the JVM's)."""
        return {i: p.pid for i, p in self.processes.items() if p.pid is not None and p.is_running()}

    # -- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, timeout: float = 180.0) -> None:
        """Write the configs, format the storage, start every node and wait until every broker
        lists every broker.

        Raises:
            KafkaNodeExitedError: a node (or the format) exited; the message has its log's
                last line.
            TimeoutError: not serving within ``timeout`` seconds.
        """
        began = time.monotonic()
        configs = self._write_configs()
        self._format(configs, timeout)
        for node_id in self.node_ids():
            process = self.processes.get(node_id) or self._process(node_id, configs[node_id])
            self.processes[node_id] = process
            self._launcher.submit(process.start).result()
        self._wait_serving(began + timeout)
        self.startup_s = time.monotonic() - began
        self._write_info()

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful: SIGTERM the brokers (controlled shutdown) and wait, then the controllers;
        SIGKILL whatever is left after ``timeout`` seconds per role."""
        for ids in (self.broker_ids, self.controller_ids):
            running = [self.processes[i] for i in ids if i in self.processes]
            with ThreadPoolExecutor(max_workers=max(1, len(running))) as pool:
                list(pool.map(lambda p: p.stop(timeout=timeout), running))

    def close(self) -> None:
        """SIGKILL every node (fast: a test's teardown), remove cluster.json, and the data
        directory if it is a temporary one."""
        self._launcher.shutdown(wait=True)
        for process in self.processes.values():
            process.kill()
        (self.data_dir / CLUSTER_FILE).unlink(missing_ok=True)
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    # -- faults: one broker at a time (kraft compare --with-kafka) ------------------------------

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL: no controlled shutdown; the controller fences it after its session."""
        self.processes[broker_id].kill()

    def pause_broker(self, broker_id: int) -> None:
        """SIGSTOP: the JVM keeps its sockets and answers nothing."""
        self.processes[broker_id].pause()

    def resume_broker(self, broker_id: int) -> None:
        self.processes[broker_id].resume()

    def start_broker(
        self, broker_id: int, timeout: float = 90.0, *, listing: Collection[int] | None = None
    ) -> None:
        """Start ``broker_id`` again (after `kill_broker`) and wait until it lists the brokers
        of ``listing`` (default: every broker), itself included. A broker lists only those
        registered and unfenced: with another broker still down, name the ones that are up.

        Raises:
            TimeoutError: not serving within ``timeout`` seconds.
        """
        process = self.processes[broker_id]
        if not process.is_running():
            self._launcher.submit(process.start).result()
            self._write_info()  # cluster.json names the running nodes: the new pid
        expected = {broker_id, *(self.broker_ids if listing is None else listing)}
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError):
                if set(listed_brokers(self.broker_addresses[broker_id])) >= expected:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka broker {broker_id} was not serving within {timeout} s")
            time.sleep(0.2)

    # -- internals -----------------------------------------------------------------------------

    def _write_configs(self) -> dict[int, Path]:
        config_dir = self.data_dir / "config"
        config_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "logs").mkdir(exist_ok=True)
        id_file = self.data_dir / "cluster-id"
        if not id_file.exists():
            id_file.write_text(new_cluster_id() + "\n")
        self.cluster_id = id_file.read_text().strip()
        (config_dir / "log4j2.properties").write_text(
            LOG4J2_PROPERTIES.format(level=self.log_level)
        )
        brokers = len(self.broker_ids)
        paths: dict[int, Path] = {}
        for node_id in self.node_ids():
            log_dir = str(self.data_dir / self.node_name(node_id))
            if self.role(node_id) == "controller":
                props = controller_properties(
                    node_id, self.controller_addresses, log_dir, brokers, self._controller_extra
                )
            else:
                props = broker_properties(
                    node_id,
                    self.broker_addresses[node_id],
                    self.controller_addresses,
                    log_dir,
                    brokers,
                    self._broker_extra,
                )
            path = paths[node_id] = config_dir / f"{self.node_name(node_id)}.properties"
            write_properties(path, props)
        return paths

    def _java(self, *options: str) -> list[str]:
        return [self.java, *options, "-cp", self.jars.classpath]

    def _format(self, configs: Mapping[int, Path], timeout: float) -> None:
        """``kafka-storage format`` for every node at once (a node already formatted with
        this cluster id is left as it is)."""
        log4j = f"-Dlog4j2.configurationFile={self.data_dir / 'config' / 'log4j2.properties'}"
        running: dict[int, tuple[subprocess.Popen[bytes], Path]] = {}
        for node_id, config in configs.items():
            log = self.data_dir / "logs" / f"format-{node_id}.log"
            command = [
                *self._java(*_TOOL_JVM_OPTIONS, log4j),
                STORAGE_TOOL_MAIN,
                "format",
                "--cluster-id",
                self.cluster_id,
                "--config",
                str(config),
                "--ignore-formatted",
            ]
            with log.open("wb") as out:
                running[node_id] = (
                    subprocess.Popen(
                        command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                    ),
                    log,
                )
        failed = []
        for node_id, (proc, log) in running.items():
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            if code != 0:
                failed.append(f"{self.node_name(node_id)}: {last_log_line(log)}")
        if failed:
            raise KafkaNodeExitedError(f"kafka-storage format failed: {'; '.join(failed)}")

    def _process(self, node_id: int, config: Path) -> ManagedProcess:
        log4j = f"-Dlog4j2.configurationFile={self.data_dir / 'config' / 'log4j2.properties'}"
        command = [
            *self._java(f"-Xmx{self.heap}", f"-Xms{self.heap}", *JVM_OPTIONS, log4j),
            SERVER_MAIN,
            str(config),
        ]
        return ManagedProcess(
            name=self.node_name(node_id),
            args=["-c", _EXEC, *command],
            log_path=self.log_path(node_id),
        )

    def _wait_serving(self, deadline: float) -> None:
        expected = set(self.broker_ids)
        pending = list(self.broker_ids)
        last_error = ""
        while pending:
            for node_id, process in self.processes.items():
                if not process.is_running():
                    raise KafkaNodeExitedError(
                        f"{self.node_name(node_id)} {process.exit_summary()} "
                        f"(log: {self.log_path(node_id)})"
                    )
            try:
                listed = listed_brokers(self.broker_addresses[pending[0]], timeout=2.0)
                if set(listed) >= expected:
                    pending.pop(0)
                    continue
                last_error = f"broker {pending[0]} lists {sorted(listed)}"
            except OSError as e:
                last_error = f"broker {pending[0]}: {e}"
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Kafka was not serving in time ({last_error}; logs: {self.data_dir / 'logs'})"
                )
            time.sleep(0.2)

    def info(self) -> dict[str, Any]:
        """What cluster.json holds."""
        pids = self.pids()

        def node(node_id: int, address: str) -> dict[str, Any]:
            return {
                "id": node_id,
                "address": address,
                "pid": pids.get(node_id),
                "log": str(self.log_path(node_id)),
            }

        return {
            "system": "apache-kafka",
            "kafka_version": self.version,
            "cluster_id": self.cluster_id,
            "bootstrap": self.bootstrap,
            "controller_quorum_voters": ",".join(
                f"{i}@{a}" for i, a in self.controller_addresses.items()
            ),
            "supervisor_pid": os.getpid(),
            "startup_s": None if self.startup_s is None else round(self.startup_s, 2),
            "controllers": [node(i, self.controller_addresses[i]) for i in self.controller_ids],
            "brokers": [node(b, self.broker_addresses[b]) for b in self.broker_ids],
        }

    def _write_info(self) -> None:
        # NB: a temporary file per thread: two writers (nodes restarted at once) sharing one
        # name renamed it under each other (FileNotFoundError in make test, 2026-12-07)
        tmp = self.data_dir / f".{CLUSTER_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps(self.info(), indent=2) + "\n")
        tmp.replace(self.data_dir / CLUSTER_FILE)


__all__ = ["CLUSTER_FILE", "KafkaCluster", "KafkaNodeExitedError"]
