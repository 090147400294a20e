"""`BrokerServer`: one broker process's shell: metadata observer, lifecycle, replicas, gRPC.

Theory of operation
-------------------
One grpc.aio server hosts the ``Broker`` service and the ``Controller`` service that forwards
admin requests to the active controller (thin adapters, `replication.broker.grpc`, in front of
the broker API, `replication.broker.api`) and gRPC health, on one port. The replicas are a
`ReplicaManager` (`replication.broker.replica_manager`) the server holds. Everything runs on
one event loop; the blocking `ControllerClient` runs in worker threads.

*Metadata, the KRaft way.* A `RaftServer` with this broker's id, which is not a voter, is an
*observer*: it fetches the committed metadata log (and snapshots, KIP-630) from the
controllers. `_MetadataObserver` folds each committed batch into a `MetadataImage`; after each
change (coalesced into one callback per loop turn) the broker reconciles its replicas.

*Lifecycle (KIP-631).* Register with the active controller (an incarnation id drawn once per
process, the advertised listener, the rack), then heartbeat every
``broker.heartbeat.interval.ms`` with the image's last offset; the controller unfences the
broker once that offset reaches its registration.
A heartbeat answered STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED registers again and
rebuilds every replica with the new broker epoch. SIGTERM is a controlled shutdown: heartbeat
``want_shutdown`` until the controller answers ``should_shut_down`` (it moved leadership away),
then stop and exit 0.

*Retention.* Every ``log.retention.check.interval.ms`` a task applies each replica's
``retention.ms`` / ``retention.bytes`` below its high watermark (`replication.broker.retention`).

*Dynamic configs.* Each reconcile resolves every replicated topic's settings
(`replication.broker.topic_settings`: topic config > cluster dynamic default > this broker's
properties > defaults) and applies a change live: ``min.insync.replicas`` to the leader core,
the `LogConfig` to the open log.

*Time.* No fixed tick: a task sleeps until the earliest `PartitionReplica.next_deadline_ms`
(a produce timeout, an AlterPartition retry, a follower's caught-up window, a producer snapshot
after a roll, a ``flush.ms`` flush) or the next high-watermark checkpoint, or until an input
wakes it (each replica's ``on_input``: a request, a response, a metadata change, an append);
then it ticks the replicas that are due. Sleeps are bounded below (`MIN_TICK_INTERVAL_MS`: no
spin) and above (`MAX_TICK_SLEEP_MS`: a missed wake costs a delay, never a hang). The offline
replicas' probe task sleeps until the next probe is due in the same way.

*Replicas.* For every partition whose ``replicas`` include this broker: open its
`PartitionReplica` under ``<log.dirs>/<topic>-<partition>/`` and let the registration decide
leader or follower. Follower fetches go out batched per leader broker (`LeaderFetcher`).
A partition this broker no longer replicates (a deleted topic, or a reassignment moved
it away, KIP-455) is stopped and its directory removed; so is, once after a restart, the
directory of one it stopped hosting while it was down (a stray log). AlterPartition effects
go to the controller and their results back to the leader core.

*Offline replicas (disk errors).* A replica whose log hits a disk error (ENOSPC, EIO, a
corrupt batch found on read) goes offline (`PartitionReplica.go_offline`): it leaves
``replicas`` for ``offline`` (`replication.broker.offline`), so requests for it get
NOT_LEADER_OR_FOLLOWER, and every heartbeat lists it (the next one at once); the controller
moves its leadership and drops it from the ISR (`kraft.controller.offline_replicas`). A probe
task retries it with backoff: the directory must take a write (`probe_log_directory`), then
the log is recovered from disk (a corrupt segment is cut at the bad batch) and the replica
rejoins as a follower; once the heartbeat stops listing it, the leader adds it back to the
ISR when it has caught up.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kraft._generated import broker_pb2_grpc
from kraft.controller.client import ControllerClient
from kraft.controller.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
)
from kraft.metadata import MetadataImage, decode_record
from kraft.metadata.records import Endpoint
from kraft.metrics.kafka import (
    BROKER_GAUGES,
    GROUP_GAUGES,
    RAFT_GAUGES,
    broker_values,
    raft_values,
)
from kraft.metrics.node import serve_node_metrics
from kraft.metrics.registry import GaugeValue
from kraft.raft_shell import RaftServer
from kraft.raft_shell.clock import clock_ms
from kraft.security.guard import AccessGuard
from kraft.supervision import LoopSupervisor
from kraft.transport.channels import aio_server, bind, peer_channel
from kraft.types import TopicPartition
from replication.broker.api.broker_api import BrokerApi
from replication.broker.clean_shutdown import take_previous_broker_epoch, write_clean_shutdown
from replication.broker.cleaner import LogCleaner
from replication.broker.config import BrokerNodeConfig
from replication.broker.controllers import ControllerDiscovery
from replication.broker.fetch_stream import FetchStreams
from replication.broker.fetcher import LeaderFetcher
from replication.broker.group_lag import list_latest_offsets
from replication.broker.group_service import GroupService
from replication.broker.grpc.adapter import API_SERVICES, GrpcPeers, add_broker_api_to_server
from replication.broker.kafka.serving import KafkaListeners
from replication.broker.partition import PartitionReplica
from replication.broker.quorum_host import QuorumHost
from replication.broker.replica_manager import (
    MAX_TICK_SLEEP_MS,
    MIN_TICK_INTERVAL_MS,
    ReplicaManager,
)
from replication.broker.retention import run_retention
from replication.broker.service import BrokerService
from replication.broker.throttle import (
    ThrottleBucket,
)
from replication.codec import decode, encode
from replication.core import (
    AlterPartitionSend,
    FollowerFetchRequest,
    FollowerFetchResponse,
)
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
)
from storage.errors import (
    BrokerIdNotRegisteredError,
    ErrorCode,
    KraftError,
    LeaderNotAvailableError,
    StaleBrokerEpochError,
)
from storage.log import wall_clock_ms

T = TypeVar("T")

CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0
METADATA_DIR = "__cluster_metadata"


class _MetadataObserver:
    """The observer's Raft state machine: committed metadata batches -> the broker's image."""

    def __init__(self, owner: BrokerServer) -> None:
        self._owner = owner

    def apply(self, offset: int, data: bytes) -> None:  # pragma: no cover - apply_batch wins
        self.apply_batch(offset, -1, [(offset, data)], False)

    def apply_batch(
        self, base_offset: int, epoch: int, records: list[tuple[int, bytes]], is_control: bool
    ) -> None:
        if is_control or not records:
            return
        owner = self._owner
        decoded = [decode_record(value) for _, value in records]
        owner.image = owner.image.apply_batch(decoded, records[0][0], epoch)
        owner.metadata_changed()

    def snapshot(self) -> bytes:
        return self._owner.image.to_snapshot()

    def snapshot_writer(self) -> Callable[[], bytes]:
        """`snapshot` of the image as of now; immutable, so a worker thread may run it."""
        return self._owner.image.to_snapshot

    def restore(self, data: bytes) -> None:
        self._owner.image = MetadataImage.from_snapshot(data)
        self._owner.metadata_changed()


class BrokerServer:
    """A broker: metadata observer + lifecycle + replicas (`ReplicaManager`) + the broker API
    (`BrokerApi`) on its gRPC port."""

    def __init__(self, config: BrokerNodeConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.image = MetadataImage.empty()
        self.broker_epoch: int | None = None
        self.fenced = True
        self.stopping = False
        self._log = structlog.get_logger("replication.broker").bind(
            node_id=config.node_id, role="broker"
        )
        self._incarnation_id = uuid.uuid4().hex
        self._previous_broker_epoch: int | None = None
        """KIP-966: the epoch of the last clean shutdown (`replication.broker.clean_shutdown`)."""
        self._controllers = ControllerClient(
            list(config.voters.values()), timeout=5.0, request_timeout=2.0, tls=config.tls
        )
        guard = AccessGuard(config.authorization, lambda: self.image)
        # The Broker and forwarded Controller calls are authorized and measured by the API
        # layer (`replication.broker.api`); the interceptors keep the others (Raft, health).
        self._grpc = aio_server(guard=guard, api_services=API_SERVICES)
        self.groups = GroupService(self)  # consumer groups (KIP-848): group_runtime.py
        self.api = BrokerApi(BrokerService(self), self.groups, guard, self._controllers)
        """The broker's APIs, which every transport calls (`replication.broker.api`)."""
        add_broker_api_to_server(
            self._grpc,
            self.api,
            GrpcPeers(config.authorization, config.grpc_listener_name),
        )
        self.kafka = KafkaListeners(config, self.api)  # the Kafka protocol, on the same API
        self._health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._grpc)
        # Quorum-mode partitions' Raft groups, on this port (`replication.broker.quorum_host`).
        self.quorum = QuorumHost(
            config.node_id,
            self._grpc,
            send_to_controller=lambda request: self._blocking(
                self._control_executor, self._controllers.send, request, timeout=5.0
            ),
            broker_epoch=lambda: self.broker_epoch,
            raft_config=config.partition_raft_config(),
            tls=config.tls,
        )
        self._heartbeat_now = asyncio.Event()
        self.replica_manager = ReplicaManager(
            config,
            self.quorum,
            image=lambda: self.image,
            broker_epoch=lambda: self.broker_epoch,
            fetch_from_leader=self._fetch_from_leader,
            send_alter_partition=self._send_alter_partition,
            heartbeat_now=self._heartbeat_now,
            log=self._log,
        )
        """The partition replicas (`replication.broker.replica_manager`)."""
        # A dead loop (metadata Raft, lifecycle, tick, retention) takes the process down.
        self.supervisor = LoopSupervisor(self._log)
        self.supervisor.on_death(
            lambda: self._health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        )
        self.raft = RaftServer(
            config.node_id,
            config.voters,
            config.data_dir / METADATA_DIR,
            listen=None,
            config=config.raft,
            state_machine=_MetadataObserver(self),
            supervisor=self.supervisor,
            tls=config.tls,
            dynamic_voters=config.dynamic_voters,
        )
        # KIP-853: the controller channel follows the voters the observer reads in the log.
        self._discovery = ControllerDiscovery(
            self.raft.voter_endpoints,
            lambda: self.raft.leader_id,
            lambda addresses, leader: self._controllers.set_addresses(addresses, leader=leader),
            logger=self._log,
        )
        self.raft.add_leader_listener(self._follow_controllers)
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, broker_pb2_grpc.BrokerStub] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._fetchers: dict[int, LeaderFetcher] = {}
        self._fetch_streams = FetchStreams(self._stub)
        # NB: own threads for the blocking controller calls, so forwarded admin requests (on
        # the default executor) can never starve the heartbeats into a fencing.
        self._lifecycle_executor = ThreadPoolExecutor(1, thread_name_prefix="broker-lifecycle")
        self._control_executor = ThreadPoolExecutor(4, thread_name_prefix="broker-control")
        self._shutdown_allowed = asyncio.Event()
        self.bound_port: int | None = None
        self.metrics_port: int | None = None

    # --- the replicas, as the APIs and tests see them ------------------------------------------

    @property
    def replicas(self) -> dict[TopicPartition, PartitionReplica]:
        return self.replica_manager.replicas

    @property
    def leader_throttle(self) -> ThrottleBucket:
        return self.replica_manager.leader_throttle

    @property
    def _reconcile_scheduled(self) -> bool:
        return self.replica_manager.reconcile_scheduled

    @property
    def _revisit(self) -> set[TopicPartition]:
        return self.replica_manager.revisit

    def metadata_changed(self) -> None:
        self.replica_manager.metadata_changed()

    def _reconcile(self) -> None:
        self.replica_manager.reconcile()

    def is_adding_replica(self, tp: TopicPartition, replica_id: int) -> bool:
        return self.replica_manager.is_adding_replica(tp, replica_id)

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self._previous_broker_epoch = take_previous_broker_epoch(self.config.data_dir)
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
            (*BROKER_GAUGES, *GROUP_GAUGES, *RAFT_GAUGES),
            self._metric_values,
            role="broker",
            node_id=self.node_id,
        )
        lifecycle = asyncio.create_task(self._lifecycle_loop(), name="broker-lifecycle")
        self.supervisor.watch(lifecycle, may_finish=True)  # ends after a controlled shutdown
        self._tasks.append(lifecycle)
        for task in (
            asyncio.create_task(self._tick_loop(), name="broker-tick"),
            asyncio.create_task(
                self.replica_manager.offline_probe_loop(), name="broker-offline-probe"
            ),
            asyncio.create_task(self.groups.runtime.run(), name="broker-group-coordinators"),
            asyncio.create_task(self.groups.lag.run(), name="broker-group-lag"),
            asyncio.create_task(
                run_retention(
                    lambda: self.replicas.values(),
                    self.config.log_retention_check_interval_ms,
                    wall_clock_ms,
                ),
                name="broker-retention",
            ),
            asyncio.create_task(
                LogCleaner(
                    self.config.log_cleaner_threads, self.config.log_cleaner_dedupe_buffer_size
                ).run(
                    lambda: self.replicas.values(),
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
        self.stopping = True
        if self.broker_epoch is None:
            return
        self._log.info("controlled_shutdown_started")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._shutdown_allowed.wait(), CONTROLLED_SHUTDOWN_TIMEOUT_S)
        self._log.info("controlled_shutdown_done", allowed=self._shutdown_allowed.is_set())

    def _metric_values(self) -> dict[str, GaugeValue]:
        """The gauges of `kraft.metrics.kafka`, read on the metrics endpoint's thread."""
        image, raft = self.image, self.raft
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
        }

    async def stop(self) -> None:
        self.stopping = True
        self.replica_manager.closed = True
        self.supervisor.close()
        self._health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        self.groups.runtime.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.replica_manager.stop()
        if self.broker_epoch is not None:
            # Every log is closed: the next start registers as a clean restart (KIP-966).
            with contextlib.suppress(OSError):
                write_clean_shutdown(self.config.data_dir, self.broker_epoch)
        await self.quorum.close()
        for fetcher in self._fetchers.values():
            await fetcher.close()
        self._fetch_streams.close()
        await self.raft.stop(graceful=False)
        await self.kafka.stop()
        await self._grpc.stop(grace=0.2)
        for channel in self._channels.values():
            await channel.close()
        self._lifecycle_executor.shutdown(wait=False, cancel_futures=True)
        self._control_executor.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(self._controllers.close)
        self._log.info("broker_stopped")

    async def _blocking(
        self, executor: ThreadPoolExecutor, fn: Callable[..., T], *args: Any, **kwargs: Any
    ) -> T:
        """Run a blocking `ControllerClient` call on ``executor``, off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(executor, functools.partial(fn, *args, **kwargs))

    def _follow_controllers(self, _leader: int | None, _epoch: int) -> None:
        self._discovery.refresh()

    def controller_leader_id(self) -> int | None:
        return self.raft.leader_id

    # --- registration and heartbeats ----------------------------------------------------------

    async def _register(self) -> None:
        # advertised.listeners, else the listener (with the port bound if it asked for 0).
        host, _, port = self.config.advertised_address.rpartition(":")
        if self.config.advertised_listener is None:
            port = str(self.bound_port or port)
        protocol = "PLAINTEXT" if self.config.tls is None else "SSL"
        listener = Endpoint(
            name=self.config.grpc_listener_name,
            host=host,
            port=int(port),
            security_protocol=protocol,
        )
        while True:
            self._discovery.refresh()
            try:
                epoch = await self._blocking(
                    self._lifecycle_executor,
                    self._controllers.register_broker,
                    self.node_id,
                    incarnation_id=self._incarnation_id,
                    listeners=(listener, *self.kafka.endpoints()),
                    rack=self.config.rack,
                    # KIP-966: this process's own epoch once it has one (its logs never
                    # stopped), else the one its last clean shutdown recorded.
                    previous_broker_epoch=(
                        self.broker_epoch
                        if self.broker_epoch is not None
                        else self._previous_broker_epoch
                    ),
                )
            except KraftError as e:
                self._log.info("registration_failed", error=e.code.name, message=e.message)
                await asyncio.sleep(0.2)
                continue
            old = self.broker_epoch
            self.broker_epoch = epoch
            self._log.info("broker_registered", broker_epoch=epoch)
            if old is not None and old != epoch:
                self.replica_manager.restart()  # the next pass visits every partition
            self.metadata_changed()
            return

    async def _lifecycle_loop(self) -> None:
        await self._register()
        interval_s = self.config.heartbeat_interval_ms / 1000
        while True:
            epoch = self.broker_epoch
            assert epoch is not None
            want_shutdown = self.stopping
            self._heartbeat_now.clear()
            self._discovery.refresh()
            try:
                response = await self._blocking(
                    self._lifecycle_executor,
                    self._controllers.heartbeat,
                    self.node_id,
                    epoch,
                    current_metadata_offset=self.image.last_offset,
                    want_shutdown=want_shutdown,
                    offline_replicas=self.replica_manager.offline.report(),
                    timeout=max(2.0, 4 * interval_s),
                )
            except (StaleBrokerEpochError, BrokerIdNotRegisteredError) as e:
                self._log.warning("registration_lost", error=e.code.name)
                # NB: the same incarnation id (one per process, as Kafka's broker): the
                # controller takes it as a retry and answers a new epoch at once.
                await self._register()
                continue
            except KraftError as e:
                self._log.info("heartbeat_failed", error=e.code.name)
                await asyncio.sleep(interval_s)
                continue
            if response.is_fenced != self.fenced:
                self._log.info("broker_fencing_changed", fenced=response.is_fenced)
                self.fenced = response.is_fenced
            if want_shutdown and response.should_shut_down:
                self._shutdown_allowed.set()
                return
            # NB: a replica that went offline (or came back) is reported at once.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._heartbeat_now.wait(), interval_s / 5 if want_shutdown else interval_s
                )

    # --- the replicas' tick ------------------------------------------------------------------

    async def _tick_loop(self) -> None:
        """Tick each replica when its deadline comes; checkpoint high watermarks every
        ``replica.high.watermark.checkpoint.interval.ms`` (no fixed tick)."""
        interval_ms = self.config.high_watermark_checkpoint_interval_ms
        next_checkpoint_ms = clock_ms() + interval_ms
        deadlines: dict[PartitionReplica, int | None] = {}
        replicas = self.replica_manager
        wake = replicas.tick_wake
        while True:
            wake.clear()  # NB: before reading deadlines: a wake after this is not lost
            now = clock_ms()
            checkpoint = now >= next_checkpoint_ms
            if checkpoint:
                next_checkpoint_ms = now + interval_ms
            touched = replicas.take_touched()
            hosted = list(self.replicas.values())
            if len(deadlines) != len(hosted) or any(r not in deadlines for r in hosted):
                known = deadlines  # replicas came or went: forget the gone, read the new
                deadlines = {r: known.get(r) for r in hosted}
                touched.update(r for r in hosted if r not in known)
            for replica in hosted:
                if replica in touched:
                    deadlines[replica] = replica.next_deadline_ms()
                deadline = deadlines[replica]
                if not checkpoint and (deadline is None or deadline > now):
                    continue
                try:
                    replica.tick()
                    if checkpoint:
                        replica.checkpoint_high_watermark()
                except (KraftError, OSError) as e:  # pragma: no cover - keep ticking, say so
                    self._log.error(
                        "tick_failed", topic_partition=str(replica.topic_partition), error=repr(e)
                    )
                deadlines[replica] = replica.next_deadline_ms()
            passed_ms = clock_ms()
            wake_at_ms = min(
                (d for d in deadlines.values() if d is not None), default=next_checkpoint_ms
            )
            wake_at_ms = min(wake_at_ms, next_checkpoint_ms)
            sleep_ms = min(wake_at_ms - passed_ms, MAX_TICK_SLEEP_MS)
            if sleep_ms > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), sleep_ms / 1000)
            # NB: at most one pass per MIN_TICK_INTERVAL_MS, however often inputs wake us.
            rest_ms = MIN_TICK_INTERVAL_MS - (clock_ms() - passed_ms)
            if rest_ms > 0:
                await asyncio.sleep(rest_ms / 1000)

    # --- talking to leaders and the controller ------------------------------------------------

    def _stub(self, address: str) -> broker_pb2_grpc.BrokerStub:
        stub = self._stubs.get(address)
        if stub is None:
            channel = peer_channel(address, self.config.tls)
            self._channels[address] = channel
            stub = self._stubs[address] = broker_pb2_grpc.BrokerStub(channel)
        return stub

    def broker_stub(self, address: str) -> broker_pb2_grpc.BrokerStub:
        """A stub of the broker at ``address`` (one cached channel per address)."""
        return self._stub(address)

    async def _fetch_from_leader(self, request: FollowerFetchRequest) -> FollowerFetchResponse:
        """One partition's follower fetch, batched with the others led by the same broker."""
        fetcher = self._fetchers.get(request.leader_id)
        if fetcher is None:
            fetcher = self._fetchers[request.leader_id] = LeaderFetcher(
                request.leader_id,
                replica_id=self.node_id,
                send=self._send_fetch,
                max_wait_ms=self.config.replica_fetch_wait_max_ms,
                max_bytes=self.config.replica_fetch_max_bytes,
                min_bytes=self.config.replica_fetch_min_bytes,
                response_max_bytes=self.config.replica_fetch_response_max_bytes,
                throttle=self.replica_manager.follower_throttle,
                is_throttled=lambda tp: self.is_adding_replica(tp, self.node_id),
            )
        return await fetcher.fetch(request)

    async def _send_fetch(self, leader_id: int, request: BrokerFetchRequest) -> BrokerFetchResponse:
        registration = self.image.broker(leader_id)
        if registration is None or not registration.listeners:
            await asyncio.sleep(0.1)
            raise LeaderNotAvailableError(f"broker {leader_id} has no registered listener")
        address = registration.listeners[0].address
        timeout_s = self.config.replica_fetch_wait_max_ms / 1000 + 10
        reply = await self._fetch_streams.fetch(leader_id, address, encode(request), timeout_s)
        return decode(reply, BrokerFetchResponse)

    def _send_alter_partition(self, replica: PartitionReplica, send: AlterPartitionSend) -> None:
        generation = replica.generation  # the leader role that sent it
        epoch = self.broker_epoch
        assert epoch is not None
        request = AlterPartitionRequest(
            broker_id=self.node_id,
            broker_epoch=epoch,
            topics=(AlterPartitionTopic(topic_id=replica.topic_id, partitions=(send.data,)),),
        )
        partition = send.data.partition

        async def run() -> None:
            try:
                response: AlterPartitionResponse = await self._blocking(
                    self._control_executor, self._controllers.send, request, timeout=5.0
                )
            except KraftError as e:
                result = AlterPartitionPartitionResult(partition=partition, error_code=e.code)
            else:
                result = AlterPartitionPartitionResult(
                    partition=partition,
                    error_code=response.error_code
                    if response.error_code is not ErrorCode.NONE
                    else ErrorCode.UNKNOWN_SERVER_ERROR,
                )
                if response.error_code is ErrorCode.NONE:
                    for topic in response.topics:
                        for p in topic.partitions:
                            if p.partition == partition:
                                result = p
            self._log.info(
                "alter_partition_sent",
                topic_partition=str(replica.topic_partition),
                isr=list(send.data.new_isr),
                error=result.error_code.name,
            )
            replica.handle_alter_partition_result(generation, send.alter_id, result)

        task = asyncio.create_task(run(), name=f"alter-partition-{replica.topic_partition}")
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def create_internal_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> None:
        """Create an internal topic (``__consumer_offsets``) through the active controller, as
        this broker in its current epoch (the controller refuses internal names otherwise).

        Raises:
            TopicAlreadyExistsError, KraftError: as `ControllerClient.create_topic`.
        """
        epoch = self.broker_epoch if self.broker_epoch is not None else -1
        await self._blocking(
            self._control_executor,
            self._controllers.create_topic,
            name,
            partitions,
            replication_factor,
            configs=configs,
            timeout=10.0,
            as_broker=(self.node_id, epoch),
        )

    async def list_latest_offsets(
        self, leader_id: int, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """`replication.broker.host.GroupHost.list_latest_offsets`, over gRPC."""
        return await list_latest_offsets(self.image, self.broker_stub, leader_id, partitions)

    async def allocate_producer_ids(self) -> AllocateProducerIdsResponse:
        epoch = self.broker_epoch if self.broker_epoch is not None else -1
        request = AllocateProducerIdsRequest(broker_id=self.node_id, broker_epoch=epoch)
        response: AllocateProducerIdsResponse = await self._blocking(
            self._control_executor, self._controllers.send, request, timeout=5.0
        )
        return response


# -- the process ---------------------------------------------------------------------------------


__all__ = ["BrokerServer"]
