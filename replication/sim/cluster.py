"""`BrokerCluster`: a controller quorum and N brokers on the simulator's harness, one seed.

The controllers are `SimController`s (``controller.py``): three Raft voters running the
controller's core.

Each `SimBroker` is the simulator's version of the broker shell (``replication.broker``): it
registers and heartbeats with the active controller (following NOT_CONTROLLER hints, moving on
after a timeout), learns metadata the KRaft way, as a Raft *observer* (a non-voting
`RaftNode` on its own `SimDisk`) that fetches the committed metadata log from the quorum's
leader and replays it into its `MetadataImage`, reconciles its replicas with that image exactly
as ``BrokerServer._reconcile`` and ``PartitionReplica.apply_registration`` do, and drives a
`PartitionLeader` or `PartitionFollower` per replica with the Ready contract of
``replication.core``. Followers pull with one fetch in flight; a leader parks a fetch that
finds nothing new for up to ``fetch_max_wait_ms`` (Kafka's ``replica.fetch.wait.max.ms``) and
answers it when a batch is appended. Every request has a timeout that comes back to the core
as REQUEST_TIMED_OUT. Consumers' fetches are answered from the leader's log below its high
watermark, as ``replication.broker.service`` does. Logs are `SimPartitionLog`s that a power
loss cuts back to their last flush; a process crash loses only memory. A broker ticks every
``tick_ms``; every periodic loop is driven by the scheduler, so each seed is a bounded, exact
replay.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from kraft.controller.messages import (
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    RegisterBrokerRequest,
)
from kraft.metadata import decode_record
from kraft.metadata.image import MetadataImage, PartitionRegistration
from kraft.metadata.records import MetadataRecord
from kraft.raft import RaftConfig
from kraft.raft.messages import RaftMessage
from kraft.sim.checker import RaftChecker
from kraft.sim.cluster_log import SimPartitionLog
from kraft.sim.cluster_network import Envelope, EnvelopeNetwork
from kraft.sim.cluster_raft import RaftEnv, RaftHost
from kraft.sim.network import LinkProfile
from kraft.sim.scheduler import Scheduler, SimClock
from kraft.types import NodeId, TopicPartition
from replication.core import (
    AlterPartitionSend,
    BrokerStatus,
    FollowerFetchRequest,
    FollowerFetchResponse,
    FollowerReady,
    PartitionFollower,
    PartitionLeader,
    PartitionProduce,
    ProduceCompletion,
    ProducerStateManager,
    ReplicationConfig,
)
from replication.sim.controller import (
    QUIET,
    TOPIC,
    ClusterConfig,
    ControllerRouter,
    SimController,
)
from replication.sim.messages import (
    AlterReq,
    AlterResp,
    ConsumeReq,
    ConsumeResp,
    FetchReq,
    FetchResp,
    HeartbeatReq,
    HeartbeatResp,
    ProduceReq,
    ProduceResp,
    RegisterReq,
    RegisterResp,
)
from storage.errors import ErrorCode
from storage.records import BatchHeader, iter_batches, offset_values

if TYPE_CHECKING:
    from replication.sim.checker import ClusterChecker

# --- the brokers --------------------------------------------------------------------------------


def apply_follower_log_writes(
    log: SimPartitionLog, producer_state: ProducerStateManager, rd: FollowerReady
) -> None:
    """A follower Ready's log writes on an in-memory log, in the Ready's order: truncate,
    append, then rebuild the producer state (from the whole log: there are no snapshots)."""
    if rd.truncate_fully_and_start_at is not None:
        log.truncate_fully_and_start_at(rd.truncate_fully_and_start_at)
    if rd.truncate_to is not None:
        log.truncate_to(rd.truncate_to)
        log.leader_epoch_cache.truncate_from_end(log.log_end_offset)
    if rd.append:
        log.append_as_follower(rd.append)
    if rd.rebuild_producer_state:
        producer_state.reload(None, log.headers(), start_offset=log.log_start_offset)


@dataclass(slots=True, kw_only=True)
class SimReplica:
    tp: TopicPartition
    topic_id: str
    log: SimPartitionLog
    producer_state: ProducerStateManager
    high_watermark: int
    core: PartitionLeader | PartitionFollower | None = None
    fetched_epoch: int = -1
    """The leader epoch in which the follower core last took records and a HW from its
    leader (from then on its HW is the leader's)."""


@dataclass(slots=True)
class _PendingFetch:
    tp: TopicPartition
    core: PartitionFollower
    request: FollowerFetchRequest
    deadline_ms: int


@dataclass(slots=True)
class _PendingAlter:
    tp: TopicPartition
    core: PartitionLeader
    alter_id: int
    partition: int
    deadline_ms: int


@dataclass(slots=True)
class _Parked:
    source: int
    msg: FetchReq
    deadline_ms: int


@final
class SimBroker:
    """One broker: its disks survive crashes; everything else is one incarnation's memory."""

    def __init__(self, cluster: BrokerCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.disks: dict[TopicPartition, SimPartitionLog] = {}
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
        self.waiting_produces: dict[int, tuple[int, int]] = {}
        self.parked: dict[TopicPartition, list[_Parked]] = {}
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
        self.next_request_id = 1

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
            for log in self.disks.values():
                log.lose_unflushed()
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
                    broker_id=self.node_id, incarnation_id=f"{self.node_id}-{self.incarnation}"
                )
                self._send(self.router.target(), RegisterReq(request, self.register_rpc))
        elif now >= self.next_heartbeat_ms:
            self.next_heartbeat_ms = now + config.heartbeat_interval_ms
            request_hb = BrokerHeartbeatRequest(
                broker_id=self.node_id,
                broker_epoch=self.broker_epoch,
                current_metadata_offset=self.image.last_offset,
            )
            self._send(self.router.target(), HeartbeatReq(request_hb, self._controller_rpc(now)))
        self._expire_requests(now)
        for replica in list(self.replicas.values()):
            core = replica.core
            if isinstance(core, PartitionLeader):
                core.tick(now)
                self._drain(replica)
            elif isinstance(core, PartitionFollower):
                self._maybe_fetch(replica)
        for tp in list(self.parked):
            due = [p for p in self.parked[tp] if p.deadline_ms <= now]
            if due:
                self.parked[tp] = [p for p in self.parked[tp] if p.deadline_ms > now]
                for p in due:
                    self._answer_fetch(p.source, p.msg, park=False)
        if now >= self.next_flush_ms:
            self.next_flush_ms = now + config.flush_interval_ms
            for log in self.disks.values():
                log.flush()
        if now >= self.next_checkpoint_ms:
            self.next_checkpoint_ms = now + config.checkpoint_interval_ms
            for replica in self.replicas.values():
                replica.log.checkpoint_high_watermark(replica.high_watermark)

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
        elif isinstance(msg, FetchReq):
            self._answer_fetch(envelope.source, msg, park=True)
        elif isinstance(msg, FetchResp):
            fetch = self.pending_fetches.pop(msg.rpc, None)
            if fetch is not None:
                self._on_fetch_response(fetch, msg.response)
        elif isinstance(msg, ProduceReq):
            self._on_produce(envelope.source, msg)
        elif isinstance(msg, ConsumeReq):
            self._on_consume(envelope.source, msg)
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
        if self.replicas:  # a new registration: the old replicas' cores are void
            for replica in self.replicas.values():
                if isinstance(replica.core, PartitionLeader):
                    replica.core.resign(now)
                    self._drain(replica)
            self.replicas.clear()
            self.cluster.checker.on_crash(self.node_id)
            self.pending_fetches.clear()
            self.pending_alters.clear()
            self.parked.clear()
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

    # --- metadata (BrokerServer._reconcile, PartitionReplica.apply_registration) --------------

    def _reconcile(self) -> None:
        epoch = self.broker_epoch
        image = self.image
        if epoch is None or image.last_offset < epoch:
            # KRaft: a broker acts on partition metadata only once it has replayed its own
            # registration (offset == broker epoch), which moved its old incarnation's
            # leaderships away (KIP-841). Before that its image may still name it the leader
            # of an epoch whose log it lost: answering fetches then would make followers
            # truncate committed records (the simulator found this; see docs/architecture.md).
            return
        brokers = {
            b: BrokerStatus(
                broker_epoch=r.broker_epoch,
                fenced=r.fenced,
                in_controlled_shutdown=r.in_controlled_shutdown,
            )
            for b, r in image.brokers.items()
        }
        config = self.cluster.replication
        for topic, index, registration in image.iter_partitions():
            if self.node_id not in registration.replicas:
                continue
            tp = TopicPartition(topic.name, index)
            replica = self.replicas.get(tp)
            if replica is None:
                replica = self._open_replica(tp, topic.topic_id)
            self._apply_registration(replica, registration, brokers, config, epoch)

    def _open_replica(self, tp: TopicPartition, topic_id: str) -> SimReplica:
        log = self.disks.get(tp)
        if log is None:
            log = self.disks[tp] = SimPartitionLog()
        producer_state = ProducerStateManager(map_end_offset=log.log_start_offset)
        producer_state.load_from_batches(log.headers())
        high_watermark = min(max(log.checkpoint, log.log_start_offset), log.log_end_offset)
        replica = SimReplica(
            tp=tp,
            topic_id=topic_id,
            log=log,
            producer_state=producer_state,
            high_watermark=high_watermark,
        )
        self.replicas[tp] = replica
        self.cluster.checker.on_open(self.node_id, tp, log, high_watermark)
        return replica

    def _apply_registration(
        self,
        replica: SimReplica,
        registration: PartitionRegistration,
        brokers: dict[int, BrokerStatus],
        config: ReplicationConfig,
        broker_epoch: int,
    ) -> None:
        now = self.cluster.clock.now_ms
        core = replica.core
        if isinstance(core, PartitionLeader):
            core.update_brokers(brokers, now)
            if core.handle_partition_change(registration, now):
                self._drain(replica)
                return
            self._drain(replica)
            replica.core = None
        elif isinstance(core, PartitionFollower):
            if core.handle_partition_change(registration, now):
                self._drain(replica)
                self._maybe_fetch(replica)
                return
            self._drain(replica)
            replica.core = None
        replica.fetched_epoch = -1
        if registration.leader == self.node_id:
            replica.core = PartitionLeader(
                topic_partition=replica.tp,
                local_id=self.node_id,
                local_broker_epoch=broker_epoch,
                registration=registration,
                brokers=brokers,
                log=replica.log,
                producer_state=replica.producer_state,
                config=config,
                high_watermark=replica.high_watermark,
                now_ms=now,
                logger=QUIET,
            )
        elif registration.leader >= 0:
            replica.core = PartitionFollower(
                topic_partition=replica.tp,
                local_id=self.node_id,
                local_broker_epoch=broker_epoch,
                leader_id=registration.leader,
                leader_epoch=registration.leader_epoch,
                log=replica.log,
                producer_state=replica.producer_state,
                config=config,
                high_watermark=replica.high_watermark,
                now_ms=now,
                truncation_strategy=self.cluster.config.truncation_strategy,
                logger=QUIET,
            )
        self._drain(replica)
        self._maybe_fetch(replica)

    # --- the Ready loop (PartitionReplica.drain) ----------------------------------------------

    def _drain(self, replica: SimReplica) -> None:
        core = replica.core
        log = replica.log
        checker = self.cluster.checker
        if isinstance(core, PartitionLeader):
            while core.has_ready():
                rd = core.ready()
                if rd.assign_epoch_start is not None:
                    log.leader_epoch_cache.assign(*rd.assign_epoch_start)
                self._publish(replica, rd.high_watermark, core.leader_epoch, is_leader=True)
                for completion in rd.produce_completions:
                    self._answer_produce(completion)
                if rd.alter_partition is not None:
                    self._send_alter(replica, core, rd.alter_partition)
                core.advance(rd)
            checker.on_core(self.node_id, replica.tp, core.leader_epoch)
        elif isinstance(core, PartitionFollower):
            while core.has_ready():
                frd = core.ready()
                apply_follower_log_writes(log, replica.producer_state, frd)
                self._publish(replica, frd.high_watermark, core.leader_epoch, is_leader=False)
                core.advance(frd)
            checker.on_core(self.node_id, replica.tp, core.leader_epoch)

    def _publish(
        self, replica: SimReplica, high_watermark: int, leader_epoch: int, *, is_leader: bool
    ) -> None:
        old = replica.high_watermark
        replica.high_watermark = high_watermark
        self.cluster.checker.on_high_watermark(
            self.node_id,
            replica.tp,
            replica.log,
            old,
            high_watermark,
            leader_epoch,
            is_leader=is_leader,
            from_leader=is_leader or replica.fetched_epoch == leader_epoch,
        )

    def _send_alter(
        self, replica: SimReplica, core: PartitionLeader, send: AlterPartitionSend
    ) -> None:
        epoch = self.broker_epoch
        assert epoch is not None
        alter_id, data = send.alter_id, send.data
        rpc = self.cluster.next_rpc()
        now = self.cluster.clock.now_ms
        self.pending_alters[rpc] = _PendingAlter(
            tp=replica.tp,
            core=core,
            alter_id=alter_id,
            partition=replica.tp.partition,
            deadline_ms=now + self.cluster.config.request_timeout_ms,
        )
        request = AlterPartitionRequest(
            broker_id=self.node_id,
            broker_epoch=epoch,
            topics=(AlterPartitionTopic(topic_id=replica.topic_id, partitions=(data,)),),
        )
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
        replica = self.replicas.get(alter.tp)
        if replica is None or replica.core is not alter.core:
            return
        alter.core.handle_alter_partition_response(
            alter.alter_id, result, self.cluster.clock.now_ms
        )
        self._drain(replica)

    # --- follower fetch -----------------------------------------------------------------------

    def _maybe_fetch(self, replica: SimReplica) -> None:
        core = replica.core
        if not isinstance(core, PartitionFollower):
            return
        now = self.cluster.clock.now_ms
        request = core.build_fetch_request(now)
        if request is None:
            return
        rpc = self.cluster.next_rpc()
        self.pending_fetches[rpc] = _PendingFetch(
            replica.tp, core, request, now + self.cluster.config.request_timeout_ms
        )
        self._send(request.leader_id, FetchReq(replica.tp, request, rpc))

    def _on_fetch_response(self, fetch: _PendingFetch, response: FollowerFetchResponse) -> None:
        replica = self.replicas.get(fetch.tp)
        if replica is None or replica.core is not fetch.core:
            return
        in_flight = fetch.core.fetch_in_flight
        taken = in_flight is not None and in_flight.fetch_id == response.fetch_id
        fetch.core.handle_fetch_response(response, self.cluster.clock.now_ms)
        if taken and response.error_code is ErrorCode.NONE and response.diverging_epoch is None:
            replica.fetched_epoch = fetch.request.current_leader_epoch
        self._drain(replica)
        self._maybe_fetch(replica)

    def _answer_fetch(self, source: int, msg: FetchReq, *, park: bool) -> None:
        replica = self.replicas.get(msg.tp)
        core = None if replica is None else replica.core
        if replica is None or not isinstance(core, PartitionLeader):
            error = FollowerFetchResponse(
                fetch_id=msg.request.fetch_id, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
            self._send(source, FetchResp(error, msg.rpc))
            return
        request = msg.request
        now = self.cluster.clock.now_ms
        answer = core.handle_follower_fetch(
            request.as_follower_fetch(),
            now,
        )
        self._drain(replica)
        records = b""
        if answer.read_offset is not None:
            if park and answer.read_offset >= replica.log.log_end_offset:
                deadline = now + self.cluster.config.fetch_max_wait_ms
                self.parked.setdefault(msg.tp, []).append(_Parked(source, msg, deadline))
                return
            records = replica.log.read(answer.read_offset, self.cluster.config.fetch_max_bytes)
        response = FollowerFetchResponse(
            fetch_id=request.fetch_id,
            error_code=answer.error_code,
            high_watermark=answer.high_watermark,
            log_start_offset=answer.log_start_offset,
            diverging_epoch=answer.diverging_epoch,
            records=records,
        )
        self._send(source, FetchResp(response, msg.rpc))

    # --- produce ------------------------------------------------------------------------------

    def _on_produce(self, source: int, msg: ProduceReq) -> None:
        replica = self.replicas.get(msg.tp)
        core = None if replica is None else replica.core
        if replica is None or not isinstance(core, PartitionLeader):
            completion = ProduceCompletion(
                request_id=-1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
            self._send(source, ProduceResp(completion, msg.rpc))
            return
        now = self.cluster.clock.now_ms
        rid = self.next_request_id
        self.next_request_id += 1
        self.waiting_produces[rid] = (source, msg.rpc)
        produce = PartitionProduce(
            request_id=rid, acks=msg.acks, timeout_ms=msg.timeout_ms, records=msg.records
        )
        append = core.handle_produce_request(produce, now)
        if append is not None:
            base = replica.log.append(append.records, leader_epoch=append.leader_epoch)
            self.cluster.checker.on_leader_append(self.node_id, msg.tp, append.leader_epoch, base)
            core.on_appended(rid, base, now)
        self._drain(replica)
        parked = self.parked.pop(msg.tp, [])
        for p in parked:
            self._answer_fetch(p.source, p.msg, park=False)

    def _on_consume(self, source: int, msg: ConsumeReq) -> None:
        """A consumer's fetch: whole batches from ``offset``, none reaching the HW (Kafka's
        ``maxOffset = highWatermark`` read for consumers)."""
        replica = self.replicas.get(msg.tp)
        core = None if replica is None else replica.core
        if replica is None or not isinstance(core, PartitionLeader):
            self._send(source, ConsumeResp(ErrorCode.NOT_LEADER_OR_FOLLOWER, b"", -1, -1, msg.rpc))
            return
        log = replica.log
        high_watermark = replica.high_watermark
        if msg.offset < log.log_start_offset or msg.offset > log.log_end_offset:
            answer = ConsumeResp(
                ErrorCode.OFFSET_OUT_OF_RANGE, b"", high_watermark, log.log_start_offset, msg.rpc
            )
            self._send(source, answer)
            return
        records = b""
        if msg.offset < high_watermark:
            data = log.read(msg.offset, msg.max_bytes)
            end = 0
            for pos, header in iter_batches(data):
                if header.next_offset > high_watermark:
                    break
                end = pos + header.size_bytes
            records = data[:end]
        self._send(
            source,
            ConsumeResp(ErrorCode.NONE, records, high_watermark, log.log_start_offset, msg.rpc),
        )

    def _answer_produce(self, completion: ProduceCompletion) -> None:
        waiting = self.waiting_produces.pop(completion.request_id, None)
        if waiting is not None:
            client, rpc = waiting
            self._send(client, ProduceResp(completion, rpc))


# --- the cluster --------------------------------------------------------------------------------


@final
class BrokerCluster:
    """Controllers ``101..100+config.controllers`` (a Raft quorum) and brokers
    ``1..config.brokers`` (its observers) on one scheduler and network."""

    def __init__(
        self,
        *,
        seed: int,
        config: ClusterConfig,
        checker: ClusterChecker,
        link: LinkProfile | None = None,
    ) -> None:
        self.seed = seed
        self.config = config
        self.replication = config.replication()
        self.rng = random.Random(seed)
        self.clock = SimClock()
        self.scheduler = Scheduler(self.clock)
        self.checker = checker
        self.clients: dict[int, Callable[[Envelope], None]] = {}
        self.network = EnvelopeNetwork(
            scheduler=self.scheduler,
            rng=random.Random(self.rng.getrandbits(64)),
            deliver=self._deliver,
            profile=link or LinkProfile(),
        )
        self._rpc = 0
        self.image = MetadataImage.empty()
        """The newest committed metadata image any node has replayed: the truth that clients'
        metadata refreshes see without lag (committed images agree offset by offset, which
        `RaftChecker` checks)."""
        self.controller_ids = config.controller_ids()
        voters = frozenset(self.controller_ids)
        self.raft_checker = RaftChecker(voters)
        self.raft_env = RaftEnv(
            scheduler=self.scheduler,
            clock=self.clock,
            rng=random.Random(self.rng.getrandbits(64)),
            checker=self.raft_checker,
            nodes={},
            send=self._send_raft,
            config=RaftConfig(fetch_snapshot_max_bytes=2048),
            voters=voters,
            logger=QUIET,
            snapshot_every_records=config.metadata_snapshot_every_records,
        )
        self.controllers = {i: SimController(self, i) for i in self.controller_ids}
        self.brokers = {i: SimBroker(self, i) for i in range(1, config.brokers + 1)}
        for controller in self.controllers.values():
            controller.start()
        for broker in self.brokers.values():
            broker.start()

    def next_rpc(self) -> int:
        self._rpc += 1
        return self._rpc

    def _send_raft(self, msg: RaftMessage) -> None:
        self.network.send(msg.source, msg.destination, msg)

    def _deliver(self, envelope: Envelope) -> None:
        destination = envelope.destination
        if destination in self.brokers:
            self.brokers[destination].deliver(envelope)
        elif destination in self.controllers:
            self.controllers[NodeId(destination)].deliver(envelope)
        else:
            self.clients[destination](envelope)

    def on_committed_image(self, image: MetadataImage) -> None:
        """A controller replayed a committed batch; the cluster checker sees each new one."""
        if image.last_offset > self.image.last_offset:
            self.image = image
            self.checker.on_metadata(image)

    def active_controller(self) -> SimController | None:
        active = [c for c in self.controllers.values() if c.is_active and not c.paused]
        return max(active, key=lambda c: c.core.epoch, default=None)

    def topic_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(TOPIC, p) for p in range(self.config.partitions)]

    def registration(self, tp: TopicPartition) -> PartitionRegistration | None:
        return self.image.partition_by_name(tp)


__all__ = ["BrokerCluster", "SimBroker", "SimReplica", "apply_follower_log_writes"]
