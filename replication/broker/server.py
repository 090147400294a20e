"""`BrokerServer`: one broker process's wiring: metadata observer, lifecycle, replicas, transports.

Theory of operation
-------------------
Each job is an object of its own; this module only builds them, hands each the narrow view it
needs of the others, and starts and stops them in order:

- *Metadata, the KRaft way.* A `RaftServer` with this broker's id, which is not a voter, is an
  *observer*: it fetches the committed metadata log (and snapshots, KIP-630) from the
  controllers. `MetadataLoader` (`replication.broker.lifecycle.metadata_loader`) folds each
  committed batch into the next `MetadataImage` in a worker thread and publishes it on the loop, in
  order; after each change the replicas reconcile (coalesced into one pass per loop turn).
- *Lifecycle* (KIP-631): registration, heartbeats, fencing and controlled shutdown,
  `BrokerLifecycle` (`replication.broker.lifecycle.broker_lifecycle`). SIGTERM heartbeats
  ``want_shutdown`` until the controller moved leadership away, then the process stops and exits 0.
- *Replicas*: `ReplicaManager` (`replication.broker.replicas.replica_manager`): the partition
  replicas kept in line with the image, offline replicas and their probe; a task ticks them when
  their deadlines come (`replication.broker.replicas.tick`).
- *Inter-broker calls*: follower fetches batched per leader broker and the groups' lag reads,
  `InterBrokerClient` (`replication.broker.interbroker`).
- *Controller calls*: AlterPartition, producer id blocks, internal topics, the quorum
  partitions' reports, `ControllerRequests`, on a channel that follows the voters
  (`ControllerDiscovery`, KIP-853), both in `replication.broker.lifecycle.controllers`.
- *The broker API* (`replication.broker.api.BrokerApi`) over the partition APIs
  (`replication.broker.service`) and the group coordinator (`GroupService`), served by the
  gRPC adapter (`replication.broker.grpc`) on the gRPC port with the quorum partitions' Raft
  groups and gRPC health, and by the Kafka listeners (`replication.broker.kafka`).
- *Background work*: retention (`replication.broker.replicas.retention`) and compaction
  (`replication.broker.replicas.cleaner`).

Everything runs on one event loop; the blocking `ControllerClient` and the metadata images
are built in worker threads. A
loop that dies takes the process down (`LoopSupervisor`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kraft._generated import broker_pb2_grpc
from kraft.controller.client import ControllerClient
from kraft.controller.messages import AllocateProducerIdsResponse
from kraft.loop_watch import watch_loop
from kraft.metadata import MetadataImage
from kraft.metadata.records import Endpoint
from kraft.metrics.kafka import (
    BROKER_GAUGES,
    FETCH_SESSION_GAUGES,
    GROUP_GAUGES,
    RAFT_GAUGES,
    broker_values,
    fetch_session_values,
    raft_values,
)
from kraft.metrics.node import serve_node_metrics
from kraft.metrics.registry import GaugeValue
from kraft.raft_shell import RaftServer
from kraft.security.guard import AccessGuard
from kraft.supervision import LoopSupervisor
from kraft.transport.channels import aio_server, bind
from kraft.types import TopicPartition
from replication.broker.api.broker_api import BrokerApi
from replication.broker.config import BrokerNodeConfig
from replication.broker.coordinators.group_service import GroupService
from replication.broker.grpc.adapter import API_SERVICES, GrpcPeers, add_broker_api_to_server
from replication.broker.interbroker import InterBrokerClient
from replication.broker.kafka.serving import KafkaListeners
from replication.broker.lifecycle.broker_lifecycle import BrokerLifecycle
from replication.broker.lifecycle.controllers import ControllerDiscovery, ControllerRequests
from replication.broker.lifecycle.metadata_loader import MetadataLoader
from replication.broker.replicas.cleaner import LogCleaner
from replication.broker.replicas.partition import PartitionReplica
from replication.broker.replicas.quorum_host import QuorumHost
from replication.broker.replicas.replica_manager import ReplicaManager
from replication.broker.replicas.retention import expiration_pass, retention_pass, run_every
from replication.broker.replicas.throttle import ThrottleBucket
from replication.broker.replicas.tick import checkpoint_pass, run_tick_loop
from replication.broker.replicas.txn_verification import TxnVerifier
from replication.broker.service import BrokerService
from storage.log import wall_clock_ms

METADATA_DIR = "__cluster_metadata"


class BrokerServer:
    """A broker: the process wiring of its parts (see the module docstring)."""

    def __init__(self, config: BrokerNodeConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.image = MetadataImage.empty()
        self._log = structlog.get_logger("replication.broker").bind(
            node_id=config.node_id, role="broker"
        )
        client = ControllerClient(
            list(config.voters.values()), timeout=5.0, request_timeout=2.0, tls=config.tls
        )
        # A dead loop (metadata Raft, lifecycle, tick, retention) takes the process down.
        self.supervisor = LoopSupervisor(self._log)
        self.supervisor.on_death(
            lambda: self._health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        )
        self.metadata = MetadataLoader(
            self._publish_image, lambda e: self.supervisor.fail("metadata-loader", e)
        )
        """Committed metadata -> the next image, off the loop (`.metadata_loader`)."""
        self.raft = RaftServer(
            config.node_id,
            config.voters,
            config.data_dir / METADATA_DIR,
            listen=None,
            config=config.raft,
            state_machine=self.metadata,
            supervisor=self.supervisor,
            tls=config.tls,
            dynamic_voters=config.dynamic_voters,
        )
        # KIP-853: the controller channel follows the voters the observer reads in the log.
        self._discovery = ControllerDiscovery(
            self.raft.voter_endpoints,
            lambda: self.raft.leader_id,
            lambda addresses, leader: client.set_addresses(addresses, leader=leader),
            logger=self._log,
        )
        self.raft.add_leader_listener(self._follow_controllers)
        self.controller = ControllerRequests(
            client, node_id=config.node_id, broker_epoch=lambda: self.broker_epoch, log=self._log
        )
        """The broker's own requests to the active controller (`.controllers`)."""
        guard = AccessGuard(config.authorization, lambda: self.image)
        # The Broker and forwarded Controller calls are authorized and measured by the API
        # layer (`replication.broker.api`); the interceptors keep the others (Raft, health).
        self._grpc = aio_server(guard=guard, api_services=API_SERVICES)
        # Quorum-mode partitions' Raft groups, on this port
        # (`replication.broker.replicas.quorum_host`).
        self.quorum = QuorumHost(
            config.node_id,
            self._grpc,
            send_to_controller=self.controller.send,
            broker_epoch=lambda: self.broker_epoch,
            raft_config=config.partition_raft_config(),
            tls=config.tls,
        )
        heartbeat_now = asyncio.Event()
        self.replica_manager = ReplicaManager(
            config,
            self.quorum,
            image=lambda: self.image,
            broker_epoch=lambda: self.broker_epoch,
            fetch_from_leader=lambda request: self.peers.fetch_from_leader(request),
            send_alter_partition=self.controller.send_alter_partition,
            heartbeat_now=heartbeat_now,
            log=self._log,
        )
        """The partition replicas (`replication.broker.replicas.replica_manager`)."""
        self.peers = InterBrokerClient(
            config,
            image=lambda: self.image,
            follower_throttle=self.replica_manager.follower_throttle,
            is_adding_replica=self.replica_manager.is_adding_replica,
        )
        """Follower fetches, lag reads: calls to the other brokers (`.interbroker`)."""
        self.lifecycle = BrokerLifecycle(
            node_id=config.node_id,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            rack=config.rack,
            data_dir=config.data_dir,
            client=client,
            image=lambda: self.image,
            listeners=self._registration_listeners,
            replicas=self.replica_manager,
            refresh_controllers=self._discovery.refresh,
            heartbeat_now=heartbeat_now,
            log=self._log,
        )
        """Registration, heartbeats, fencing, controlled shutdown (`.lifecycle`)."""
        self.groups = GroupService(self)  # consumer groups (KIP-848): group_runtime.py
        self.txn_verifier = TxnVerifier(
            image=lambda: self.image,
            node_id=config.node_id,
            stub=self.broker_stub,
            local=self.groups.transactions.add_partitions_to_txn_batch,
            verify=config.transaction_partition_verification_enable,
            add_retry_backoff_ms=config.add_partitions_to_txn_retry_backoff_ms,
            add_retry_max_ms=config.add_partitions_to_txn_retry_backoff_max_ms,
        )
        """KIP-890: a partition leader asks the transaction coordinators (part 1) or adds a
        version-2 client's partitions there (part 2)."""
        self.groups.add_to_transaction = self.txn_verifier.add_partitions
        service = BrokerService(
            self,
            replica_selector=config.replica_selector_class,
            txn_verifier=self.txn_verifier,
        )
        self.api = BrokerApi(
            service,
            self.groups,
            guard,
            client,
            fetch_session_slots=config.max_incremental_fetch_session_cache_slots,
        )
        """The broker's APIs, which every transport calls (`replication.broker.api`)."""
        add_broker_api_to_server(
            self._grpc,
            self.api,
            GrpcPeers(config.authorization, config.grpc_listener_name),
        )
        self.kafka = KafkaListeners(config, self.api)  # the Kafka protocol, on the same API
        self._health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._grpc)
        self._tasks: list[asyncio.Task[None]] = []
        self.bound_port: int | None = None
        self.metrics_port: int | None = None

    # --- the broker as its APIs see it (`replication.broker.host`) -----------------------------

    @property
    def broker_epoch(self) -> int | None:
        return self.lifecycle.broker_epoch

    @broker_epoch.setter
    def broker_epoch(self, epoch: int | None) -> None:
        self.lifecycle.broker_epoch = epoch

    @property
    def fenced(self) -> bool:
        return self.lifecycle.fenced

    @property
    def stopping(self) -> bool:
        return self.lifecycle.stopping

    @property
    def replicas(self) -> dict[TopicPartition, PartitionReplica]:
        return self.replica_manager.replicas

    @property
    def leader_throttle(self) -> ThrottleBucket:
        return self.replica_manager.leader_throttle

    def metadata_changed(self) -> None:
        self.replica_manager.metadata_changed()

    def _publish_image(self, image: MetadataImage) -> None:
        """A new image from the `MetadataLoader`, on the loop, in commit order."""
        self.image = image
        self.metadata_changed()

    def is_adding_replica(self, tp: TopicPartition, replica_id: int) -> bool:
        return self.replica_manager.is_adding_replica(tp, replica_id)

    def controller_leader_id(self) -> int | None:
        return self.raft.leader_id

    def broker_stub(self, address: str) -> broker_pb2_grpc.BrokerStub:
        return self.peers.broker_stub(address)

    async def list_latest_offsets(
        self, leader_id: int, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        return await self.peers.list_latest_offsets(leader_id, partitions)

    async def create_internal_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> None:
        await self.controller.create_internal_topic(name, partitions, replication_factor, configs)

    async def allocate_producer_ids(self) -> AllocateProducerIdsResponse:
        return await self.controller.allocate_producer_ids()

    def _follow_controllers(self, _leader: int | None, _epoch: int) -> None:
        self._discovery.refresh()

    # --- the process --------------------------------------------------------------------------

    def _registration_listeners(self) -> tuple[Endpoint, ...]:
        """Every listener, as registered: the gRPC one first (advertised.listeners, else the
        listener with the port bound if it asked for 0), then the Kafka ones."""
        host, _, port = self.config.advertised_address.rpartition(":")
        if self.config.advertised_listener is None:
            port = str(self.bound_port or port)
        grpc_listener = Endpoint(
            name=self.config.grpc_listener_name,
            host=host,
            port=int(port),
            security_protocol="PLAINTEXT" if self.config.tls is None else "SSL",
        )
        return (grpc_listener, *self.kafka.endpoints())

    async def start(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self.lifecycle.load_clean_shutdown()
        try:
            self.bound_port = bind(self._grpc, self.config.listen, self.config.tls)
        except RuntimeError as e:
            raise OSError(f"cannot listen on {self.config.listen}: {e}") from e
        await self._grpc.start()
        await self.kafka.start()
        self._health.set("", health_pb2.HealthCheckResponse.SERVING)
        await self.raft.start()
        self.metrics_port = serve_node_metrics(
            self.config.metrics_port,
            self.config.listen,
            (*BROKER_GAUGES, *FETCH_SESSION_GAUGES, *GROUP_GAUGES, *RAFT_GAUGES),
            self._metric_values,
            role="broker",
            node_id=self.node_id,
        )
        lifecycle = asyncio.create_task(self.lifecycle.run(), name="broker-lifecycle")
        self.supervisor.watch(lifecycle, may_finish=True)  # ends after a controlled shutdown
        self._tasks.append(lifecycle)
        replicas = self.replica_manager
        for task in (
            asyncio.create_task(run_tick_loop(replicas, self._log), name="broker-tick"),
            asyncio.create_task(
                run_every(
                    self.config.high_watermark_checkpoint_interval_ms,
                    lambda: checkpoint_pass(list(replicas.replicas.values()), self._log),
                ),
                name="broker-checkpoint",
            ),
            asyncio.create_task(replicas.offline_probe_loop(), name="broker-offline-probe"),
            asyncio.create_task(
                watch_loop(self._log, self.config.event_loop_stall_warn_ms),
                name="broker-stall-watch",
            ),
            *self.groups.start_tasks(),  # group and transaction coordinators
            asyncio.create_task(
                run_every(
                    self.config.log_retention_check_interval_ms,
                    lambda: retention_pass(list(replicas.replicas.values()), wall_clock_ms()),
                ),
                name="broker-retention",
            ),
            asyncio.create_task(
                run_every(
                    self.config.producer_id_expiration_check_interval_ms,
                    lambda: expiration_pass(
                        list(replicas.replicas.values()),
                        wall_clock_ms(),
                        self.config.producer_id_expiration_ms,
                    ),
                ),
                name="broker-producer-expiration",
            ),
            asyncio.create_task(
                LogCleaner(
                    self.config.log_cleaner_threads, self.config.log_cleaner_dedupe_buffer_size
                ).run(
                    lambda: replicas.replicas.values(),
                    self.config.log_cleaner_backoff_ms,
                    wall_clock_ms,
                ),
                name="broker-log-cleaner",
            ),
        ):
            self.supervisor.watch(task)
            self._tasks.append(task)
        self._log.info(
            "broker_started",
            listen=self.config.listen,
            advertised=self.config.advertised_address,
            data_dir=str(self.config.data_dir),
        )

    async def controlled_shutdown(self) -> None:
        """KIP-631: heartbeat want_shutdown until the controller says should_shut_down."""
        await self.lifecycle.controlled_shutdown()

    def _metric_values(self) -> dict[str, GaugeValue]:
        """The gauges of `kraft.metrics.kafka`, read on the metrics endpoint's thread."""
        image, raft, sessions = self.image, self.raft, self.api.fetch_sessions
        return {
            **broker_values(
                image,
                self.node_id,
                lambda topic: int(image.topic_config(topic, "min.insync.replicas")),
            ),
            **raft_values(
                raft.leader_id, raft.epoch, raft.high_watermark, raft.node.log_end_offset
            ),
            **self.groups.lag.metric_values(),
            **fetch_session_values(
                len(sessions),
                sessions.partitions_cached,
                sessions.evictions,
                {
                    (kind.value, "id" if by_id else "name"): n
                    for (kind, by_id), n in dict(sessions.contexts).items()
                },
            ),
        }

    async def stop(self) -> None:
        self.lifecycle.stopping = True
        self.replica_manager.closed = True
        self.supervisor.close()
        self._health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        self.groups.close()
        if self.txn_verifier is not None:
            self.txn_verifier.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.controller.cancel_alter_partitions()
        self.replica_manager.stop()
        self.lifecycle.record_clean_shutdown()
        await self.quorum.close()
        await self.peers.close()
        await self.raft.stop(graceful=False)
        self.metadata.close()
        await self.kafka.stop()
        await self._grpc.stop(grace=0.2)
        self.lifecycle.close()
        await self.controller.close()
        self._log.info("broker_stopped")

    async def close_unstarted(self) -> None:
        """Release what the constructor opened (a broker never started: tests)."""
        self.replica_manager.stop()
        self.metadata.close()
        self.lifecycle.close()
        await self.controller.close()


# -- the process ---------------------------------------------------------------------------------


__all__ = ["BrokerServer"]
