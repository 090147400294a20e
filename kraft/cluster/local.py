"""`LocalCluster`: a real KRaft-style cluster of processes on this machine, for tests and demos.

::

    from kraft import LocalCluster

    with LocalCluster(controllers=3, brokers=3) as cluster:
        cluster.wait_until_healthy(timeout=30)     # kraft.cluster.health: running, serving
        cluster.create_topic("orders", 6, 3, config={"min.insync.replicas": "2"})
        cluster.kill_broker(1)                     # SIGKILL; stop_broker is SIGTERM
        cluster.start_broker(1)
        cluster.kill_controller(cluster.active_controller_id())
        cluster.wait_until_healthy()               # a new active controller

Each controller is a ``python -m kraft.cli controller --config FILE`` process (`ManagedProcess`):
its properties file, its data and its log (JSON lines, ``controller-<id>.log``) live under the
cluster's data directory (a temporary one, deleted on exit, unless ``data_dir`` is given). Ports
are free ones unless ``base_port`` is given (controller i then listens on ``base_port + i - 1``).
Processes never outlive the context manager nor the Python process that started them.

With ``brokers=N``, broker ``i`` (ids ``BROKER_ID_BASE + 1`` ...: Raft node ids share one space
with the controllers) is a ``python -m kraft.cli broker --config FILE`` process with its log in
``broker-<id>.log``; ``bootstrap`` lists the brokers' addresses, for the clients::

    with LocalCluster(controllers=1, brokers=3) as cluster:
        cluster.wait_until_healthy()          # a controller is active, every broker unfenced
        cluster.create_topic("events", 6, 3, config={"min.insync.replicas": "2"})
        with Producer(cluster.bootstrap) as producer: ...
        cluster.kill_broker(101)              # or kill_broker(1): the first broker
        cluster.start_broker(1); cluster.pause_broker(2); cluster.resume_broker(2)

Brokers are named by id (101, 102, ...) or by their 1-based index (1, 2, ...): the two ranges
never overlap. Controllers are named by id (1, 2, ...).

With ``tls=True`` every port is mTLS (`kraft.security`): the cluster makes a CA and a
certificate per node and per client under ``<data_dir>/certs`` (`create_certs`; kept if they
exist), every node serves ``SSL://`` with ``ssl.client.auth=required`` and dials the others with
its own certificate, each broker's Kafka listener (`kafka_bootstrap`) is SSL with the same
certificate, and `client_security` holds the client settings (the ``client`` certificate,
kafka-python's names: a Kafka client takes the same files) to pass to a client::

    with LocalCluster(tls=True, tls_clients=("alice", "bob")) as cluster:
        cluster.wait_until_healthy()
        with Producer(cluster.bootstrap, **cluster.client_security) as producer: ...
        alice = cluster.client_security_of("alice")

With ``authorizer=True`` as well, every node runs Kafka's StandardAuthorizer rules
(`kraft.security`): ``authorizer.class.name`` is set, ``super.users`` lists the nodes'
certificate principals (``User:CN=controller-1`` ..., ``User:CN=broker-101`` ...) and an
``admin`` client's (``User:CN=admin``: the operator identity Kafka deployments keep), and
``allow.everyone.if.no.acl.found`` stays false. The cluster's own calls (`controller_client`,
`create_topic`, `health`) and `admin_security` use the ``admin`` certificate; `client_security`
(``User:CN=client``) and the ``tls_clients`` may do nothing until ACLs grant it::

    with LocalCluster(tls=True, authorizer=True, tls_clients=("alice",)) as cluster:
        cluster.wait_until_healthy()
        with AdminClient(cluster.bootstrap, **cluster.admin_security) as admin:
            admin.create_acls([AclBinding(..., principal="User:CN=alice", ...)])
        with Producer(cluster.bootstrap, **cluster.client_security_of("alice")) as producer: ...

Processes are started from one long-lived launcher thread that the cluster owns: Linux's
``PR_SET_PDEATHSIG`` fires when the *thread* that started a child exits (see
`kraft.cluster.process`), so ``start_broker`` is safe to call from any thread, even a
short-lived one.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Self

from kraft.cluster.addresses import BROKER_ID_BASE, listener_properties, plan_addresses
from kraft.cluster.fault_network import FaultNetwork
from kraft.cluster.health import (
    BrokerIncarnations,
    ClusterHealth,
    NodeExitedError,
    NodeProcess,
    check_cluster_health,
    node_process,
)
from kraft.cluster.ports import free_ports
from kraft.cluster.process import ManagedProcess, wait_for
from kraft.controller.client import ControllerClient
from kraft.controller.messages import CreatableTopicResult, TopicMetadata
from kraft.controller.node_config import ControllerNodeConfig
from kraft.properties import format_voters, write_properties
from kraft.security.tls import TlsConfig, client_tls
from kraft.transport.channels import DIAL_MAP_ENV, format_dial_map, set_dial_map

if TYPE_CHECKING:
    from kraft.security.certs import CertSet

CLIENT = "client"
"""The fault network's name for this process's clients (the source of client links)."""
KAFKA_CLIENT = "kafka-client"
"""The fault network's name for Kafka clients (the source of links to the Kafka listeners)."""
TLS_CLIENT = "client"
"""The name (and ``CN``) of the certificate of the cluster's own clients (``tls=True``)."""
TLS_ADMIN = "admin"
"""The name (and ``CN``) of the super-user client certificate (``authorizer=True``)."""

LOCAL_OFFSETS_TOPIC_PARTITIONS = 6
"""The offsets and the transaction state topics' partitions in a local cluster (Kafka: 50)."""
LOCAL_GROUP_HEARTBEAT_INTERVAL_MS = 500
"""``group.consumer.heartbeat.interval.ms`` of a local cluster: a rebalance (which members
learn of by heartbeat) takes well under a second."""


class LocalCluster:
    """Controller and broker processes on loopback.

    Args:
        controllers: voters of the metadata quorum (1, 3 or 5 make sense).
        brokers: broker processes (ids 101, 102, ...; ``brokers=0`` for a controller quorum alone).
        data_dir: where data, configs and logs go (default: a temporary directory, removed
            on exit).
        base_port: first controller port (default: free ports).
        controller_config: extra properties for every controller, Kafka keys, e.g.
            ``{"metadata.log.max.record.bytes.between.snapshots": "4096"}``.
        broker_config: extra properties for every broker, Kafka keys, e.g.
            ``{"replica.lag.time.max.ms": "5000"}``.
        broker_racks: ``broker.rack`` of each broker, in id order (KIP-392 layouts).
        log_level: the nodes' log level (their logs are files; info by default).
        fault_network: route every node-to-node and client-to-node connection through a
            fault proxy of its own (`network`, a `FaultNetwork`; links are named by node id,
            and ``"client"`` for this process's clients, which dial through it once
            `use_fault_network` is called; Kafka clients through ``("kafka-client", broker)``,
            the Kafka listener's advertised address). For fault runs: partitions without root.
        metrics: give every node a Prometheus endpoint (``metrics.port``: a free port each,
            or with ``base_port`` the ports after the nodes' own, in the same order;
            `metrics_addresses` lists them).
        tls: mTLS on every port (see the module docstring).
        tls_clients: names of extra client certificates to make (``tls=True``), besides
            ``client``'s (`client_security_of`).
        authorizer: authorization on every node, with the nodes and ``admin`` as super users
            (see the module docstring; needs ``tls=True``: without client certificates
            every caller is ``User:ANONYMOUS``).
        kafka: a Kafka-protocol listener on every broker (`kafka_bootstrap`; SSL with ``tls``).
        initial_voters: KIP-853: run the controllers with
            ``controller.quorum.bootstrap.servers`` naming the first ``initial_voters`` of
            them; the others start as observers until ``kraft quorum add-controller`` adds
            them, and the brokers bootstrap from the same initial voters and follow the
            voter set in the log (None: every controller is a static voter,
            ``controller.quorum.voters``, and so is every broker's list).
    """

    def __init__(
        self,
        controllers: int = 3,
        brokers: int = 3,
        data_dir: str | Path | None = None,
        base_port: int | None = None,
        controller_config: Mapping[str, str] | None = None,
        *,
        broker_config: Mapping[str, str] | None = None,
        broker_racks: Sequence[str] = (),
        log_level: str = "info",
        fault_network: bool = False,
        metrics: bool = False,
        tls: bool = False,
        tls_clients: tuple[str, ...] = (),
        authorizer: bool = False,
        initial_voters: int | None = None,
        kafka: bool = True,
    ) -> None:
        if authorizer and not tls:
            raise ValueError(
                "authorizer=True needs tls=True: without client certificates every caller is "
                "User:ANONYMOUS (kraft has no SASL), so no principal could be granted anything"
            )
        if initial_voters is not None and not 1 <= initial_voters <= controllers:
            raise ValueError("initial_voters must be between 1 and the number of controllers")
        self.initial_voters = initial_voters
        if controllers < 1:
            raise ValueError("a cluster needs at least one controller")
        if brokers < 0:
            raise ValueError("brokers must be >= 0")
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="kraft-cluster-"))
        self.kafka = kafka  # a Kafka listener per broker (issue 25)
        plan = plan_addresses(controllers, brokers, base_port, metrics=metrics, kafka=self.kafka)
        self.controller_ids, self.broker_ids = plan.controller_ids, plan.broker_ids
        self.controller_addresses = plan.controller_addresses
        self.broker_addresses = plan.broker_addresses
        self.kafka_addresses = plan.kafka_addresses
        """``host:port`` of each broker's Kafka listener (``kafka``)."""
        self.metrics_addresses = plan.metrics_addresses
        """``host:port`` of each node's Prometheus endpoint (``metrics=True``)."""
        self._broker_extra = dict(broker_config or {})
        self._racks = dict(zip(self.broker_ids, broker_racks, strict=False))
        self._brokers: dict[int, ManagedProcess] = {}
        self._incarnations = BrokerIncarnations()
        """What each restarted broker's new registration must supersede."""
        self.log_level = log_level
        self._extra = dict(controller_config or {})
        self._controllers: dict[int, ManagedProcess] = {}
        self._client: ControllerClient | None = None
        self.network: FaultNetwork | None = None
        self.certs: CertSet | None = None
        """The CA and certificates (``tls=True``)."""
        self.tls: TlsConfig | None = None
        """This process's clients' TLS settings (`admin_security`'s certificate)."""
        self.authorizer = authorizer
        if tls:
            admin = (TLS_ADMIN,) if authorizer else ()
            self.certs = self._make_certs((*admin, *(c for c in tls_clients if c != TLS_ADMIN)))
            self.tls = client_tls(**self.admin_security)
        self._dial_maps: dict[int | str, dict[str, str]] = {}
        self._kafka_proxies: dict[int, str] = {}  # broker -> its Kafka listener's proxy
        if fault_network:
            self._start_fault_network()
        # NB: one thread starts every child, and lives as long as the cluster (PDEATHSIG).
        self._launcher = _launcher()
        for node_id in self.controller_ids:
            self._controllers[node_id] = self._controller_process(node_id)
        for broker_id in self.broker_ids:
            self._brokers[broker_id] = self._broker_process(broker_id)

    # -- fault network -------------------------------------------------------------------------

    def _start_fault_network(self) -> None:
        network = self.network = FaultNetwork()
        addresses: dict[int, str] = {**self.controller_addresses, **self.broker_addresses}
        sources: list[int | str] = [*addresses, CLIENT]
        # The proxies bind ports chosen here, none of the nodes' (which are free until the nodes
        # start): a proxy on port 0 once took a controller's port, and the controller failed.
        kafka = self.kafka_addresses if self.kafka else {}
        taken = [*addresses.values(), *self.metrics_addresses.values(), *kafka.values()]
        node_ports = {int(a.rpartition(":")[2]) for a in taken}
        links = len(sources) * len(addresses) - len(addresses) + len(kafka)
        proxy_ports = iter(
            [p for p in free_ports(links + len(node_ports)) if p not in node_ports][:links]
        )
        for source in sources:
            dial_map = self._dial_maps[source] = {}
            for destination, address in addresses.items():
                if destination != source:
                    host, _, port = address.rpartition(":")
                    proxy = network.add_link(
                        source, destination, (host, int(port)), listen_port=next(proxy_ports)
                    )
                    dial_map[address] = proxy
        for broker_id, address in kafka.items():
            host, _, port = address.rpartition(":")
            self._kafka_proxies[broker_id] = network.add_link(
                KAFKA_CLIENT, broker_id, (host, int(port)), listen_port=next(proxy_ports)
            )

    # -- TLS ---------------------------------------------------------------------------------

    def _make_certs(self, clients: tuple[str, ...]) -> CertSet:
        from kraft.security.certs import create_certs  # cryptography: only with tls=True

        nodes = [
            *(f"controller-{i}" for i in self.controller_ids),
            *(f"broker-{b}" for b in self.broker_ids),
        ]
        return create_certs(self.data_dir / "certs", nodes=nodes, clients=[TLS_CLIENT, *clients])

    def client_security_of(self, name: str = "client") -> dict[str, str]:
        """Client settings for certificate ``name`` (kafka-python's names; empty without
        TLS): ``Producer(cluster.bootstrap, **cluster.client_security_of("alice"))``.

        Raises:
            KeyError: no client certificate of that name.
        """
        if self.certs is None:
            return {}
        paths = self.certs.client(name)
        return {
            "security_protocol": "SSL",
            "ssl_cafile": str(self.certs.cafile),
            "ssl_certfile": str(paths.certfile),
            "ssl_keyfile": str(paths.keyfile),
        }

    @property
    def client_security(self) -> dict[str, str]:
        """`client_security_of` the cluster's own ``client`` certificate."""
        return self.client_security_of(TLS_CLIENT)

    @property
    def admin_security(self) -> dict[str, str]:
        """The client settings of a super user: the ``admin`` certificate's with
        ``authorizer=True``, else `client_security`."""
        return self.client_security_of(TLS_ADMIN if self.authorizer else TLS_CLIENT)

    @property
    def super_users(self) -> list[str]:
        """``super.users`` of every node (``authorizer=True``): the nodes' certificate
        principals and ``admin``'s, as the DEFAULT ``ssl.principal.mapping.rules`` map them."""
        names = [
            *(f"controller-{i}" for i in self.controller_ids),
            *(f"broker-{b}" for b in self.broker_ids),
            TLS_ADMIN,
        ]
        return [f"User:CN={name}" for name in names]

    def _authorizer_properties(self) -> dict[str, str]:
        """``authorizer.class.name`` and ``super.users`` (``authorizer=True``), else {}."""
        if not self.authorizer:
            return {}
        from kraft.security.settings import STANDARD_AUTHORIZER

        return {
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": ";".join(self.super_users),
        }

    def _listener_properties(
        self, name: str, address: str, *, kafka: str = "", kafka_advertised: str = ""
    ) -> dict[str, str]:
        """A node's listener keys (`listener_properties`: the gRPC one, then a broker's
        ``kafka`` one) and, with ``tls=True``, its ``ssl.*`` keys."""
        plaintext = "PLAINTEXT" if name.startswith("broker-") else "CONTROLLER"
        if self.certs is None:
            return listener_properties(
                address, name=plaintext, kafka=kafka, kafka_advertised=kafka_advertised
            )
        return listener_properties(
            address,
            kafka=kafka,
            kafka_advertised=kafka_advertised,
            keystore=self.certs.node(name).keystore,
            truststore=self.certs.cafile,
        )

    def _metrics_property(self, node_id: int) -> dict[str, str]:
        address = self.metrics_addresses.get(node_id)
        return {"metrics.port": address.rpartition(":")[2]} if address else {}

    def _node_env(self, node_id: int) -> dict[str, str]:
        dial_map = self._dial_maps.get(node_id)
        return {DIAL_MAP_ENV: format_dial_map(dial_map)} if dial_map else {}

    def use_fault_network(self) -> None:
        """Make this process's clients dial the nodes through the ``"client"`` links of
        `network` (channels built before keep their route). Undone by `close`.

        Raises:
            RuntimeError: the cluster was not started with ``fault_network=True``.
        """
        if self.network is None:
            raise RuntimeError("LocalCluster(fault_network=True) is needed")
        set_dial_map(self._dial_maps[CLIENT])

    # -- addresses -----------------------------------------------------------------------------

    @property
    def kafka_bootstrap(self) -> str:
        """Any Kafka client's ``bootstrap.servers``: every Kafka listener ("" without; with
        ``fault_network``, their proxies)."""
        addresses = self._kafka_proxies or self.kafka_addresses
        return ",".join(addresses[i] for i in self.broker_ids if self.kafka)

    @property
    def controller_bootstrap(self) -> str:
        """``host:port,...`` of every controller (``--bootstrap-controller``)."""
        return ",".join(self.controller_addresses[i] for i in self.controller_ids)

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of the brokers (empty without brokers)."""
        return ",".join(self.broker_addresses[i] for i in self.broker_ids)

    def controller_log(self, node_id: int) -> Path:
        return self.data_dir / "logs" / f"controller-{node_id}.log"

    def controller_data_dir(self, node_id: int) -> Path:
        return self.data_dir / f"controller-{node_id}"

    def broker_log(self, broker: int) -> Path:
        return self.data_dir / "logs" / f"broker-{self.broker_id(broker)}.log"

    def broker_data_dir(self, broker: int) -> Path:
        return self.data_dir / f"broker-{self.broker_id(broker)}"

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

    def start(self) -> None:
        """Start every controller process (they elect a leader among themselves), then every
        broker (they register once a controller is active)."""
        for node_id in self.controller_ids:
            self.start_controller(node_id)
        for broker_id in self.broker_ids:
            self.start_broker(broker_id)

    def close(self) -> None:
        """Kill every process (SIGKILL: a test wants it fast) and remove a temporary dir."""
        if self._client is not None:
            self._client.close()
            self._client = None
        # First let a start in flight (interrupted by Ctrl-C in the caller) finish, and refuse
        # new ones: then nothing can start after the kills below.
        self._launcher.shutdown(wait=True)
        for process in [*self._brokers.values(), *self._controllers.values()]:
            process.kill()
        self._launcher = _launcher()  # its thread starts only if the cluster is started again
        if self.network is not None:
            self.network.close()
            set_dial_map({})
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def controller_client(self, *, timeout: float = 15.0) -> ControllerClient:
        """A client of this cluster's controllers (one shared instance unless ``timeout``
        differs from the default)."""
        if timeout != 15.0:
            return ControllerClient(self.controller_bootstrap, timeout=timeout, tls=self.tls)
        if self._client is None:
            self._client = ControllerClient(self.controller_bootstrap, tls=self.tls)
        return self._client

    def health(self, *, timeout: float = 2.0) -> ClusterHealth:
        """The cluster's health by `kraft.cluster.health.check_cluster_health` (the check
        ``kraft cluster status`` makes too): nodes stopped or killed through this object are
        not expected to run; the others must run, answer SERVING, and (brokers) hold an
        unfenced registration newer than the one they had before their last restart."""
        nodes = [
            *(self._node("controller", i, self._controllers[i]) for i in self.controller_ids),
            *(self._node("broker", b, self._brokers[b]) for b in self.broker_ids),
        ]
        health = check_cluster_health(
            nodes,
            self.controller_client(),
            stale_broker_epochs=self._incarnations.stale,
            timeout=timeout,
        )
        self._incarnations.observe(health)
        return health

    def wait_until_healthy(self, timeout: float = 30) -> None:
        """Wait until `health` says healthy: every node expected to run runs and answers
        SERVING, a controller is active and every running voter fetches from it, every
        running broker is registered (again, after a restart) and unfenced, and every
        partition has a leader.

        Raises:
            NodeExitedError: at once, when a node that should run has exited (named, with
                the last line of its log).
            TimeoutError: not healthy within ``timeout`` seconds (the message says why and
                names the logs).
        """
        deadline = time.monotonic() + timeout
        logs = self.data_dir / "logs"
        while True:
            health = self.health()
            if health.exited:
                raise NodeExitedError(f"{'; '.join(health.exited)} (logs: {logs})")
            if health.healthy:
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"the cluster was not healthy after {timeout:.1f}s: "
                    f"{'; '.join(health.problems)} (logs: {logs})"
                )
            time.sleep(0.05)

    def _node(self, role: str, node_id: int, process: ManagedProcess) -> NodeProcess:
        address = (
            self.controller_addresses[node_id]
            if role == "controller"
            else self.broker_addresses[node_id]
        )
        return node_process(role, node_id, address, process)

    def active_controller_id(self, timeout: float = 15) -> int:
        """The node id of the active controller (waits up to ``timeout`` for one)."""
        return self.controller_client().describe_quorum(timeout=timeout).leader_id

    def controller(self, node_id: int) -> ManagedProcess:
        return self._controllers[node_id]

    # -- topics --------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        config: Mapping[str, str] | None = None,
        *,
        timeout: float = 30.0,
    ) -> CreatableTopicResult:
        """Create a topic with topic configs passed through (``min.insync.replicas``,
        ``retention.ms``, ...; -1: the cluster's defaults) and wait until every partition has
        a leader.

        Raises:
            TopicAlreadyExistsError, InvalidReplicationFactorError, InvalidConfigError, ...
            TimeoutError: some partition had no leader within ``timeout`` seconds.
        """
        client = self.controller_client()
        result = client.create_topic(
            name, partitions, replication_factor, configs=config, timeout=timeout
        )

        def led() -> bool:
            topic = client.describe_topic(name, timeout=timeout)
            return bool(topic.partitions) and all(p.leader >= 0 for p in topic.partitions)

        wait_for(led, timeout, f"a leader for every partition of {name}")
        return result

    def describe_topic(self, name: str, *, timeout: float = 15.0) -> TopicMetadata:
        """Partitions of ``name`` (leader, leader_epoch, replicas, isr) from the active
        controller.

        Raises:
            UnknownTopicOrPartitionError: no such topic.
        """
        return self.controller_client().describe_topic(name, timeout=timeout)

    def pids(self) -> list[int]:
        """The process ids of every running node (controllers, then brokers)."""
        nodes = [*self._controllers.values(), *self._brokers.values()]
        return [p.pid for p in nodes if p.is_running() and p.pid]

    def start_controller(self, node_id: int) -> None:
        self._launch(self._controllers[node_id].start)

    def stop_controller(self, node_id: int, timeout: float = 15.0) -> int | None:
        """SIGTERM (graceful: a leader hands over first); returns the exit code."""
        return self._controllers[node_id].stop(timeout=timeout)

    def kill_controller(self, node_id: int) -> None:
        """SIGKILL: no goodbye, no flush beyond what was synced."""
        self._controllers[node_id].kill()

    def pause_controller(self, node_id: int) -> None:
        """SIGSTOP: alive but silent (a GC pause, a stalled VM)."""
        self._controllers[node_id].pause()

    def resume_controller(self, node_id: int) -> None:
        self._controllers[node_id].resume()

    def broker_id(self, broker: int) -> int:
        """The id of ``broker``, given as an id (101, ...) or a 1-based index (1, ...).

        Raises:
            KeyError: no such broker.
        """
        if broker in self.broker_addresses:
            return broker
        if 1 <= broker <= len(self.broker_ids):
            return self.broker_ids[broker - 1]
        raise KeyError(f"no broker {broker} (ids {self.broker_ids}, or indexes 1..)")

    def broker(self, broker: int) -> ManagedProcess:
        return self._brokers[self.broker_id(broker)]

    def start_broker(self, broker: int) -> None:
        """Start (or restart) ``broker``; `wait_until_healthy` then waits for its new
        registration, not the old one that the controller keeps until the session expires."""
        broker_id = self.broker_id(broker)
        process = self.broker(broker_id)
        if process.started and not process.is_running():
            controllers_up = any(p.is_running() for p in self._controllers.values())
            self._incarnations.restarting(
                broker_id, self.controller_client() if controllers_up else None
            )
        self._launch(process.start)

    def stop_broker(self, broker: int, timeout: float = 40.0) -> int | None:
        """SIGTERM (a controlled shutdown: leadership moves first); returns the exit code."""
        return self.broker(broker).stop(timeout=timeout)

    def kill_broker(self, broker: int) -> None:
        """SIGKILL: no controlled shutdown; the controller fences it after its session."""
        self.broker(broker).kill()

    def pause_broker(self, broker: int) -> None:
        """SIGSTOP: alive but silent."""
        self.broker(broker).pause()

    def resume_broker(self, broker: int) -> None:
        self.broker(broker).resume()

    # -- internals -----------------------------------------------------------------------------

    def _launch(self, start: Callable[[], None]) -> None:
        """Run ``start`` on the launcher thread (see the module docstring) and wait for it."""
        self._launcher.submit(start).result()

    def _controller_process(self, node_id: int) -> ManagedProcess:
        voters = self.controller_addresses
        if self.initial_voters is not None:
            voters = {i: a for i, a in voters.items() if i <= self.initial_voters}
        config = ControllerNodeConfig(
            node_id=node_id,
            voters=voters,
            listen=self.controller_addresses[node_id],
            data_dir=self.controller_data_dir(node_id),
            dynamic_voters=self.initial_voters is not None,
        )
        props = {
            **config.to_properties(),
            **self._listener_properties(
                f"controller-{node_id}", self.controller_addresses[node_id]
            ),
            **self._authorizer_properties(),
            **self._metrics_property(node_id),
            **self._extra,
        }
        return self._node_process("controller", node_id, props, self.controller_log(node_id))

    def _broker_process(self, broker_id: int) -> ManagedProcess:
        # KIP-853: with a dynamic quorum the brokers too know only the initial voters, and
        # follow the voter set in the metadata log.
        quorum = (
            {
                "controller.quorum.bootstrap.servers": format_voters(
                    {i: a for i, a in self.controller_addresses.items() if i <= self.initial_voters}
                )
            }
            if self.initial_voters is not None
            else {"controller.quorum.voters": format_voters(self.controller_addresses)}
        )
        kafka = self.kafka_addresses[broker_id] if self.kafka else ""
        proxy = self._kafka_proxies.get(broker_id)  # advertised: Kafka clients use the proxy
        props = {
            "process.roles": "broker",
            "node.id": str(broker_id),
            **quorum,
            "log.dirs": str(self.broker_data_dir(broker_id)),
            "offsets.topic.num.partitions": str(LOCAL_OFFSETS_TOPIC_PARTITIONS),
            "transaction.state.log.num.partitions": str(LOCAL_OFFSETS_TOPIC_PARTITIONS),
            "group.consumer.heartbeat.interval.ms": str(LOCAL_GROUP_HEARTBEAT_INTERVAL_MS),
            **self._listener_properties(
                f"broker-{broker_id}",
                self.broker_addresses[broker_id],
                kafka=kafka,
                kafka_advertised=proxy or "",
            ),
            **self._authorizer_properties(),
            **self._metrics_property(broker_id),
            **self._broker_extra,
            **({"broker.rack": self._racks[broker_id]} if broker_id in self._racks else {}),
        }
        return self._node_process("broker", broker_id, props, self.broker_log(broker_id))

    def _node_process(
        self, role: str, node_id: int, props: Mapping[str, str], log_path: Path
    ) -> ManagedProcess:
        """The process of one node: its properties written to ``config/<role>-<id>.properties``,
        run as ``kraft <role> --config`` that file."""
        config_dir = self.data_dir / "config"
        config_dir.mkdir(parents=True, exist_ok=True)
        path = config_dir / f"{role}-{node_id}.properties"
        write_properties(path, props)
        args = ["-m", "kraft.cli", "--log-level", self.log_level, role, "--config", str(path)]
        return ManagedProcess(
            name=f"{role}-{node_id}", args=args, log_path=log_path, env=self._node_env(node_id)
        )


def _launcher() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraft-launcher")


__all__ = ["BROKER_ID_BASE", "CLIENT", "KAFKA_CLIENT", "TLS_ADMIN", "TLS_CLIENT", "LocalCluster"]
