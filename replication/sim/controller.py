"""The simulated controller quorum, the clients' controller routing, and the cluster settings.

Each `SimController` is the simulator's version of ``kraft.controller.server.ControllerServer``:
a voter `RaftNode` (hosted by `kraft.sim.cluster_raft.RaftHost`, on a `SimDisk` that loses
unsynced writes on a crash) whose state machine is a `ControllerCore`:

- every committed metadata batch is decoded and replayed into the core, on every controller;
  snapshots are ``committed_image.to_snapshot()`` (KIP-630);
- a node becomes the active controller when the leader-change batch of its own epoch commits
  (``next_offset`` = its log end), and resigns on any leader change or foreign batch;
- a request (registration, heartbeat, AlterPartition, CreateTopics) is decided by the active
  core, its records proposed as one Raft entry list, and answered once that batch commits in
  the core's epoch; a decision without records waits for the records already in flight (it
  was read from the uncommitted image; Kafka's ``ControllerWriteEvent`` does the same); a
  non-active node, a failed propose or a lost batch answers NOT_CONTROLLER (built by a
  standby core, as the server does) with the Raft leader it knows;
- every ``tick_ms`` the active core's ``tick`` (session-timeout fencing, KIP-841) is proposed.

`ControllerRouter` is the clients' side (``kraft.controller.client.ControllerClient``): send to
the controller last seen active, follow a NOT_CONTROLLER hint, move on after a timeout.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar, final

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.controller import ControllerConfig, ControllerCore
from kraft.controller.result import ControllerResult
from kraft.metadata import MetadataImage, decode_record, encode_record
from kraft.metadata.records import MetadataRecord
from kraft.raft import NotLeaderError
from kraft.sim.cluster_network import Envelope
from kraft.sim.cluster_raft import RaftHost
from kraft.types import NodeId
from replication.core import ReplicationConfig, TruncationStrategy
from replication.driver import ReplicationMode
from replication.sim.messages import (
    AlterReq,
    AlterResp,
    CreateTopicsReq,
    CreateTopicsResp,
    HeartbeatReq,
    HeartbeatResp,
    ReassignReq,
    ReassignResp,
    RegisterReq,
    RegisterResp,
)
from storage.records import BatchHeader, offset_values

if TYPE_CHECKING:
    from replication.sim.cluster import BrokerCluster

CONTROLLER_BASE_ID: Final = 100
"""Controllers are nodes 101, 102, 103 (brokers are 1..N, clients 1000 and up)."""
TOPIC: Final = "events"
QUIET: FilteringBoundLogger = structlog.wrap_logger(
    structlog.PrintLogger(), wrapper_class=structlog.make_filtering_bound_logger(50)
)

Req = TypeVar("Req")
Resp = TypeVar("Resp")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterConfig:
    """The simulated cluster's settings (sim milliseconds), tuned so faults matter quickly."""

    brokers: int = 3
    controllers: int = 3
    partitions: int = 2
    replication_factor: int = 3
    min_insync_replicas: int = 2
    tick_ms: int = 10
    heartbeat_interval_ms: int = 50
    session_timeout_ms: int = 500
    """``broker.session.timeout.ms``."""
    controller_request_timeout_ms: int = 150
    """A controller RPC unanswered this long goes to the next controller."""
    request_timeout_ms: int = 250
    fetch_max_wait_ms: int = 60
    fetch_max_bytes: int = 4096
    flush_interval_ms: int = 100
    """How often a broker flushes its logs (``flush.ms``, or the OS writing back)."""
    checkpoint_interval_ms: int = 100
    """``replica.high.watermark.checkpoint.interval.ms``."""
    replica_lag_time_ms_max: int = 300
    replica_fetch_backoff_ms: int = 50
    alter_partition_retry_backoff_ms: int = 50
    metadata_snapshot_every_records: int = 1 << 30
    """Controllers and broker observers snapshot the metadata image this often (KIP-630)."""
    unsafe_answer_uncommitted_reads: bool = False
    """A deliberate bug for checker tests: the active controller answers a decision without
    records at once, although it was read from its uncommitted image (as
    ``ControllerServer.submit`` does today)."""
    truncation_strategy: TruncationStrategy = TruncationStrategy.LEADER_EPOCH
    """`TruncationStrategy.HIGH_WATERMARK` replays Kafka before KIP-101 (checker tests only)."""
    mode: str = "isr"
    """``isr``, ``quorum`` (every partition a Raft group of its replicas), or ``mixed``: even
    partitions quorum, odd ones ISR, side by side on the same brokers."""

    quorum_write_caching: bool = False
    """``quorum.write.caching=true`` on the quorum partitions: acknowledge before the fsync
    (a correlated power loss may then lose acknowledged writes: checker tests)."""
    eligible_leader_replicas: bool = True
    """The controllers' ``eligible.leader.replicas.enable`` (KIP-966)."""

    def replication_mode(self, partition: int) -> ReplicationMode:
        """The mode of partition ``partition`` of the topic (see ``mode``)."""
        if self.mode == "quorum" or (self.mode == "mixed" and partition % 2 == 0):
            return ReplicationMode.QUORUM
        return ReplicationMode.ISR

    def replication(self) -> ReplicationConfig:
        return ReplicationConfig(
            min_insync_replicas=self.min_insync_replicas,
            replica_lag_time_ms_max=self.replica_lag_time_ms_max,
            replica_fetch_backoff_ms=self.replica_fetch_backoff_ms,
            alter_partition_retry_backoff_ms=self.alter_partition_retry_backoff_ms,
        )

    def controller_ids(self) -> list[NodeId]:
        return [NodeId(CONTROLLER_BASE_ID + i) for i in range(1, self.controllers + 1)]


@final
class ControllerRouter:
    """Which controller a client sends to (`ControllerClient`'s rules, in sim time)."""

    def __init__(self, controllers: list[NodeId], rng: random.Random) -> None:
        self._controllers = controllers
        self._next = rng.randrange(len(controllers))
        self._leader: int | None = None

    def target(self) -> int:
        if self._leader is not None:
            return self._leader
        target = self._controllers[self._next % len(self._controllers)]
        self._next += 1
        return target

    def redirect(self, source: int, hint: int) -> None:
        """A NOT_CONTROLLER answer from ``source`` naming ``hint`` (-1: no leader known)."""
        if hint >= 0 and hint != source:
            self._leader = hint
        elif self._leader == source or hint < 0:
            self._leader = None

    def confirmed(self, source: int) -> None:
        """``source`` answered as the active controller."""
        self._leader = source

    def failed(self) -> None:
        """A request timed out: try the next controller."""
        self._leader = None


@dataclass(slots=True)
class _Proposal:
    first: int
    last: int
    epoch: int
    reply: Callable[[], None] | None
    reject: Callable[[], None] | None


@final
class SimController:
    """One controller quorum member: a voter `RaftHost` + `ControllerCore`."""

    def __init__(self, cluster: BrokerCluster, node_id: NodeId) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.core_config = ControllerConfig(
            broker_session_timeout_ms=cluster.config.session_timeout_ms,
            eligible_leader_replicas_enable=cluster.config.eligible_leader_replicas,
        )
        self.core = self._new_core(None)
        self._standby = ControllerCore(rng=random.Random(0), config=self.core_config, log=QUIET)
        self.host = RaftHost(cluster.raft_env, node_id, self)
        self.pending: deque[_Proposal] = deque()
        self.inbox: list[Envelope] = []
        self.crashes = 0

    def _new_core(self, image: MetadataImage | None) -> ControllerCore:
        return ControllerCore(
            rng=random.Random(self.cluster.rng.getrandbits(64)),
            config=self.core_config,
            image=image,
            log=QUIET,
        )

    @property
    def up(self) -> bool:
        return self.host.is_up

    @property
    def paused(self) -> bool:
        return self.host.n.paused

    @property
    def is_active(self) -> bool:
        return self.host.is_up and self.core.is_active

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self.pending.clear()
        self.inbox.clear()
        self.host.start()
        inc = self.host.n.incarnation
        self.cluster.scheduler.after(self.cluster.config.tick_ms, lambda: self._tick(inc))

    def crash(self) -> None:
        if not self.host.is_up:
            return
        self.crashes += 1
        self.core.resign()
        self.pending.clear()
        self.inbox.clear()
        self.host.crash()

    def pause(self) -> None:
        self.host.pause()

    def resume(self) -> None:
        if not self.paused:
            return
        inc = self.host.n.incarnation
        self.host.resume()
        inbox, self.inbox = self.inbox, []
        for envelope in inbox:
            if self.host.n.incarnation != inc or self.paused:
                break
            self._handle(envelope)

    # --- the Raft state machine (HostedStateMachine) ------------------------------------------

    def restore(self, data: bytes | None) -> None:
        image = None if data is None else MetadataImage.from_snapshot(data)
        if self.host.node is None:  # starting: a fresh process
            self.core = self._new_core(image)
        else:  # a snapshot fetched from the leader (KIP-630)
            self._resign()
            assert image is not None
            self.core.load_snapshot(image)
        self.cluster.on_committed_image(self.core.committed_image)

    def apply_batch(self, batch: bytes, header: BatchHeader) -> None:
        """``ControllerServer.on_committed_batch`` + ``kraft.raft_shell.proposals.Proposals``'s
        ``committed``."""
        node = self.host.node
        assert node is not None
        core = self.core
        epoch = header.partition_leader_epoch
        if core.is_active and (epoch != core.epoch or not node.is_leader):
            self._resign()  # someone else's batch: we lost leadership
        if header.is_control:
            if node.is_leader and epoch == node.epoch and not core.is_active:
                # KIP-595 + KIP-631: our epoch's leader-change batch committed, so everything
                # before it is committed and replayed: we may decide.
                core.become_active(
                    epoch=epoch,
                    next_offset=int(node.log_end_offset),
                    now_ms=self.cluster.clock.now_ms,
                )
        else:
            records: list[MetadataRecord] = [
                decode_record(value or b"") for _, value in offset_values(batch)
            ]
            core.replay_batch(records, header.base_offset, epoch)
            self.cluster.on_committed_image(core.committed_image)
        pending = self.pending
        while pending and pending[0].last < header.next_offset:
            p = pending.popleft()
            # Raft's log matching: a proposal of epoch E committed iff the committed batch
            # holding its last offset was written in E.
            action = p.reply if p.last >= header.base_offset and epoch == p.epoch else p.reject
            if action is not None:
                action()

    def applied(self) -> None:
        pass

    def snapshot(self) -> bytes:
        return self.core.committed_image.to_snapshot()

    def after_activity(self) -> None:
        node = self.host.node
        if node is None:
            return
        core = self.core
        if core.is_active and (node.leader_id != self.node_id or node.epoch != core.epoch):
            self._resign()
        if self.pending and (not node.is_leader or self.pending[0].epoch != node.epoch):
            # KIP-595: our uncommitted entries may survive on the new leader or be truncated;
            # the callers hear NOT_CONTROLLER and retry (the server does the same).
            self._reject_all()

    def _resign(self) -> None:
        if self.core.is_active:
            self.core.resign()
        self._reject_all()

    def _reject_all(self) -> None:
        pending, self.pending = self.pending, deque()
        for p in pending:
            if p.reject is not None:
                p.reject()

    # --- requests -----------------------------------------------------------------------------

    def deliver(self, envelope: Envelope) -> None:
        if not self.host.is_up:
            return
        if self.paused:
            self.inbox.append(envelope)
            return
        self._handle(envelope)

    def _leader_hint(self) -> int:
        node = self.host.node
        leader = None if node is None else node.leader_id
        return -1 if leader is None else int(leader)

    def _handle(self, envelope: Envelope) -> None:
        msg = envelope.payload
        source = envelope.source
        send = self.cluster.network.send
        me = self.node_id
        if isinstance(msg, HeartbeatReq):
            self._submit(
                msg.request,
                lambda c: c.handle_broker_heartbeat_request,
                lambda r: send(me, source, HeartbeatResp(r, msg.rpc, self._leader_hint())),
            )
        elif isinstance(msg, RegisterReq):
            self._submit(
                msg.request,
                lambda c: c.handle_register_broker_request,
                lambda r: send(me, source, RegisterResp(r, msg.rpc, self._leader_hint())),
            )
        elif isinstance(msg, AlterReq):
            self._submit(
                msg.request,
                lambda c: c.handle_alter_partition_request,
                lambda r: send(me, source, AlterResp(r, msg.rpc, self._leader_hint())),
            )
        elif isinstance(msg, CreateTopicsReq):
            self._submit(
                msg.request,
                lambda c: c.handle_create_topics_request,
                lambda r: send(me, source, CreateTopicsResp(r, msg.rpc, self._leader_hint())),
            )
        elif isinstance(msg, ReassignReq):
            self._submit(
                msg.request,
                lambda c: c.handle_alter_partition_reassignments_request,
                lambda r: send(me, source, ReassignResp(r, msg.rpc, self._leader_hint())),
            )
        else:
            self.host.deliver(msg)  # type: ignore[arg-type]

    def _submit(
        self,
        request: Req,
        handler: Callable[[ControllerCore], Callable[[Req, int], ControllerResult[Resp]]],
        answer: Callable[[Resp], None],
    ) -> None:
        """``ControllerServer.submit``: decide, propose one batch, answer once it commits."""
        now = self.cluster.clock.now_ms
        core = self.core
        expected, epoch = core.next_offset, core.epoch
        result = handler(core)(request, now)

        def reject() -> None:
            answer(handler(self._standby)(request, self.cluster.clock.now_ms).response)

        response = result.response
        if not result.records:
            unsafe = self.cluster.config.unsafe_answer_uncommitted_reads
            if core.is_active and core.inflight_count and not unsafe:
                # Kafka's QuorumController (ControllerWriteEvent): a decision without records
                # was still read from the *uncommitted* image, so it is answered only once
                # everything written before it commits. Answering at once is a bug the
                # simulation found (seed 0x3d3): a retried CreateTopics got
                # TOPIC_ALREADY_EXISTS from a pending creation that was then lost with the
                # leadership; the topic never existed. Likewise a retried AlterPartition got
                # INVALID_UPDATE_VERSION and its leader waited forever (seed 0x5d).
                last = core.next_offset - 1
                self.pending.append(_Proposal(last, last, epoch, lambda: answer(response), reject))
            else:
                answer(response)
            return
        self._propose(result.records, expected, epoch, lambda: answer(response), reject)

    def _propose(
        self,
        records: tuple[MetadataRecord, ...],
        expected: int,
        epoch: int,
        reply: Callable[[], None] | None,
        reject: Callable[[], None] | None,
    ) -> None:
        try:
            base = self.host.propose([encode_record(r) for r in records])
        except NotLeaderError:
            self._resign()
            if reject is not None:
                reject()
            return
        if base != expected or not self.core.is_active:
            self._resign()
            if reject is not None:
                reject()
            return
        self.pending.append(_Proposal(base, base + len(records) - 1, epoch, reply, reject))

    def _tick(self, incarnation: int) -> None:
        if incarnation != self.host.n.incarnation or not self.host.is_up:
            return
        self.cluster.scheduler.after(self.cluster.config.tick_ms, lambda: self._tick(incarnation))
        if self.paused or not self.core.is_active:
            return
        core = self.core
        expected, epoch = core.next_offset, core.epoch
        records = core.tick(self.cluster.clock.now_ms)
        if records:
            self._propose(records, expected, epoch, None, None)


__all__ = [
    "CONTROLLER_BASE_ID",
    "QUIET",
    "TOPIC",
    "ClusterConfig",
    "ControllerRouter",
    "SimController",
]
