"""`ControllerServer`: one controller process's shell around `ControllerCore` and `RaftServer`.

Theory of operation
-------------------
One grpc.aio server hosts three services on one port: Raft (KIP-595, `RaftServer`), the
``kraft.v1.Controller`` API and gRPC health. Everything runs on one event loop.

*Replay.* `_MetadataStateMachine` is the Raft state machine: each committed batch is decoded
and ``replay_batch``-ed into the core, on every controller (standbys stay warm for failover,
Kafka's QuorumController does the same). The core's committed image serves reads
(DescribeCluster). Snapshots (KIP-630) are ``committed_image.to_snapshot()``; restoring one is
``MetadataImage.from_snapshot`` + ``core.load_snapshot``. `RaftServer` takes a snapshot every
``snapshot_interval_bytes`` applied bytes and trims the log behind it.

*Becoming active.* A new Raft leader opens its epoch with a leader-change control batch; when
that batch commits while we still lead that epoch, every earlier entry is committed and
replayed (Raft §5.4.2), so the core becomes active with ``next_offset`` = the Raft log end
offset (nothing of ours is in flight: an inactive core produces no records).

*Requests.* Not active: the core answers NOT_CONTROLLER and the response's ``current_leader``
says where to go. Active: ``handle_*`` decides against the pending image and returns records;
they are proposed as ONE batch *in the same synchronous step* (no ``await`` in between, so
batches reach the log in the order the core produced them); the response is released once the
batch commits. If the propose fails or the batch does not land at the offset the core expected,
the core resigns (drops its pending state) and the caller gets NOT_CONTROLLER and retries.

*Leadership loss.* Every leader change (``on_leader_change``) and every committed batch of a
foreign epoch resigns an active core first; in-flight proposals then fail in `RaftServer` with
NOT_CONTROLLER.

*Time.* No fixed tick: a task sleeps until ``core.next_deadline_ms()`` (the next session
expiry, ``broker.session.timeout.ms``; or at once after an input changed the pending image,
which may leave an offline partition electable) or until an input wakes it (`wake_tick`: every
decided request, becoming active, a resignation, a snapshot), then calls ``core.tick(now_ms)``
and proposes what it returns. A standby's core has no deadline. Sleeps are bounded below
(`MIN_TICK_INTERVAL_MS`: never a spin) and above (`MAX_TICK_SLEEP_MS`: a missed wake costs a
delay, never a hang).

*Shutdown.* SIGTERM -> `stop` (graceful: the leader resigns with EndQuorumEpoch so a successor
is elected at once) -> exit 0. A replay that breaks an invariant, or a dead Raft or tick loop,
is fatal (`kraft.supervision`): health says NOT_SERVING at once and the process exits 1 rather
than serve a diverged image or linger as a zombie.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import time
from collections.abc import Callable
from typing import TypeVar

import structlog
from google.protobuf.message import Message

from kraft._generated import controller_pb2_grpc
from kraft.controller.acl_control import describe_acls
from kraft.controller.config_describe import describe_configs
from kraft.controller.core import ControllerCore
from kraft.controller.messages import (
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    FinalizedFeature,
    TopicMetadata,
)
from kraft.controller.node_config import ControllerNodeConfig
from kraft.controller.result import ControllerResult
from kraft.controller.service import OFF_LOOP_DECODE_BYTES, ControllerServicer
from kraft.loop_watch import SLOW_CALLBACK_ENV, log_slow_callbacks, watch_loop
from kraft.metadata import MetadataImage, decode_record, encode_record
from kraft.metadata.configs import REPLICATION_MODE
from kraft.metadata.records import MetadataRecord
from kraft.metrics.kafka import CONTROLLER_GAUGES, RAFT_GAUGES, controller_values, raft_values
from kraft.metrics.node import serve_node_metrics
from kraft.metrics.registry import GaugeValue
from kraft.raft.messages import (
    CurrentLeader,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    QuorumReplica,
)
from kraft.raft_shell import RaftServer, clock_ms
from kraft.security.guard import AccessGuard
from kraft.supervision import LoopSupervisor, serve_until_stopped
from kraft.transport.channels import aio_server
from kraft.transport.controller_codec import encode_response
from storage.errors import ErrorCode, LogClosedError, NotControllerError

Req = TypeVar("Req")
Resp = TypeVar("Resp")

MIN_TICK_INTERVAL_MS = 5
"""The least time between two ``core.tick`` calls, whatever the deadline says (no spin)."""

MAX_TICK_SLEEP_MS = 5_000
"""The longest the tick task sleeps without a wake or a deadline: the bound on the delay a
missed wake could cause."""

OFF_LOOP_ENCODE_RECORDS = 200
"""A decided batch of at least this many records is encoded in a worker thread
(`ControllerServer._propose_in_order`)."""


class _MetadataStateMachine:
    """The Raft state machine of a controller: committed batches -> `ControllerCore`.

    `RaftServer` calls `apply_batch` in log order for every committed batch above the
    restored snapshot (control batches included), `snapshot` at the last applied offset and
    `restore` at start-up or when a snapshot was fetched from the leader.
    """

    def __init__(self, owner: ControllerServer) -> None:
        self._owner = owner

    def apply(self, offset: int, data: bytes) -> None:  # pragma: no cover - apply_batch wins
        self.apply_batch(offset, -1, [(offset, data)], False)

    def apply_batch(
        self, base_offset: int, epoch: int, records: list[tuple[int, bytes]], is_control: bool
    ) -> None:
        try:
            self._owner.on_committed_batch(base_offset, epoch, records, is_control)
        except BaseException as exc:
            self._owner.fail(exc)
            raise

    def snapshot(self) -> bytes:
        return self._owner.core.committed_image.to_snapshot()

    def snapshot_writer(self) -> Callable[[], bytes]:
        """`snapshot` of the image as of now; immutable, so a worker thread may run it
        (`kraft.raft_shell.snapshots.Snapshots.capture`)."""
        return self._owner.core.committed_image.to_snapshot

    def restore(self, data: bytes) -> None:
        try:
            self._owner.on_snapshot(MetadataImage.from_snapshot(data))
        except BaseException as exc:
            self._owner.fail(exc)
            raise


class ControllerServer:
    """A controller quorum member: Raft + the controller API + health on one gRPC port.

    Args:
        config: the node's configuration (`ControllerNodeConfig`).
        seed: seeds the core's generator (topic ids, placement) and Raft's election jitter;
            random by default.

    Usage::

        server = ControllerServer(config)
        await server.start()
        ...
        await server.stop()          # graceful: resigns leadership first (EndQuorumEpoch)
    """

    def __init__(self, config: ControllerNodeConfig, *, seed: int | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        seed = seed if seed is not None else time.time_ns() ^ config.node_id
        self._log = structlog.get_logger("kraft.controller").bind(
            node_id=config.node_id, role="controller"
        )
        self.core = ControllerCore(rng=random.Random(seed), config=config.controller, log=self._log)
        # NB: a core that never becomes active answers every request with NOT_CONTROLLER; it
        # builds the responses for requests whose records were lost (see `_submit`).
        self._standby = ControllerCore(rng=random.Random(0), config=config.controller)
        self.supervisor = LoopSupervisor(self._log)
        self._grpc = aio_server(
            config.socket_request_max_bytes,
            guard=AccessGuard(config.authorization, lambda: self.core.committed_image),
        )
        controller_pb2_grpc.add_ControllerServicer_to_server(ControllerServicer(self), self._grpc)
        self.raft = RaftServer(
            config.node_id,
            config.voters,
            config.data_dir,
            listen=config.listen,
            config=config.raft,
            state_machine=_MetadataStateMachine(self),
            snapshot_interval_bytes=config.snapshot_interval_bytes,
            on_leader_change=self._on_leader_change,
            server=self._grpc,
            seed=seed,
            supervisor=self.supervisor,
            tls=config.tls,
            dynamic_voters=config.dynamic_voters,
        )
        self._tick_task: asyncio.Task[None] | None = None
        self._stall_task: asyncio.Task[None] | None = None
        self._tick_wake = asyncio.Event()
        self._last_batch: tuple[int, asyncio.Future[int]] | None = None
        self._propose_turn: asyncio.Future[None] | None = None
        """Done once the newest decided batch was proposed (`_propose_in_order`)."""
        """The epoch and commit future of the newest batch this node proposed."""
        self._describe_cache: tuple[MetadataImage, object, Message] | None = None
        """The last `describe_cluster_message`: its image, its key, the encoded answer."""
        self._stopped = False
        self.metrics_port: int | None = None
        """The Prometheus endpoint's port once started (None: ``metrics.port`` is -1)."""

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def bound_port(self) -> int | None:
        return self.raft.bound_port

    @property
    def is_active(self) -> bool:
        """Whether this node is the active controller."""
        return self.core.is_active

    async def start(self) -> None:
        """Restore the latest snapshot, replay the log as it commits, serve all services."""
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        await self.raft.start()
        await self.raft.start_serving()
        self._tick_task = asyncio.create_task(
            self._tick_loop(), name=f"controller-tick-{self.node_id}"
        )
        self.supervisor.watch(self._tick_task)
        self._stall_task = asyncio.create_task(
            watch_loop(
                self._log, self.config.event_loop_stall_warn_ms, lambda: self.core.is_active
            ),
            name=f"controller-stall-watch-{self.node_id}",
        )
        self.metrics_port = serve_node_metrics(
            self.config.metrics_port,
            self.config.listen,
            (*CONTROLLER_GAUGES, *RAFT_GAUGES),
            self._metric_values,
            role="controller",
            node_id=self.node_id,
        )
        self._log.info(
            "controller_started",
            listen=self.config.listen,
            voters=dict(self.config.voters),
            data_dir=str(self.config.data_dir),
        )

    def _metric_values(self) -> dict[str, GaugeValue]:
        """The gauges of `kraft.metrics.kafka`, read on the metrics endpoint's thread."""
        raft = self.raft
        return {
            **controller_values(self.core.committed_image, active=self.core.is_active),
            **raft_values(
                raft.leader_id, raft.epoch, raft.high_watermark, raft.node.log_end_offset
            ),
        }

    async def stop(self, *, graceful: bool = True) -> None:
        """Stop serving. ``graceful`` resigns Raft leadership first (KIP-595 EndQuorumEpoch),
        so a successor is elected at once instead of after the fetch timeout."""
        if self._stopped:
            return
        self._stopped = True
        self.supervisor.close()
        self.raft.set_serving(False)
        for task in (self._tick_task, self._stall_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.raft.stop(graceful=graceful)
        self.core.resign()
        await self._grpc.stop(grace=0.2)
        self._log.info("controller_stopped")

    def fail(self, exc: BaseException) -> None:
        """Replay failed: the node must exit rather than serve a diverged image."""
        self.supervisor.fail("metadata-replay", exc)

    # -- the state machine side ----------------------------------------------------------------

    def on_committed_batch(
        self, base_offset: int, epoch: int, records: list[tuple[int, bytes]], is_control: bool
    ) -> None:
        """Replay one committed batch (see the module docstring)."""
        core, raft = self.core, self.raft
        if core.is_active and (epoch != core.epoch or not raft.is_leader):
            # Someone else's batch: we lost leadership even if the listener has not run yet.
            self._resign("foreign_batch_committed")
        if is_control:
            if raft.is_leader and epoch == raft.epoch and not core.is_active:
                # KIP-595 + KIP-631: our epoch's leader-change batch committed: everything
                # before it is committed and replayed, so we may decide.
                core.become_active(
                    epoch=epoch,
                    next_offset=int(raft.node.log_end_offset),
                    now_ms=clock_ms(),
                )
                self._log.info("controller_activated", epoch=epoch)
                self.wake_tick()
            return
        if not records:
            return
        if core.replay_own_batch(records[0][0], len(records), epoch):
            return  # our own batch: the core has its image already, nothing to decode
        decoded: list[MetadataRecord] = [decode_record(value) for _, value in records]
        core.replay_batch(decoded, records[0][0], epoch)

    def on_snapshot(self, image: MetadataImage) -> None:
        """Load a snapshot (at start-up, or fetched from the leader when we fell behind)."""
        self._resign("snapshot_loaded")
        self.core.load_snapshot(image)
        self.wake_tick()
        self._log.info(
            "snapshot_loaded", last_offset=image.last_offset, topics=len(image.topics_by_id)
        )

    def _on_leader_change(self, leader_id: int | None, epoch: int) -> None:
        if self.core.is_active and (leader_id != self.node_id or epoch != self.core.epoch):
            self._resign("leader_changed")

    def _resign(self, reason: str) -> None:
        if self.core.is_active:
            self._log.info("controller_resigned", reason=reason, epoch=self.core.epoch)
            self.core.resign()
            self.wake_tick()

    # -- requests ------------------------------------------------------------------------------

    def current_leader(self) -> CurrentLeader:
        raft = self.raft
        leader = raft.leader_id
        return CurrentLeader(
            leader_id=-1 if leader is None else leader,
            leader_address=raft.leader_address(),
            epoch=raft.epoch,
        )

    async def submit(
        self,
        request: Req,
        handler: Callable[[ControllerCore], Callable[[Req, int], ControllerResult[Resp]]],
    ) -> Resp:
        """Decide ``request`` with the core, commit its records, then return the response.

        ``handler`` picks the core's method, e.g. ``lambda c: c.handle_create_topics_request``.
        The response is NOT_CONTROLLER if this node is not active or loses the batch.
        """
        core = self.core
        expected_base, epoch = core.next_offset, core.epoch
        result = handler(core)(request, clock_ms())
        self.wake_tick()  # the decision may have changed the core's deadline
        if not result.records:
            return await self._after_pending_commits(request, handler, result.response)
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[int] = loop.create_future()
        # NB: set before any await: a record-less answer decided meanwhile waits for this batch.
        self._last_batch = (epoch, outcome)
        try:
            if len(result.records) < OFF_LOOP_ENCODE_RECORDS and self._propose_turn is None:
                # NB: no await between the decision and the propose: batches keep the core's
                # order (nothing decided earlier is still waiting to be proposed).
                committed = self.raft.propose_nowait(_encode_all(result.records))
            else:
                previous, turn = self._propose_turn, loop.create_future()
                self._propose_turn = turn
                proposal = asyncio.ensure_future(
                    self._propose_in_order(result.records, epoch, previous, turn)
                )
                proposal.add_done_callback(lambda p: _settle_proposal(outcome, p))
                # NB: shielded: once decided, the batch must be proposed (or the core resign)
                # even if this request is cancelled, or the next batch would land misplaced.
                committed = await asyncio.shield(proposal)
        except NotControllerError as e:
            _settle(outcome, e)
            if core.epoch == epoch:
                self._resign("propose_rejected")
            return handler(self._standby)(request, clock_ms()).response
        committed.add_done_callback(lambda f: _settle_from(outcome, f))
        try:
            base = await committed
        except (NotControllerError, LogClosedError):
            if core.epoch == epoch:
                self._resign("batch_lost")
            return handler(self._standby)(request, clock_ms()).response
        if base != expected_base:  # pragma: no cover - replay asserts first
            self._log.error("batch_misplaced", expected=expected_base, actual=base)
            if core.epoch == epoch:
                self._resign("batch_misplaced")
            return handler(self._standby)(request, clock_ms()).response
        return result.response

    async def _propose_in_order(
        self,
        records: tuple[MetadataRecord, ...],
        epoch: int,
        previous: asyncio.Future[None] | None,
        turn: asyncio.Future[None],
    ) -> asyncio.Future[int]:
        """Encode ``records`` and propose them as one batch once the batch decided before them
        was proposed (``previous`` done; the core counts on its batches landing in the order
        it made them); ``turn`` is done once this one was. A batch of
        `OFF_LOOP_ENCODE_RECORDS` or more is encoded in a worker thread, so the loop goes on
        answering Raft fetches and heartbeats meanwhile (a 1,000-partition create took 50-80 ms
        to encode under load).

        Raises:
            NotControllerError: this node stopped being the active controller of ``epoch``
                before the batch was proposed, or Raft refused it.
        """
        try:
            if len(records) >= OFF_LOOP_ENCODE_RECORDS:
                payload = await asyncio.to_thread(_encode_all, records)
            else:
                payload = _encode_all(records)
            if previous is not None:
                await previous  # NB: never fails: only ever given a result
            if not self.core.is_active or self.core.epoch != epoch:
                raise NotControllerError("leadership changed before the batch was proposed")
            return self.raft.propose_nowait(payload)
        finally:
            if self._propose_turn is turn:
                self._propose_turn = None
            turn.set_result(None)

    async def _after_pending_commits(
        self,
        request: Req,
        handler: Callable[[ControllerCore], Callable[[Req, int], ControllerResult[Resp]]],
        response: Resp,
    ) -> Resp:
        """Answer a decision that wrote nothing only once what it read has committed.

        The core decides against its pending image: an answer such as TOPIC_ALREADY_EXISTS or
        INVALID_UPDATE_VERSION may rest on records still in flight. If they were lost with this
        node's leadership, the client would have been told something that never became true
        (a broker then waits forever for metadata that never comes). As Kafka's controller
        does, hold the answer until the newest batch commits, or answer NOT_CONTROLLER. Found
        by ``kraft sim cluster`` (seeds 0x3d3 and 0x5d).
        """
        last = self._last_batch
        core = self.core
        if core.inflight_count == 0 or last is None or last[0] != core.epoch:
            return response
        try:
            await asyncio.shield(last[1])  # shared with its proposer: never cancel it
        except (NotControllerError, LogClosedError):
            return handler(self._standby)(request, clock_ms()).response
        return response

    def describe_cluster(self, request: DescribeClusterRequest) -> DescribeClusterResponse:
        """Brokers and topics from the committed image (any controller answers)."""
        return _describe_cluster(
            self.core.committed_image, request, self.node_id, self._controller_id()
        )

    async def describe_cluster_message(self, request: DescribeClusterRequest) -> Message:
        """`describe_cluster`, encoded, built in a worker thread from the immutable committed
        image, never on the loop that runs Raft: for 10,000 partitions it costs ~0.15 s to
        build and ~0.5 s to encode on a quiet core (seconds under load), and a client polling
        it every 50 ms (``kraft bench metadata`` did) starved Raft into elections. The last
        answer is reused while the image, the request and the leader are the same."""
        image, controller_id, leader = (
            self.core.committed_image,
            self._controller_id(),
            self.current_leader(),
        )
        key = (request.topic_names, controller_id, leader)
        cached = self._describe_cache
        if cached is not None and cached[0] is image and cached[1] == key:
            return cached[2]
        message = await asyncio.to_thread(
            _describe_cluster_message, image, request, self.node_id, controller_id, leader
        )
        self._describe_cache = (image, key, message)
        return message

    def _controller_id(self) -> int:
        if self.core.is_active:
            return self.node_id
        leader = self.raft.leader_id
        return -1 if leader is None else leader

    def describe_configs(self, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
        """Configs with their sources, from the committed image (any controller answers)."""
        leader = self.raft.leader_id
        return dataclasses.replace(
            describe_configs(self.core.committed_image, request),
            node_id=self.node_id,
            controller_id=self.node_id
            if self.core.is_active
            else (-1 if leader is None else leader),
        )

    def describe_acls(self, request: DescribeAclsRequest) -> DescribeAclsResponse:
        """The ACLs a filter matches, from the committed image (any controller answers)."""
        leader = self.raft.leader_id
        return dataclasses.replace(
            describe_acls(self.core.committed_image, request),
            node_id=self.node_id,
            controller_id=self.node_id
            if self.core.is_active
            else (-1 if leader is None else leader),
        )

    def describe_quorum(self, request: DescribeQuorumRequest) -> DescribeQuorumResponse:
        """KIP-595 DescribeQuorum: only the active controller (the Raft leader) knows the
        followers' progress; others answer NOT_CONTROLLER."""
        del request
        if not self.core.is_active or not self.raft.is_leader:
            return DescribeQuorumResponse(
                error_code=ErrorCode.NOT_CONTROLLER,
                error_message=f"node {self.node_id} is not the active controller",
            )
        status = self.raft.describe()
        wall_ms = time.time_ns() // 1_000_000
        voters: list[QuorumReplica] = []
        observers: list[QuorumReplica] = []
        for replica in status.replicas:
            entry = QuorumReplica(
                replica_id=replica.node_id,
                log_end_offset=replica.log_end_offset,
                lag=replica.lag,
                last_fetch_timestamp_ms=-1
                if replica.last_fetch_ms_ago is None
                else wall_ms - replica.last_fetch_ms_ago,
            )
            (voters if replica.is_voter else observers).append(entry)
        voters.sort(key=lambda r: r.replica_id)
        return DescribeQuorumResponse(
            leader_id=self.node_id,
            leader_epoch=status.epoch,
            high_watermark=status.high_watermark,
            voters=tuple(voters),
            observers=tuple(observers),
        )

    # -- time ----------------------------------------------------------------------------------

    def wake_tick(self) -> None:
        """An input changed the core: the tick task recomputes its deadline at once."""
        self._tick_wake.set()

    async def _tick_loop(self) -> None:
        """Tick the core when its deadline comes, or when an input wakes us (no fixed tick)."""
        wake = self._tick_wake
        while True:
            wake.clear()  # NB: before reading the deadline: a wake after this is not lost
            deadline = self.core.next_deadline_ms()
            now = clock_ms()
            if deadline is not None and deadline <= now:
                try:
                    await self.submit(None, lambda core: _tick_handler(core))
                except Exception:  # pragma: no cover - keep ticking, but say so
                    self._log.exception("controller_tick_failed")
                await asyncio.sleep(MIN_TICK_INTERVAL_MS / 1000)
                continue
            sleep_ms = MAX_TICK_SLEEP_MS if deadline is None else deadline - now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), min(sleep_ms, MAX_TICK_SLEEP_MS) / 1000)


def _encode_all(records: tuple[MetadataRecord, ...]) -> list[bytes]:
    return [encode_record(r) for r in records]


def _settle(outcome: asyncio.Future[int], error: BaseException) -> None:
    if not outcome.done():
        outcome.set_exception(error)
        outcome.exception()  # NB: retrieved: only a record-less answer may wait on it


def _settle_proposal(
    outcome: asyncio.Future[int], proposal: asyncio.Future[asyncio.Future[int]]
) -> None:
    """A proposal that failed fails ``outcome`` (its error is retrieved here: the request that
    made it may have been cancelled); one that succeeded settles it when it commits."""
    if proposal.cancelled():
        _settle(outcome, NotControllerError("the proposal was cancelled"))
    elif (error := proposal.exception()) is not None:
        _settle(outcome, error)
    else:
        proposal.result().add_done_callback(lambda f: _settle_from(outcome, f))


def _settle_from(outcome: asyncio.Future[int], committed: asyncio.Future[int]) -> None:
    if outcome.done():
        return
    if committed.cancelled():
        _settle(outcome, NotControllerError("the batch was cancelled"))
    elif (error := committed.exception()) is not None:
        _settle(outcome, error)
    else:
        outcome.set_result(committed.result())


def _tick_handler(core: ControllerCore) -> Callable[[None, int], ControllerResult[None]]:
    def handle(request: None, now_ms: int) -> ControllerResult[None]:
        del request
        return ControllerResult(records=core.tick(now_ms), response=None)

    return handle


def _describe_cluster(
    image: MetadataImage, request: DescribeClusterRequest, node_id: int, controller_id: int
) -> DescribeClusterResponse:
    topics: list[TopicMetadata] = []
    names = request.topic_names
    for name in sorted(image.topic_ids_by_name) if names is None else names:
        description = image.describe_topic(name)
        if description is None:
            topics.append(
                TopicMetadata(
                    name=name,
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=f"unknown topic {name!r}",
                )
            )
        else:
            topics.append(
                TopicMetadata(
                    name=name,
                    topic_id=description.topic_id,
                    partitions=description.partitions,
                    replication_mode=image.topic_config(name, REPLICATION_MODE),
                )
            )
    return DescribeClusterResponse(
        node_id=node_id,
        controller_id=controller_id,
        metadata_offset=image.last_offset,
        # NB: never the incarnation ids: knowing a live broker's lets anyone register in
        # its place (Kafka's DescribeCluster does not publish them either).
        brokers=tuple(
            dataclasses.replace(image.brokers[b], incarnation_id="") for b in sorted(image.brokers)
        ),
        topics=tuple(topics),
        finalized_features=tuple(
            FinalizedFeature(name=n, level=v) for n, v in sorted(image.features.items())
        ),
        finalized_features_epoch=image.features_epoch,
    )


def _describe_cluster_message(
    image: MetadataImage,
    request: DescribeClusterRequest,
    node_id: int,
    controller_id: int,
    leader: CurrentLeader,
) -> Message:
    """`_describe_cluster`, encoded (in a worker thread: reads only immutable inputs)."""
    return encode_response(_describe_cluster(image, request, node_id, controller_id), leader)


# -- the process ---------------------------------------------------------------------------------


async def serve(config: ControllerNodeConfig) -> int:
    """Run a controller until SIGTERM/SIGINT (exit code 0), or until a loop dies or replay
    fails (exit code 1, `kraft.supervision`)."""
    server = ControllerServer(config)
    return await serve_until_stopped(
        server.supervisor,
        start=server.start,
        on_signal=lambda: server.stop(graceful=True),
        on_death=lambda: server.stop(graceful=False),
    )


def run_controller(config: ControllerNodeConfig) -> int:
    """The ``kraft controller`` entry point: serve until signalled; the exit code (under
    cProfile with ``KRAFT_PROFILE_DIR``, `kraft.profiling`)."""
    from kraft.profiling import run_profiled

    threshold = os.environ.get(SLOW_CALLBACK_ENV)
    if threshold:
        log_slow_callbacks(float(threshold))
    return run_profiled(f"controller-{config.node_id}", lambda: serve(config))


__all__ = [
    "MAX_TICK_SLEEP_MS",
    "MIN_TICK_INTERVAL_MS",
    "OFF_LOOP_DECODE_BYTES",
    "ControllerServer",
    "run_controller",
    "serve",
]
