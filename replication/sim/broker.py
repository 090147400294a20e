"""`SimBroker`: the simulator's version of the broker shell (``replication.broker``), one per
broker of a `BrokerCluster`.

It registers and heartbeats with the active controller (following NOT_CONTROLLER hints, moving on
after a timeout), learns metadata the KRaft way, as a Raft *observer* (a non-voting `RaftNode`
on its own `SimDisk`) that fetches the committed metadata log from the quorum's leader and
replays it into its `MetadataImage`, reconciles its replicas with that image by the broker's
rules (`replication.broker.replicas.reconcile`), and runs each replica through the partition driver
the broker runs (`replication.driver`, opened by `open_partition_driver`): becoming leader or
follower, appends, truncation, the high watermark, producer state and snapshots and the
high-watermark checkpoint are the broker's code, not a copy.

Produce and Fetch (followers' and consumers') are answered by the broker's own handlers
(`replication.broker.service.BrokerService`, with this broker as its `ReplicaHost` and the
simulated clock): the same routing, leader-epoch fencing, range checks, follower bookkeeping
and answers. Only the waiting is the simulator's, without an event loop: a produce waits for
its core's completion, and a fetch that is not `fetch_satisfied` is parked for up to its
``max_wait_ms`` (Kafka's ``replica.fetch.wait.max.ms``) and run again when a batch is appended.
Followers pull with one fetch in flight, as one-partition ``Broker.Fetch`` requests built and
read as the broker's `LeaderFetcher` does. Every request has a timeout that comes back to the
core as REQUEST_TIMED_OUT. Logs are
`SimPartitionLog`s that a power loss cuts back to their last flush; a process crash loses only
memory. A broker ticks every ``tick_ms``; every periodic loop is driven by the scheduler, so
each seed is a bounded, exact replay.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, final

from kraft.controller.messages import (
    AllocateProducerIdsResponse,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    RegisterBrokerRequest,
)
from kraft.metadata import decode_record
from kraft.metadata.image import MetadataImage, PartitionRegistration
from kraft.metadata.records import MetadataRecord
from kraft.raft.messages import RaftMessage
from kraft.sim.cluster_log import SimPartitionLog
from kraft.sim.cluster_network import Envelope
from kraft.sim.cluster_raft import RaftHost
from kraft.types import NodeId, Offset, TopicPartition
from replication.broker.replicas.fetcher import fetch_partition, follower_answer, follower_response
from replication.broker.replicas.reconcile import (
    broker_statuses,
    hosted_partitions,
    is_adding_replica,
    may_reconcile,
)
from replication.broker.replicas.throttle import ThrottleBucket
from replication.broker.service import BrokerService
from replication.core import (
    AlterPartitionSend,
    BrokerStatus,
    FollowerFetchRequest,
    FollowerFetchResponse,
    ReplicationConfig,
)
from replication.driver import MemorySnapshotStore, ReplicationMode, open_partition_driver
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
    FetchTopic,
)
from replication.sim.broker_requests import ClientRequest, ClientRequests
from replication.sim.controller import (
    QUIET,
    ControllerRouter,
)
from replication.sim.messages import (
    AlterReq,
    AlterResp,
    FetchReq,
    FetchResp,
    HeartbeatReq,
    HeartbeatResp,
    PartitionRaft,
    RegisterReq,
    RegisterResp,
)
from replication.sim.replica import ReplicaDisk, SimLogCheckpoint, SimReplica
from storage.errors import ErrorCode, InvariantViolation
from storage.records import BatchHeader, offset_values

if TYPE_CHECKING:
    from replication.sim.cluster import BrokerCluster


@dataclass(slots=True)
class _PendingFetch:
    replica: SimReplica
    generation: int
    request: FollowerFetchRequest
    deadline_ms: int


@dataclass(slots=True)
class _PendingAlter:
    replica: SimReplica
    generation: int
    alter_id: int
    partition: int
    deadline_ms: int


@final
class SimBroker:
    """One broker: its disks survive crashes; everything else is one incarnation's memory."""

    def __init__(self, cluster: BrokerCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.disks: dict[TopicPartition, ReplicaDisk] = {}
        self.up = False
        self.paused = False
        self.incarnation = 0
        self.inbox: list[Envelope] = []
        self.crashes = 0
        self.observer = RaftHost(cluster.raft_env, NodeId(node_id), self)
        """The metadata log's observer; its disk (and its snapshots) survive crashes."""
        self._reset_memory()

    def _reset_memory(self) -> None:
        self.broker_epoch: int | None = None
        self.image = MetadataImage.empty()
        self.image_changed = False
        self.replicas: dict[TopicPartition, SimReplica] = {}
        self.pending_fetches: dict[int, _PendingFetch] = {}
        self.pending_alters: dict[int, _PendingAlter] = {}
        self.register_rpc: int | None = None
        self.controller_rpcs: dict[int, int] = {}
        """rpc -> deadline of each registration or heartbeat in flight."""
        self.router = ControllerRouter(
            self.cluster.controller_ids, random.Random(self.cluster.rng.getrandbits(32))
        )
        self.next_register_ms = 0
        self.next_heartbeat_ms = 0
        self.next_flush_ms = 0
        self.next_checkpoint_ms = 0
        self.stopping = False
        self.leader_throttle = ThrottleBucket()
        """Unlimited: the simulator runs no reassignment throttles."""
        self.service = BrokerService(self, now_ms=lambda: self.cluster.clock.now_ms)
        """The broker's Produce and Fetch handlers, over this broker (a `ReplicaHost`)."""
        self.requests = ClientRequests(self)
        """The answers to clients' (and followers') requests, and their waiting."""

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        assert not self.up
        self.up = True
        self.paused = False
        self.incarnation += 1
        self._reset_memory()
        now = self.cluster.clock.now_ms
        self.next_flush_ms = now + self.cluster.config.flush_interval_ms
        self.next_checkpoint_ms = now + self.cluster.config.checkpoint_interval_ms
        inc = self.incarnation
        self.observer.start()
        self.cluster.scheduler.after(0, lambda: self._tick(inc))

    def crash(self, *, power_loss: bool) -> None:
        """Kill the process; with ``power_loss`` every log loses its unflushed tail too."""
        if not self.up:
            return
        self.up = False
        self.paused = False
        self.incarnation += 1
        self.crashes += 1
        self.inbox.clear()
        self.observer.crash()
        self._reset_memory()
        if power_loss:
            for disk in self.disks.values():
                disk.log.lose_unflushed()
        self.cluster.checker.on_crash(self.node_id)

    def pause(self) -> None:
        if self.up:
            self.paused = True
            self.observer.pause()

    def resume(self) -> None:
        if not self.paused:
            return
        self.paused = False
        self.observer.resume()
        inbox, self.inbox = self.inbox, []
        inc = self.incarnation
        for envelope in inbox:
            if self.incarnation != inc or self.paused:
                break
            self._handle(envelope)

    # --- the periodic loop --------------------------------------------------------------------

    def _send(self, destination: int, payload: object) -> None:
        self.cluster.network.send(self.node_id, destination, payload)

    def _tick(self, incarnation: int) -> None:
        if incarnation != self.incarnation or not self.up:
            return
        config = self.cluster.config
        self.cluster.scheduler.after(config.tick_ms, lambda: self._tick(incarnation))
        if self.paused:
            return
        now = self.cluster.clock.now_ms
        expired = [r for r, deadline in self.controller_rpcs.items() if deadline <= now]
        if expired:
            for rpc in expired:
                del self.controller_rpcs[rpc]
            self.router.failed()
        if self.broker_epoch is None:
            if now >= self.next_register_ms:
                self.next_register_ms = now + 100
                self.register_rpc = self._controller_rpc(now)
                request = RegisterBrokerRequest(
                    broker_id=NodeId(self.node_id),
                    incarnation_id=f"{self.node_id}-{self.incarnation}",
                )
                self._send(self.router.target(), RegisterReq(request, self.register_rpc))
        elif now >= self.next_heartbeat_ms:
            self.next_heartbeat_ms = now + config.heartbeat_interval_ms
            request_hb = BrokerHeartbeatRequest(
                broker_id=NodeId(self.node_id),
                broker_epoch=self.broker_epoch,
                current_metadata_offset=Offset(self.image.last_offset),
            )
            self._send(self.router.target(), HeartbeatReq(request_hb, self._controller_rpc(now)))
        self._expire_requests(now)
        for replica in list(self.replicas.values()):
            replica.driver.tick(now)
            self._maybe_fetch(replica)
        self.requests.tick(now)
        if now >= self.next_flush_ms:
            self.next_flush_ms = now + config.flush_interval_ms
            for disk in self.disks.values():
                disk.log.flush()
        if now >= self.next_checkpoint_ms:
            self.next_checkpoint_ms = now + config.checkpoint_interval_ms
            for replica in self.replicas.values():
                replica.driver.checkpoint_high_watermark()

    def _controller_rpc(self, now: int) -> int:
        rpc = self.cluster.next_rpc()
        self.controller_rpcs[rpc] = now + self.cluster.config.controller_request_timeout_ms
        return rpc

    def _controller_answered(self, source: int, rpc: int, code: ErrorCode, leader: int) -> bool:
        """Route by the answer; False if it was NOT_CONTROLLER."""
        self.controller_rpcs.pop(rpc, None)
        if code is ErrorCode.NOT_CONTROLLER:
            self.router.redirect(source, leader)
            return False
        self.router.confirmed(source)
        return True

    def _expire_requests(self, now: int) -> None:
        for rpc in [r for r, p in self.pending_fetches.items() if p.deadline_ms <= now]:
            fetch = self.pending_fetches.pop(rpc)
            self._on_fetch_response(
                fetch,
                FollowerFetchResponse(
                    fetch_id=fetch.request.fetch_id, error_code=ErrorCode.REQUEST_TIMED_OUT
                ),
            )
        for rpc in [r for r, p in self.pending_alters.items() if p.deadline_ms <= now]:
            alter = self.pending_alters.pop(rpc)
            self.router.failed()
            self._on_alter_result(
                alter,
                AlterPartitionPartitionResult(
                    partition=alter.partition, error_code=ErrorCode.REQUEST_TIMED_OUT
                ),
            )

    # --- inbound ------------------------------------------------------------------------------

    def deliver(self, envelope: Envelope) -> None:
        if not self.up:
            return
        if self.paused:
            self.inbox.append(envelope)
            return
        self._handle(envelope)

    def _handle(self, envelope: Envelope) -> None:
        msg = envelope.payload
        if isinstance(msg, RaftMessage):
            self.observer.deliver(msg)
        elif isinstance(msg, PartitionRaft):
            replica = self.replicas.get(msg.tp)
            if replica is not None:  # NB: not opened yet (or gone): Raft retries
                replica.driver.handle_raft_message(msg.message, self.cluster.clock.now_ms)
        elif isinstance(msg, ClientRequest):
            self.requests.handle(envelope.source, msg)
        elif isinstance(msg, FetchResp):
            fetch = self.pending_fetches.pop(msg.rpc, None)
            if fetch is not None:
                self._on_fetch_response(fetch, _follower_part(fetch.request, msg.response))
        elif isinstance(msg, AlterResp):
            alter = self.pending_alters.pop(msg.rpc, None)
            if alter is not None:
                if msg.response.error_code is ErrorCode.NOT_CONTROLLER:
                    self.router.redirect(envelope.source, msg.leader)
                else:
                    self.router.confirmed(envelope.source)
                self._on_alter_response(alter, msg)
        elif isinstance(msg, HeartbeatResp):
            code = msg.response.error_code
            if not self._controller_answered(envelope.source, msg.rpc, code, msg.leader):
                self.next_heartbeat_ms = self.cluster.clock.now_ms  # at once, to the leader
            elif code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
                self.broker_epoch = None  # registration lost: register again
        elif isinstance(msg, RegisterResp):
            code = msg.response.error_code
            if not self._controller_answered(envelope.source, msg.rpc, code, msg.leader):
                self.next_register_ms = self.cluster.clock.now_ms
            elif (
                msg.rpc == self.register_rpc
                and self.broker_epoch is None
                and code is ErrorCode.NONE
            ):
                self._on_registered(msg.response.broker_epoch)

    def _on_registered(self, broker_epoch: int) -> None:
        now = self.cluster.clock.now_ms
        if self.replicas:  # a new registration: the old replicas are void (as the broker's)
            for replica in self.replicas.values():
                replica.driver.stop(now)
                replica.driver.close()
            self.replicas.clear()
            self.cluster.checker.on_crash(self.node_id)
            self.pending_fetches.clear()
            self.pending_alters.clear()
            self.requests.parked.clear()
        self.broker_epoch = broker_epoch
        self.next_heartbeat_ms = now
        self._reconcile()

    # --- the metadata observer (HostedStateMachine) -------------------------------------------

    def restore(self, data: bytes | None) -> None:
        self.image = MetadataImage.empty() if data is None else MetadataImage.from_snapshot(data)
        self.image_changed = True

    def apply_batch(self, batch: bytes, header: BatchHeader) -> None:
        if header.is_control:
            return
        records: list[MetadataRecord] = [
            decode_record(value or b"") for _, value in offset_values(batch)
        ]
        self.image = self.image.apply_batch(
            records, header.base_offset, header.partition_leader_epoch
        )
        self.image_changed = True

    def applied(self) -> None:
        if self.image_changed and self.up and self.observer.is_up:
            self.image_changed = False
            self._reconcile()

    def snapshot(self) -> bytes:
        return self.image.to_snapshot()

    def after_activity(self) -> None:
        pass

    # --- the broker as its partition APIs see it (`replication.broker.host.ReplicaHost`) ------

    def is_adding_replica(self, tp: TopicPartition, replica_id: int) -> bool:
        return is_adding_replica(self.image, tp, replica_id)

    def controller_leader_id(self) -> int | None:
        return None  # no Metadata requests in the simulator

    async def allocate_producer_ids(self) -> AllocateProducerIdsResponse:
        raise InvariantViolation("the simulator sends no InitProducerId")

    # --- metadata (`replication.broker.replicas.reconcile`, PartitionReplica.apply_registration)

    def _reconcile(self) -> None:
        epoch = self.broker_epoch
        image = self.image
        if not may_reconcile(image, epoch):
            return  # not before the image holds our own registration (KIP-841, seed 0x9e)
        assert epoch is not None
        brokers = broker_statuses(image)
        config = self.cluster.replication
        wanted: set[TopicPartition] = set()
        for topic, index, registration in hosted_partitions(image, self.node_id):
            tp = TopicPartition(topic.name, index)
            wanted.add(tp)
            replica = self.replicas.get(tp)
            if replica is None:
                replica = self._open_replica(tp, topic.topic_id)
            self._apply_registration(replica, registration, brokers, config)
        # A replica a reassignment moved away (KIP-455): stopped and its log deleted, as the
        # broker does (`ReplicaManager.reconcile`).
        now = self.cluster.clock.now_ms
        for tp in [tp for tp in self.replicas if tp not in wanted]:
            replica = self.replicas.pop(tp)
            replica.driver.stop(now)
            replica.driver.close()
            self.disks.pop(tp, None)
            self.requests.forget(tp)
            self.cluster.checker.on_replica_removed(self.node_id, tp)
        # A log left by a replica moved away while this broker was down: a stray, deleted as
        # the broker deletes it once its image holds its registration.
        for tp in [tp for tp in self.disks if tp not in wanted and tp not in self.replicas]:
            del self.disks[tp]

    def _open_replica(self, tp: TopicPartition, topic_id: str) -> SimReplica:
        disk = self.disks.get(tp)
        if disk is None:
            disk = self.disks[tp] = ReplicaDisk(SimPartitionLog(), MemorySnapshotStore())
        replica = SimReplica(self, tp, topic_id, disk.log)
        epoch = self.broker_epoch
        assert epoch is not None
        mode = self.cluster.config.replication_mode(tp.partition)
        quorum = mode is ReplicationMode.QUORUM
        replica.driver = open_partition_driver(
            mode,
            topic_partition=tp,
            topic_id=topic_id,
            directory=Path(f"broker-{self.node_id}/{tp}"),
            log=disk.log,
            snapshots=disk.snapshots,
            checkpoint=SimLogCheckpoint(disk.log),
            quorum_state=disk.quorum_state if quorum else None,
            local_id=self.node_id,
            broker_epoch=epoch,
            events=replica,
            truncation_strategy=self.cluster.config.truncation_strategy,
            logger=QUIET,
            # NB: drawn only for quorum replicas, so ISR seeds replay as before.
            rng=random.Random(self.cluster.rng.getrandbits(64)) if quorum else None,
            raft_config=self.cluster.partition_raft_config if quorum else None,
            write_caching=self.cluster.config.quorum_write_caching,
        )
        self.replicas[tp] = replica
        self.cluster.checker.on_open(self.node_id, tp, disk.log, replica.high_watermark)
        return replica

    def _apply_registration(
        self,
        replica: SimReplica,
        registration: PartitionRegistration,
        brokers: dict[int, BrokerStatus],
        config: ReplicationConfig,
    ) -> None:
        now = self.cluster.clock.now_ms
        replica.driver.apply_registration(registration, brokers, config, now)
        self._maybe_fetch(replica)

    def send_partition_raft(self, tp: TopicPartition, message: RaftMessage) -> None:
        """A quorum-mode replica's Raft message, to its destination broker's replica."""
        self._send(message.destination, PartitionRaft(tp, message))

    def send_alter(self, replica: SimReplica, generation: int, send: AlterPartitionSend) -> None:
        epoch = self.broker_epoch
        assert epoch is not None
        alter_id, data = send.alter_id, send.data
        rpc = self.cluster.next_rpc()
        now = self.cluster.clock.now_ms
        self.pending_alters[rpc] = _PendingAlter(
            replica=replica,
            generation=generation,
            alter_id=alter_id,
            partition=replica.tp.partition,
            deadline_ms=now + self.cluster.config.request_timeout_ms,
        )
        request = AlterPartitionRequest(
            broker_id=NodeId(self.node_id),
            broker_epoch=epoch,
            topics=(AlterPartitionTopic(topic_id=replica.topic_id, partitions=(data,)),),
        )
        self.cluster.notify("alter_sent", self.node_id, replica.tp)
        self._send(self.router.target(), AlterReq(request, rpc))

    def _on_alter_response(self, alter: _PendingAlter, msg: AlterResp) -> None:
        response = msg.response
        if response.error_code is not ErrorCode.NONE:
            result = AlterPartitionPartitionResult(
                partition=alter.partition, error_code=response.error_code
            )
        else:
            result = response.topics[0].partitions[0]
        self._on_alter_result(alter, result)

    def _on_alter_result(self, alter: _PendingAlter, result: AlterPartitionPartitionResult) -> None:
        replica = alter.replica
        if self.replicas.get(replica.tp) is not replica:
            return
        replica.driver.handle_alter_partition_result(
            alter.generation, alter.alter_id, result, self.cluster.clock.now_ms
        )

    # --- follower fetch -----------------------------------------------------------------------

    def _maybe_fetch(self, replica: SimReplica) -> None:
        driver = replica.driver
        now = self.cluster.clock.now_ms
        request = driver.build_fetch_request(now)
        if request is None:
            return
        rpc = self.cluster.next_rpc()
        self.pending_fetches[rpc] = _PendingFetch(
            replica, driver.generation, request, now + self.cluster.config.request_timeout_ms
        )
        max_bytes = self.cluster.config.fetch_max_bytes
        partition = fetch_partition(request, max_bytes)
        wire = BrokerFetchRequest(
            replica_id=self.node_id,
            replica_epoch=request.broker_epoch,
            max_wait_ms=self.cluster.config.fetch_max_wait_ms,
            max_bytes=max_bytes,
            topics=(FetchTopic(topic=replica.tp.topic, partitions=(partition,)),),
        )
        self._send(request.leader_id, FetchReq(wire, rpc))

    def _on_fetch_response(self, fetch: _PendingFetch, response: FollowerFetchResponse) -> None:
        replica = fetch.replica
        if self.replicas.get(replica.tp) is not replica:
            return
        if replica.driver.generation != fetch.generation:
            return  # a newer role: it has no fetch in flight
        replica.driver.handle_fetch_response(fetch.generation, response, self.cluster.clock.now_ms)
        self._maybe_fetch(replica)


def _follower_part(
    request: FollowerFetchRequest, response: BrokerFetchResponse
) -> FollowerFetchResponse:
    """The follower core's part of a one-partition Fetch response (as `LeaderFetcher` reads
    it: a partition the leader did not answer is an error)."""
    tp = request.topic_partition
    for topic in response.responses:
        for data in topic.partitions:
            if topic.topic == tp.topic and data.partition_index == tp.partition:
                return follower_answer(request, data)
    code = response.error_code
    if code is ErrorCode.NONE:
        code = ErrorCode.UNKNOWN_SERVER_ERROR
    return follower_response(request, error_code=code)


__all__ = ["SimBroker"]
