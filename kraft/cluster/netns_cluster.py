"""A kraft cluster with one node per network namespace (`kraft.cluster.netns`), started the
way docs/operations.md tells an operator to start one across machines (issue 29):

- one properties file per node (``config/controller-1.properties``, ``broker-101.properties``)
  with ``node.id``, ``controller.quorum.voters`` naming every controller by its host's address,
  ``listeners`` on the host's address (controllers ``:9091``, brokers ``:9092``: every host has
  its own port space) and ``log.dirs``;
- a broker's Kafka listener beside (`kafka_bootstrap`): ``KAFKA://0.0.0.0:9192`` (every
  interface of its host), ``advertised.listeners`` naming the host's address (what Metadata
  answers Kafka clients), ``listener.security.protocol.map``
  (`kraft.cluster.addresses.listener_properties`, as `LocalCluster` writes them);
- with ``tls=True``: ``kraft certs create``'s certificates with each node's address as a SAN
  (``--san``), ``SSL://`` listeners (the Kafka listener SSL too, with the same certificate)
  and the ``ssl.*`` keys, ``ssl.client.auth=required``;
- each node is ``kraft controller|broker --config FILE``, run with ``ip netns exec`` on its host.

This machine is the operator's host (the bridge's ``.1``): clients of this process reach every
node at its address, through the same links the faults act on.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Self

from kraft.cluster.addresses import listener_properties
from kraft.cluster.health import (
    BrokerIncarnations,
    NodeExitedError,
    check_cluster_health,
    node_process,
)
from kraft.cluster.netns import NetnsNetwork
from kraft.cluster.process import ManagedProcess

CONTROLLER_PORT: Final = 9091
BROKER_PORT: Final = 9092
KAFKA_PORT: Final = 9192
"""Each broker host's Kafka-protocol listener."""
KAFKA_BIND: Final = "0.0.0.0"
"""Where the Kafka listener binds: every interface of its host (it advertises the host's
address)."""
BROKER_ID_BASE: Final = 101
CLIENT: Final = "client"
"""The client certificate's name (``tls=True``): subject ``CN=client``."""


class NetnsCluster:
    """Controllers and brokers, each on its own test host.

    Args:
        controllers: voters (hosts ``controller-1`` ... with node ids 1 ...).
        brokers: brokers (hosts ``broker-101`` ... with node ids 101 ...).
        tls: mTLS everywhere with per-host certificates (see the module docstring).
        data_dir: where configs, certificates, data and logs go (None: a temporary directory,
            removed by `close`).
        controller_config, broker_config: extra properties for every node of that role.

    Raises:
        NetnsUnavailableError: namespaces cannot be made here (from `start`).
    """

    def __init__(
        self,
        *,
        controllers: int = 3,
        brokers: int = 1,
        tls: bool = False,
        data_dir: str | Path | None = None,
        controller_config: Mapping[str, str] | None = None,
        broker_config: Mapping[str, str] | None = None,
        log_level: str = "info",
    ) -> None:
        self.controller_ids = list(range(1, controllers + 1))
        self.broker_ids = list(range(BROKER_ID_BASE, BROKER_ID_BASE + brokers))
        self.tls = tls
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="kraft-netns-"))
        self._controller_config = dict(controller_config or {})
        self._broker_config = dict(broker_config or {})
        self.log_level = log_level
        self.network: NetnsNetwork | None = None
        self.processes: dict[int, ManagedProcess] = {}
        self.addresses: dict[int, str] = {}
        """Node id -> ``host:port`` of its (first, gRPC) listener."""
        self.kafka_addresses: dict[int, str] = {}
        """Broker id -> ``host:port`` its Kafka listener advertises."""
        self._client_tls: Any = None
        self._client: Any = None
        """The controllers' client `describe_topic` and `wait_until_healthy` share."""
        self._incarnations = BrokerIncarnations()
        """What each restarted broker's new registration must supersede."""

    @staticmethod
    def host_name(node_id: int) -> str:
        return f"broker-{node_id}" if node_id >= BROKER_ID_BASE else f"controller-{node_id}"

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Make the network and the hosts, write certificates and configs, start every node."""
        self.network = NetnsNetwork()
        try:
            for node_id in (*self.controller_ids, *self.broker_ids):
                host = self.network.add_host(self.host_name(node_id))
                port = BROKER_PORT if node_id >= BROKER_ID_BASE else CONTROLLER_PORT
                self.addresses[node_id] = f"{host.address}:{port}"
                if node_id >= BROKER_ID_BASE:
                    self.kafka_addresses[node_id] = f"{host.address}:{KAFKA_PORT}"
            if self.tls:
                self._make_certs()
            for node_id in (*self.controller_ids, *self.broker_ids):
                self.processes[node_id] = self._process(node_id)
                self.processes[node_id].start()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop every node (SIGKILL: they are test nodes), remove the network, and the data
        directory if it was a temporary one."""
        if self._client is not None:
            self._client.close()
            self._client = None
        for process in self.processes.values():
            process.kill()
        if self.network is not None:
            self.network.close()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    # -- configs, exactly as docs/operations.md --------------------------------------------

    def _make_certs(self) -> None:
        from kraft.security.certs import create_certs
        from kraft.security.tls import client_tls

        names = {self.host_name(i): [self.addresses[i].rpartition(":")[0]] for i in self.addresses}
        made = create_certs(self.certs_dir, nodes=list(names), clients=[CLIENT], sans=names)
        client = made.client(CLIENT)
        self._client_tls = client_tls("SSL", made.cafile, client.certfile, client.keyfile)

    @property
    def certs_dir(self) -> Path:
        return self.data_dir / "certs"

    def node_properties(self, node_id: int) -> dict[str, str]:
        """The properties file of one node, as an operator writes it."""
        name = self.host_name(node_id)
        voters = ",".join(f"{i}@{self.addresses[i]}" for i in self.controller_ids)
        broker = node_id >= BROKER_ID_BASE
        listeners = listener_properties(
            self.addresses[node_id],
            name="PLAINTEXT" if broker else "CONTROLLER",
            kafka=f"{KAFKA_BIND}:{KAFKA_PORT}" if broker else "",
            kafka_advertised=self.kafka_addresses.get(node_id, ""),
            keystore=self.certs_dir / f"{name}-keystore.pem" if self.tls else None,
            truststore=self.certs_dir / "ca.pem" if self.tls else None,
        )
        props = {
            "node.id": str(node_id),
            "controller.quorum.voters": voters,
            **listeners,
            "log.dirs": str(self.data_path(node_id)),
        }
        extra = self._broker_config if node_id >= BROKER_ID_BASE else self._controller_config
        return {**props, **extra}

    def data_path(self, node_id: int) -> Path:
        """The node's ``log.dirs``."""
        return self.data_dir / "data" / self.host_name(node_id)

    def config_path(self, node_id: int) -> Path:
        return self.data_dir / "config" / f"{self.host_name(node_id)}.properties"

    def log_path(self, node_id: int) -> Path:
        return self.data_dir / "logs" / f"{self.host_name(node_id)}.log"

    def _process(self, node_id: int) -> ManagedProcess:
        from kraft.properties import write_properties

        path = self.config_path(node_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_properties(path, self.node_properties(node_id))
        role = "broker" if node_id >= BROKER_ID_BASE else "controller"
        assert self.network is not None
        host = self.network.hosts[self.host_name(node_id)]
        return ManagedProcess(
            name=host.name,
            args=["-m", "kraft.cli", "--log-level", self.log_level, role, "--config", str(path)],
            log_path=self.log_path(node_id),
            prefix=host.exec_prefix(),
        )

    # -- clients ---------------------------------------------------------------------------

    @property
    def controller_bootstrap(self) -> str:
        return ",".join(self.addresses[i] for i in self.controller_ids)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses[i] for i in self.broker_ids)

    @property
    def kafka_bootstrap(self) -> str:
        """Any Kafka client's ``bootstrap.servers``: every broker's Kafka listener."""
        return ",".join(self.kafka_addresses[i] for i in self.broker_ids)

    @property
    def client_tls(self) -> Any:
        """The `TlsConfig` of this machine's client certificate (None: plaintext)."""
        return self._client_tls

    def client_security(self) -> dict[str, str]:
        """kafka-python's settings for a kraft client of this cluster ({}: plaintext)."""
        if not self.tls:
            return {}
        return {
            "security_protocol": "SSL",
            "ssl_cafile": str(self.certs_dir / "ca.pem"),
            "ssl_certfile": str(self.certs_dir / f"{CLIENT}.pem"),
            "ssl_keyfile": str(self.certs_dir / f"{CLIENT}-key.pem"),
        }

    def controller_client(self, *, timeout: float = 15.0, request_timeout: float = 1.0) -> Any:
        """A `ControllerClient` of the controllers (the caller closes it)."""
        from kraft.controller.client import ControllerClient

        return ControllerClient(
            self.controller_bootstrap,
            timeout=timeout,
            request_timeout=request_timeout,
            tls=self._client_tls,
        )

    def wait_until_running(self, timeout: float = 60.0) -> None:
        """Wait until a controller is active and every broker is registered and unfenced.

        Raises:
            RuntimeError: a node exited (named, with the last line of its log).
            TimeoutError: not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        with self.controller_client(timeout=2.0) as client:
            while True:
                for process in self.processes.values():
                    if process.died():
                        raise RuntimeError(f"{process.name} {process.exit_summary()}")
                try:
                    described = client.describe_cluster(timeout=2.0)
                    unfenced = {b.broker_id for b in described.brokers if not b.fenced}
                    if unfenced >= set(self.broker_ids):
                        return
                    last = f"unfenced brokers {sorted(unfenced)}"
                except Exception as e:  # no active controller yet
                    last = str(e)
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"the netns cluster was not running after {timeout:.0f}s: {last} "
                        f"(logs: {self.data_dir / 'logs'})"
                    )
                time.sleep(0.1)

    # -- processes and metadata: what a fault run needs (LocalCluster's names) -------------

    def controller(self, node_id: int) -> ManagedProcess:
        return self.processes[node_id]

    def broker(self, broker_id: int) -> ManagedProcess:
        return self.processes[broker_id]

    def broker_data_dir(self, broker_id: int) -> Path:
        return self.data_path(broker_id)

    def start_broker(self, broker_id: int) -> None:
        """Start (or restart) ``broker_id``; `wait_until_healthy` then waits for its new
        registration, not the old one the controller keeps until the session expires."""
        process = self.processes[broker_id]
        if process.started and not process.is_running():
            controllers_up = any(self.processes[i].is_running() for i in self.controller_ids)
            self._incarnations.restarting(
                broker_id, self.shared_controller_client() if controllers_up else None
            )
        process.start()

    def start_controller(self, node_id: int) -> None:
        self.processes[node_id].start()

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL."""
        self.processes[broker_id].kill()

    kill_controller = kill_broker

    def stop_broker(self, broker_id: int, timeout: float = 40.0) -> int | None:
        """SIGTERM (a broker's controlled shutdown); its exit code."""
        return self.processes[broker_id].stop(timeout=timeout)

    def pause_broker(self, broker_id: int) -> None:
        """SIGSTOP."""
        self.processes[broker_id].pause()

    def resume_broker(self, broker_id: int) -> None:
        self.processes[broker_id].resume()

    resume_controller = resume_broker

    def shared_controller_client(self) -> Any:
        """One `ControllerClient` of the controllers, closed by `close` (`describe_topic` and
        `wait_until_healthy` use it; `LocalCluster.controller_client()` is the same thing)."""
        if self._client is None:
            self._client = self.controller_client()
        return self._client

    def active_controller_id(self, timeout: float = 15.0) -> int:
        leader: int = self.shared_controller_client().describe_quorum(timeout=timeout).leader_id
        return leader

    def describe_topic(self, name: str, *, timeout: float = 15.0) -> Any:
        return self.shared_controller_client().describe_topic(name, timeout=timeout)

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: Mapping[str, str] | None = None,
        *,
        timeout: float = 60.0,
    ) -> None:
        """Create a topic and wait until every partition has a leader."""
        from kraft.cluster.process import wait_for

        client = self.shared_controller_client()
        client.create_topic(name, partitions, replication_factor, configs=config, timeout=timeout)
        wait_for(
            lambda: all(p.leader >= 0 for p in self.describe_topic(name).partitions),
            timeout,
            f"a leader for every partition of {name}",
        )

    def wait_until_healthy(self, timeout: float = 60.0) -> None:
        """Wait until `kraft.cluster.health` says healthy: every node not stopped on purpose
        runs and serves, a controller leads and every running voter follows, every running
        broker is unfenced (a restarted one with a registration newer than before its
        restart), every partition has a leader.

        Raises:
            NodeExitedError: a node that should run has exited.
            TimeoutError: not healthy within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            nodes = [
                node_process(
                    "broker" if i >= BROKER_ID_BASE else "controller", i, self.addresses[i], p
                )
                for i, p in self.processes.items()
            ]
            health = check_cluster_health(
                nodes, self.shared_controller_client(), stale_broker_epochs=self._incarnations.stale
            )
            self._incarnations.observe(health)
            if health.exited:
                raise NodeExitedError(
                    f"{'; '.join(health.exited)} (logs: {self.log_path(0).parent})"
                )
            if health.healthy:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the netns cluster was not healthy after {timeout:.0f}s: "
                    f"{'; '.join(health.problems)}"
                )
            time.sleep(0.2)


__all__ = [
    "BROKER_ID_BASE",
    "BROKER_PORT",
    "CLIENT",
    "CONTROLLER_PORT",
    "KAFKA_PORT",
    "NetnsCluster",
]
