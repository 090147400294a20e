"""`RaftServer`: the asyncio shell around `RaftNode`: gRPC in and out, files, the clock.

The loop, one Ready at a time (the order is the `Ready` contract)::

    rd = node.ready()
    send(rd.early_messages)          # a leader's fetch responses need not wait (§10.2.1)
    storage.persist(rd)              # hard state, truncation, batches, snapshot chunks; fsync
    send(rd.messages)                # only now: responses resolve parked RPCs, requests go out
    apply(rd.committed)              # state machine callback, then resolve proposals
    node.advance(rd)

Everything runs on one event-loop thread. A Ready's own work is synchronous but for one
yield, after a leader's early fetch responses, so the stream writers put them on the wire
before the fsync blocks the loop; inputs stepped in meanwhile are allowed by the core while a
Ready is out, and wait for the next one. Group commit falls out of this: proposals that arrive
during an fsync are batched into the next Ready and share its fsync.

Transport: one long-lived gRPC stream per peer carries our requests, and the peer answers on
it (`_Link`); a peer's requests arrive on its stream to us and are answered there (`_Route`).
The unary RPCs of raft.proto are served too (for tools): an inbound request is stepped into
the node and its handler waits for the node's response with the same (source, correlation
id). A lost message is never retried here: the core's own timeouts do that.

Stream identity (issue 10): the first message on an inbound stream binds it to the sender id
it claims; later messages claiming another id are dropped, as are responses (an inbound
stream carries requests only). A response goes back on the stream that carried its request,
found by (requester, correlation id), never by the requester's id alone: a second stream
claiming the same id gets the answers to its own requests and nothing else, and closing it
touches no other stream. An outbound link carries only responses from its peer, and is
replaced when it carried no reply for two request timeouts while requests were out. NB:
until mutual TLS binds a stream to a certificate, the id a stream claims is not verified.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kraft._generated import raft_pb2, raft_pb2_grpc
from kraft.logs import ensure_configured
from kraft.raft import RaftConfig, RaftNode
from kraft.raft.errors import NotLeaderError
from kraft.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    RaftMessage,
    SnapshotId,
    VoteRequest,
)
from kraft.raft.roles import Leader
from kraft.raft_store import DurableRaftStorage
from kraft.supervision import LoopSupervisor
from kraft.transport.channels import peer_channel_options, server_options
from kraft.transport.codec import from_envelope, from_proto, to_envelope, to_proto
from kraft.types import NodeId
from storage.errors import LogClosedError, NetworkError, NotControllerError
from storage.records import offset_values, read_header

_REQUESTS: dict[type, str] = {
    VoteRequest: "Vote",
    BeginQuorumEpochRequest: "BeginQuorumEpoch",
    EndQuorumEpochRequest: "EndQuorumEpoch",
    FetchRequest: "Fetch",
    FetchSnapshotRequest: "FetchSnapshot",
}


SERVER_OPTIONS = server_options()
CHANNEL_OPTIONS = peer_channel_options()


class _Wakeup:
    """An `asyncio.Event` for one waiter with a timeout, without `asyncio.wait_for`'s task.

    The Raft loop sleeps on it between deadlines and is woken by every RPC and proposal, so
    a wakeup costs one future and one timer handle, not a task and its callbacks.
    """

    __slots__ = ("_flag", "_waiter")

    def __init__(self) -> None:
        self._flag = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._flag = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def is_set(self) -> bool:
        return self._flag

    def clear(self) -> None:
        self._flag = False

    async def wait(self, timeout_s: float) -> None:
        """Return once set, or after ``timeout_s``."""
        if self._flag:
            return
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        timer = loop.call_later(timeout_s, _wake_up, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _wake_up(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


_last_clock_ms = 0


def clock_ms() -> int:
    """Wall-clock milliseconds that never go backwards: what the shells feed the cores.

    The cores need time that does not jump back (they assert it), and the batches they build
    carry it as their CreateTime, which Kafka's tools, time indexes, ``segment.ms`` and
    retention read as wall-clock time. A clock step backwards freezes it until wall time
    catches up.
    """
    global _last_clock_ms
    now = time.time_ns() // 1_000_000
    if now > _last_clock_ms:
        _last_clock_ms = now
    return _last_clock_ms


class StateMachine(Protocol):
    """What a replicated state machine gives the log (the embeddable API's callbacks)."""

    def apply(self, offset: int, data: bytes) -> None:
        """Apply the committed record at ``offset``; called in offset order, exactly once per
        process lifetime for offsets above the restored snapshot."""

    def snapshot(self) -> bytes:
        """The state after the last applied record, as bytes."""
        return b""

    def restore(self, data: bytes) -> None:
        """Replace the state with a snapshot's."""


class BatchStateMachine(Protocol):
    """A state machine that wants whole batches (the controller: records of one batch are one
    atomic change). If a state machine has ``apply_batch``, it is called instead of ``apply``,
    for control batches too (KRaft's leader-change batch marks the start of an epoch)."""

    def apply_batch(
        self, base_offset: int, epoch: int, records: list[tuple[int, bytes]], is_control: bool
    ) -> None: ...


class NullStateMachine:
    def apply(self, offset: int, data: bytes) -> None:
        pass

    def snapshot(self) -> bytes:
        return b""

    def restore(self, data: bytes) -> None:
        pass


@dataclass(slots=True)
class _Proposal:
    first: int
    last: int
    epoch: int
    future: asyncio.Future[int]


@dataclass(frozen=True, slots=True)
class VoterStatus:
    node_id: int
    log_end_offset: int
    lag: int
    last_fetch_ms_ago: int | None
    is_voter: bool


@dataclass(frozen=True, slots=True)
class QuorumStatus:
    node_id: int
    leader_id: int | None
    epoch: int
    high_watermark: int
    log_end_offset: int
    role: str
    replicas: tuple[VoterStatus, ...]


class RaftServer:
    """One Raft replica: voters are ``{id: "host:port"}``; a node not in it is an observer.

    Args:
        node_id: this node's id.
        voters: every voter's id and address.
        data_dir: where the log, the election state and the snapshots live.
        listen: the address to serve the Raft RPCs on; None for an observer that serves none.
        state_machine: receives committed records (`StateMachine`).
        snapshot_interval_bytes: take a snapshot after this many applied bytes (0: never).
        on_leader_change: called with (leader id or None, epoch) whenever either changes.
        supervisor: the process's `LoopSupervisor` (one of its own by default).
    """

    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, str],
        data_dir: str | Path,
        *,
        listen: str | None = None,
        config: RaftConfig | None = None,
        state_machine: StateMachine | None = None,
        snapshot_interval_bytes: int = 0,
        on_leader_change: Callable[[int | None, int], None] | None = None,
        server: grpc.aio.Server | None = None,
        seed: int | None = None,
        supervisor: LoopSupervisor | None = None,
    ) -> None:
        self.node_id = NodeId(node_id)
        self.voters = {NodeId(k): v for k, v in voters.items()}
        self.data_dir = Path(data_dir)
        self.listen = listen
        self.config = config or RaftConfig()
        self.state_machine: StateMachine = state_machine or NullStateMachine()
        self.snapshot_interval_bytes = snapshot_interval_bytes
        self._leader_listeners: list[Callable[[int | None, int], None]] = []
        if on_leader_change is not None:
            self._leader_listeners.append(on_leader_change)
        self._server = server
        self._own_server = server is None
        self._rng = random.Random(seed if seed is not None else time.time_ns() ^ node_id)
        ensure_configured()
        self._log = structlog.get_logger("kraft.raft_server").bind(node_id=node_id)
        self.supervisor = supervisor if supervisor is not None else LoopSupervisor(self._log)
        """Watches the Raft loop: if it dies, health says NOT_SERVING and proposals fail;
        a server process (the controller, the broker) then exits."""
        self.supervisor.on_death(self._on_loop_death)
        self._storage: DurableRaftStorage | None = None
        self._node: RaftNode | None = None
        self._wake = _Wakeup()
        self._pending_rpcs: dict[tuple[int, int], asyncio.Future[Any]] = {}
        self._proposals: deque[_Proposal] = deque()
        self._channels: dict[NodeId, grpc.aio.Channel] = {}
        self._links: dict[NodeId, _Link] = {}
        self._streams: set[_Route] = set()
        self._reply_routes: dict[tuple[int, int], _Route] = {}
        """(requester, correlation id) -> the inbound stream its request came on."""
        self._stubs: dict[NodeId, raft_pb2_grpc.RaftStub] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._running = False
        self._applied_offset = -1
        self._bytes_since_snapshot = 0
        self._last_leader: tuple[int | None, int] = (None, -1)
        self._health: health.HealthServicer | None = None
        self.bound_port: int | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def node(self) -> RaftNode:
        assert self._node is not None, "start() first"
        return self._node

    @property
    def storage(self) -> DurableRaftStorage:
        assert self._storage is not None, "start() first"
        return self._storage

    @property
    def grpc_server(self) -> grpc.aio.Server | None:
        return self._server

    @property
    def loop_task(self) -> asyncio.Task[None] | None:
        """The Raft loop; it ends with an exception if the loop crashed (e.g. a state machine
        that raised), which a server should treat as fatal."""
        return self._loop_task

    def set_serving(self, serving: bool) -> None:
        """What gRPC health checks answer for this node."""
        if self._health is not None:
            status = health_pb2.HealthCheckResponse
            self._health.set("", status.SERVING if serving else status.NOT_SERVING)

    def _on_loop_death(self) -> None:
        """A loop of this process died: say so to health checks, and fail what waits on us."""
        self.set_serving(False)
        dead = LogClosedError("the Raft loop died; see the background_task_died log event")
        for p in self._proposals:
            if not p.future.done():
                p.future.set_exception(dead)
        self._proposals.clear()

    def add_leader_listener(self, fn: Callable[[int | None, int], None]) -> None:
        self._leader_listeners.append(fn)

    async def start(self) -> None:
        """Open the files, restore the latest snapshot, start serving and the loop."""
        storage = DurableRaftStorage(self.data_dir)
        self._storage = storage
        sid = storage.latest_snapshot_id()
        if sid is not None:
            self.state_machine.restore(storage.snapshot_data(sid))
            self._applied_offset = sid.end_offset - 1
        now = clock_ms()
        self._node = RaftNode(
            self.node_id,
            voters=frozenset(self.voters),
            config=self.config,
            log=storage,
            persisted_state=storage.load_hard_state(),
            rng=self._rng,
            now_ms=now,
            logger=self._log,
        )
        if self.listen is not None:
            if self._server is None:
                self._server = grpc.aio.server(options=SERVER_OPTIONS)
            raft_pb2_grpc.add_RaftServicer_to_server(_RaftServicer(self), self._server)
            self._health = health.HealthServicer()
            health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
            try:
                self.bound_port = self._server.add_insecure_port(self.listen)
            except RuntimeError as e:  # grpc's way of saying the bind failed
                raise NetworkError(f"cannot listen on {self.listen}: {e}") from e
            if self._own_server:
                await self._server.start()
            self._health.set("", health_pb2.HealthCheckResponse.SERVING)
        self._running = True
        self._loop_task = asyncio.create_task(self._run(), name=f"raft-loop-{self.node_id}")
        self.supervisor.watch(self._loop_task)

    async def start_serving(self) -> None:
        """Start a shared gRPC server once every service was added (when one was passed in)."""
        if self._server is not None and not self._own_server:
            await self._server.start()

    async def stop(self, *, graceful: bool = True) -> None:
        """Stop the loop and close the files. ``graceful`` resigns leadership first (KIP-595
        EndQuorumEpoch) so a successor is elected at once rather than after a timeout."""
        if not self._running:
            return
        self.supervisor.close()
        if graceful and self._node is not None and self._node.is_leader:
            try:
                self._node.resign(clock_ms())
                self._wake.set()
                await asyncio.sleep(0.05)  # let the EndQuorumEpoch requests go out
            except NotLeaderError:
                pass
        self._running = False
        self._wake.set()
        if self._loop_task is not None:
            await asyncio.gather(self._loop_task, return_exceptions=True)
        for link in list(self._links.values()):
            link.close()
        for route in list(self._streams):
            route.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for fut in self._pending_rpcs.values():
            if not fut.done():
                fut.cancel()
        closed = LogClosedError("the replicated log was stopped")
        for p in self._proposals:
            if not p.future.done():
                p.future.set_exception(closed)
        self._proposals.clear()
        if self._server is not None and self._own_server:
            await self._server.stop(grace=0.2)
        for ch in self._channels.values():
            await ch.close()
        if self._storage is not None:
            self._storage.close()

    # --- the embeddable API -------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._node is not None and self._node.is_leader

    @property
    def leader_id(self) -> int | None:
        return None if self._node is None else self._node.leader_id

    @property
    def epoch(self) -> int:
        return -1 if self._node is None else int(self._node.epoch)

    @property
    def high_watermark(self) -> int:
        return -1 if self._node is None else int(self._node.high_watermark)

    def leader_address(self) -> str:
        lid = self.leader_id
        return self.voters.get(NodeId(lid), "") if lid is not None else ""

    def not_leader_error(self) -> NotControllerError:
        lid = self.leader_id
        return NotControllerError(
            f"node {self.node_id} is not the leader (leader: {lid}, {self.leader_address()})",
            leader_id=lid,
            leader_address=self.leader_address(),
        )

    def propose_nowait(self, records: Sequence[bytes]) -> asyncio.Future[int]:
        """Append ``records`` as consecutive entries; the future gives the first one's offset
        once all are committed.

        Raises:
            NotControllerError: this node is not the leader (carries the leader's id and
                address).
            LogClosedError: the Raft loop died.
        """
        node = self.node
        if self.supervisor.death is not None:
            raise LogClosedError("the Raft loop died; see the background_task_died log event")
        try:
            first = node.propose(records, clock_ms())
        except NotLeaderError:
            raise self.not_leader_error() from None
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._proposals.append(_Proposal(first, first + len(records) - 1, node.epoch, fut))
        self._wake.set()
        return fut

    async def propose(self, data: bytes) -> int:
        """Replicate one entry; returns its offset once committed."""
        return await self.propose_nowait([data])

    async def resign(self) -> None:
        try:
            self.node.resign(clock_ms())
        except NotLeaderError:
            raise self.not_leader_error() from None
        self._wake.set()

    async def take_snapshot(self) -> SnapshotId | None:
        """Snapshot the state machine at the last applied offset, then trim the log."""
        return self._take_snapshot()

    def describe(self) -> QuorumStatus:
        """The quorum as this node sees it; per-replica progress (the leader first) only on
        the leader, as in Kafka's DescribeQuorum."""
        node = self.node
        now = clock_ms()
        role = node.role
        replicas: list[VoterStatus] = []
        hw = int(node.high_watermark)
        if isinstance(role, Leader):
            replicas.append(
                VoterStatus(
                    node_id=self.node_id,
                    log_end_offset=int(node.log_end_offset),
                    lag=0,
                    last_fetch_ms_ago=0,
                    is_voter=True,
                )
            )
            for rid, state in sorted(role.replicas.items()):
                if rid == self.node_id:
                    continue
                leo = state.end_offset
                replicas.append(
                    VoterStatus(
                        node_id=rid,
                        log_end_offset=leo,
                        lag=max(0, int(node.log_end_offset) - max(leo, 0)),
                        last_fetch_ms_ago=None
                        if state.last_fetch_ms < 0
                        else now - state.last_fetch_ms,
                        is_voter=rid in self.voters,
                    )
                )
        return QuorumStatus(
            node_id=self.node_id,
            leader_id=node.leader_id,
            epoch=int(node.epoch),
            high_watermark=hw,
            log_end_offset=int(node.log_end_offset),
            role=node.role_name,
            replicas=tuple(replicas),
        )

    # --- the loop -----------------------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    def step(self, msg: RaftMessage) -> None:
        if self._running and self._node is not None and self.supervisor.death is None:
            self._node.step(msg, clock_ms())
            self._wake.set()

    async def _run(self) -> None:
        node = self.node
        try:
            while self._running:
                # NB: let RPC handlers that are already runnable step their messages before the
                # clock is checked: after a stall (a long apply, a busy machine) a follower
                # must see the fetch response waiting for it before it calls an election.
                await asyncio.sleep(0)
                now = clock_ms()
                if now >= node.next_deadline_ms():
                    node.tick(now)
                while node.has_ready():
                    await self._handle_ready()
                    await asyncio.sleep(0)  # one Ready at a time, then let the peers in
                self._notify_leader_change()
                self._maybe_snapshot()
                delay_ms = node.next_deadline_ms() - clock_ms()
                if delay_ms > 0 and not self._wake.is_set():
                    await self._wake.wait(delay_ms / 1000)
                else:
                    await asyncio.sleep(0)  # let RPC handlers and proposers run
                self._wake.clear()
        except Exception as exc:
            self.supervisor.fail(f"raft-loop-{self.node_id}", exc)
            raise

    async def _handle_ready(self) -> None:
        node = self.node
        storage = self.storage
        rd = node.ready()
        for msg in rd.early_messages:
            self._send(msg)
        if rd.early_messages and rd.must_sync:
            # Let the stream writers hand them to gRPC (whose threads send them) before the
            # fsync below blocks this loop: the followers then work while we sync.
            await asyncio.sleep(0)
        storage.persist(rd)
        for msg in rd.messages:
            self._send(msg)
        if rd.install_snapshot is not None:
            self.state_machine.restore(storage.snapshot_data(rd.install_snapshot))
            self._applied_offset = rd.install_snapshot.end_offset - 1
            self._bytes_since_snapshot = 0
        for batch in rd.committed:
            self._apply(batch)
        if rd.delete_log_before is not None:
            storage.delete_before(rd.delete_log_before)
        node.advance(rd)
        self._settle_proposals(int(node.high_watermark))

    def _apply(self, batch: bytes) -> None:
        header = read_header(batch)
        if header.next_offset - 1 <= self._applied_offset:
            return
        self._bytes_since_snapshot += header.size_bytes
        apply_batch = getattr(self.state_machine, "apply_batch", None)
        applied = self._applied_offset
        if apply_batch is not None:
            records = [(o, v or b"") for o, v in offset_values(batch) if o > applied]
            apply_batch(
                header.base_offset, header.partition_leader_epoch, records, header.is_control
            )
        elif not header.is_control:
            apply = self.state_machine.apply
            for offset, value in offset_values(batch):
                if offset > applied:
                    apply(offset, value or b"")
        self._applied_offset = header.next_offset - 1
        self._resolve_committed(
            header.base_offset, header.next_offset, header.partition_leader_epoch
        )

    def _resolve_committed(self, base: int, end: int, epoch: int) -> None:
        """Settle proposals that end in the committed batch [base, end) of ``epoch``.

        By Raft's log matching, a proposal made in epoch E is committed exactly when the
        committed batch holding its last offset was written in E.
        """
        props = self._proposals
        while props and props[0].last < end:
            p = props.popleft()
            if p.future.done():
                continue
            if p.last >= base and epoch == p.epoch:
                p.future.set_result(p.first)
            else:
                p.future.set_exception(self.not_leader_error())

    def _settle_proposals(self, high_watermark: int) -> None:
        """Fail proposals of an epoch we no longer lead once the log has moved past them."""
        node = self.node
        if node.is_leader and self._proposals and self._proposals[0].epoch == node.epoch:
            return
        props = self._proposals
        while props and props[0].epoch != node.epoch and props[0].last < high_watermark:
            p = props.popleft()
            if not p.future.done():
                p.future.set_exception(self.not_leader_error())
        if not node.is_leader:
            # KIP-595: our uncommitted entries may survive on the new leader, or be truncated;
            # we cannot tell until the log moves past them, so the caller hears NOT_CONTROLLER.
            while props and props[0].last >= high_watermark:
                p = props.popleft()
                if not p.future.done():
                    p.future.set_exception(self.not_leader_error())

    def _maybe_snapshot(self) -> None:
        if self.snapshot_interval_bytes and (
            self._bytes_since_snapshot >= self.snapshot_interval_bytes
        ):
            self._take_snapshot()

    def _take_snapshot(self) -> SnapshotId | None:
        node = self.node
        end = self._applied_offset + 1
        if end <= node.log_start_offset:
            return None
        sid = node.snapshot_id_at(end)
        self.storage.save_snapshot(sid, self.state_machine.snapshot())
        node.snapshot_taken(sid)
        self._bytes_since_snapshot = 0
        self._wake.set()
        return sid

    def _notify_leader_change(self) -> None:
        node = self.node
        current = (node.leader_id, int(node.epoch))
        if current != self._last_leader:
            self._last_leader = current
            self._log.info("leader_changed", leader_id=current[0], epoch=current[1])
            for fn in self._leader_listeners:
                try:
                    fn(*current)
                except Exception:
                    self._log.exception("leader_listener_failed")

    # --- transport ----------------------------------------------------------------------------

    def _send(self, msg: RaftMessage) -> None:
        if type(msg) not in _REQUESTS:
            # A response: to a unary call waiting for it, else back down the stream the
            # request came on.
            key = (int(msg.destination), msg.correlation_id)
            fut = self._pending_rpcs.pop(key, None)
            if fut is not None:
                if not fut.done():
                    fut.set_result(msg)
                return
            route = self._reply_routes.pop(key, None)
            if route is not None:
                route.pending.pop(key, None)
                route.send(to_envelope(msg))
            return
        link = self._links.get(msg.destination)
        now_s = time.monotonic()
        if link is not None and not link.closed and link.is_silent(now_s):
            self._log.warning("replaced_silent_link", peer=msg.destination)
            link.close()
        if link is None or link.closed:
            stub = self._stub(msg.destination)
            if stub is None:
                return
            link = self._links[msg.destination] = _Link(
                self,
                msg.destination,
                stub,
                silent_after_s=2 * self.config.request_timeout_ms / 1000,
            )
        link.send(to_envelope(msg), now_s)

    def _stub(self, peer: NodeId) -> raft_pb2_grpc.RaftStub | None:
        stub = self._stubs.get(peer)
        if stub is None:
            address = self.voters.get(peer)
            if address is None:
                return None
            channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
            self._channels[peer] = channel
            stub = raft_pb2_grpc.RaftStub(channel)
            self._stubs[peer] = stub
        return stub

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def handle_stream(self, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The server side of a peer's Stream: step what it sends, write back our answers.

        The first message binds the stream to the sender id it claims (see the module
        docstring); each request's answer comes back on this stream and no other."""
        route = _Route()
        self._streams.add(route)

        async def pump() -> None:
            try:
                async for envelope in requests:
                    msg = from_envelope(envelope)
                    if msg is not None and self._admit_on_stream(route, msg):
                        self.step(msg)
            finally:
                route.close()

        task = self._spawn(pump())
        try:
            while (envelope := await route.get()) is not None:
                yield envelope
        finally:
            task.cancel()
            route.close()
            self._forget_route(route)

    def _admit_on_stream(self, route: _Route, msg: RaftMessage) -> bool:
        """Bind ``route`` to its first sender; remember where ``msg``'s answer goes."""
        if route.peer is None:
            route.peer = int(msg.source)
        reason = None
        key = (int(msg.source), msg.correlation_id)
        if msg.source != route.peer:
            reason = "sender_changed"
        elif type(msg) not in _REQUESTS:
            reason = "not_a_request"
        elif key in self._pending_rpcs or self._reply_routes.get(key, route) is not route:
            reason = "correlation_id_in_use"
        if reason is not None:
            route.dropped += 1
            if route.dropped == 1 or route.dropped % 1000 == 0:
                self._log.warning(
                    "dropped_stream_message",
                    reason=reason,
                    stream_peer=route.peer,
                    claimed_source=int(msg.source),
                    kind=type(msg).__name__,
                    dropped=route.dropped,
                )
            return False
        self._reply_routes[key] = route
        pending = route.pending
        pending[key] = None
        if len(pending) > _Route.MAX_PENDING:  # requests the node never answered
            oldest = next(iter(pending))
            del pending[oldest]
            if self._reply_routes.get(oldest) is route:
                del self._reply_routes[oldest]
        return True

    def _forget_route(self, route: _Route) -> None:
        self._streams.discard(route)
        for key in route.pending:
            if self._reply_routes.get(key) is route:
                del self._reply_routes[key]
        route.pending.clear()

    async def handle_request(self, request: Any) -> Any:
        """Step an inbound request and wait for the node's answer to it."""
        msg = from_proto(request)
        if not self._running:
            raise _Unavailable()
        loop = asyncio.get_running_loop()
        key = (int(msg.source), msg.correlation_id)
        if key in self._pending_rpcs or key in self._reply_routes:
            raise _Unavailable()  # another caller's request with that id awaits its answer
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending_rpcs[key] = fut
        self.step(msg)
        timeout = self.config.request_timeout_ms / 1000
        if isinstance(msg, FetchRequest):
            timeout += msg.max_wait_ms / 1000
        try:
            response = await asyncio.wait_for(fut, timeout)
        except (TimeoutError, asyncio.CancelledError):
            raise _Unavailable() from None
        finally:
            if self._pending_rpcs.get(key) is fut:
                del self._pending_rpcs[key]
        return to_proto(response)


class _Route:
    """Where our answers to one inbound stream go: a bounded queue its handler drains.

    ``peer`` is the sender id the stream's first message claimed; ``pending`` the
    (requester, correlation id) of its requests not yet answered."""

    MAX_QUEUED = 4096
    MAX_PENDING = 1024

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._closed = False
        self.peer: int | None = None
        self.pending: dict[tuple[int, int], None] = {}
        self.dropped = 0

    def send(self, envelope: Any) -> None:
        if not self._closed and self._queue.qsize() < self.MAX_QUEUED:
            self._queue.put_nowait(envelope)  # else drop: Raft's timeouts retry

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put_nowait(None)

    async def get(self) -> Any:
        return await self._queue.get()


class _Link:
    """Our outbound stream to one peer: requests go out in order, its answers come back on
    the same stream and are stepped into the node. A broken stream is dropped (with what it
    held: Raft retries by its own timeouts) and the next request opens a new one; so is a
    stream that brought no answer for ``silent_after_s`` while requests were out (a peer
    that lost track of it must not cut us off for good)."""

    MAX_QUEUED = 4096

    def __init__(
        self,
        server: RaftServer,
        peer: NodeId,
        stub: raft_pb2_grpc.RaftStub,
        *,
        silent_after_s: float,
    ) -> None:
        self._server = server
        self.peer = peer
        self.closed = False
        self._silent_after_s = silent_after_s
        self._unanswered_since: float | None = None
        self._dropped = 0
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._call = stub.Stream()
        self._writer = server._spawn(self._write())
        self._reader = server._spawn(self._read())

    def is_silent(self, now_s: float) -> bool:
        since = self._unanswered_since
        return since is not None and now_s - since > self._silent_after_s

    def send(self, envelope: Any, now_s: float) -> None:
        if not self.closed and self._queue.qsize() < self.MAX_QUEUED:
            if self._unanswered_since is None:
                self._unanswered_since = now_s
            self._queue.put_nowait(envelope)

    async def _write(self) -> None:
        try:
            while True:
                envelope = await self._queue.get()
                await self._call.write(envelope)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
            self.close()

    async def _read(self) -> None:
        try:
            async for envelope in self._call:
                msg = from_envelope(envelope)
                if msg is None:
                    continue
                if msg.source != self.peer or type(msg) in _REQUESTS:
                    # Only our peer's answers travel back on our stream.
                    self._dropped += 1
                    if self._dropped == 1:
                        self._server._log.warning(
                            "dropped_link_message",
                            peer=self.peer,
                            claimed_source=int(msg.source),
                            kind=type(msg).__name__,
                        )
                    continue
                self._unanswered_since = None
                self._server.step(msg)
        except grpc.aio.AioRpcError:
            pass
        finally:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._call.cancel()
        self._writer.cancel()
        self._reader.cancel()


class _Unavailable(Exception):
    """The node did not answer (it dropped the request, or it is stopping)."""


class _RaftServicer(raft_pb2_grpc.RaftServicer):  # type: ignore[misc]
    def __init__(self, server: RaftServer) -> None:
        self._server = server

    async def _handle(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await self._server.handle_request(request)
        except _Unavailable:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "no answer from the Raft node")

    async def Vote(self, request: raft_pb2.VoteRequest, context: Any) -> Any:
        return await self._handle(request, context)

    async def BeginQuorumEpoch(
        self, request: raft_pb2.BeginQuorumEpochRequest, context: Any
    ) -> Any:
        return await self._handle(request, context)

    async def EndQuorumEpoch(self, request: raft_pb2.EndQuorumEpochRequest, context: Any) -> Any:
        return await self._handle(request, context)

    async def Fetch(self, request: raft_pb2.FetchRequest, context: Any) -> Any:
        return await self._handle(request, context)

    async def FetchSnapshot(self, request: raft_pb2.FetchSnapshotRequest, context: Any) -> Any:
        return await self._handle(request, context)

    async def Stream(
        self, request_iterator: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        async for envelope in self._server.handle_stream(request_iterator):
            yield envelope


__all__ = [
    "BatchStateMachine",
    "NullStateMachine",
    "QuorumStatus",
    "RaftServer",
    "StateMachine",
    "VoterStatus",
    "clock_ms",
]
