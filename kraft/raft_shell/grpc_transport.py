"""`GrpcRaftTransport`: the Raft messages of many groups over one gRPC stream per peer pair.

One long-lived stream per peer carries our requests of every group, and the peer answers on
it (`_Link`); a peer's requests arrive on its stream to us and are answered there (`_Route`).
Each envelope names its group (``RaftEnvelope.group``; empty is the metadata quorum's, so
nodes that predate groups interoperate on it), and an inbound message goes to the `Inbox`
registered for its group; a group nobody here hosts is dropped. A group registered with its
``members`` (a quorum-mode partition's replicas) admits messages from those nodes only, on
inbound streams and outbound links alike: the voter-only rule of `kraft.raft.admission`,
applied before the core, so a node outside the partition cannot even fetch from its group.
The unary RPCs of raft.proto are served too, for tools, for the metadata group only: an
inbound request is delivered and its handler waits for the response with the same (source,
correlation id). A lost message is never retried here: the core's own timeouts do that.

KIP-853 leader endpoints: a response that names a leader carries the leader's ``host:port``
as the sender knows it (``RaftEnvelope.leader_endpoint``), and a node that has no address for
that leader takes it (`learn_leader_endpoint`; a known address is never replaced): an
observer whose log predates a new voter, redirected to it, can then reach it.

Stream identity (issue 10), per peer and whatever the group: the first message on an inbound
stream binds it to the sender id it claims; later messages claiming another id are dropped,
as are responses (an inbound stream carries requests only). A response goes back on the
stream that carried its request, found by (group, requester, correlation id), never by the
requester's id alone: a second stream claiming the same id gets the answers to its own
requests and nothing else, and closing it touches no other stream. An outbound link carries
only responses from its peer, and is replaced when it carried no reply for two request
timeouts while requests were out. NB: until mutual TLS binds a stream to a certificate, the
id a stream claims is not verified.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Coroutine, Mapping
from typing import Any

import grpc
import structlog
from structlog.typing import FilteringBoundLogger

from kraft._generated import raft_pb2, raft_pb2_grpc
from kraft.raft import RaftConfig
from kraft.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    RaftMessage,
    VoteRequest,
)
from kraft.raft_shell.transport import Inbox
from kraft.security.tls import TlsConfig
from kraft.transport.channels import peer_channel
from kraft.transport.codec import (
    METADATA_GROUP,
    envelope_group,
    from_envelope,
    from_proto,
    to_envelope,
    to_proto,
)
from kraft.transport.request_guard import UnparseableRequest
from kraft.types import NodeId

_REQUESTS: frozenset[type] = frozenset(
    {
        VoteRequest,
        BeginQuorumEpochRequest,
        EndQuorumEpochRequest,
        FetchRequest,
        FetchSnapshotRequest,
    }
)

_QUOTE_MAX = 60
"""At most this much of a peer's group name is quoted in a log event."""

_ENDPOINT_MAX = 255
"""The longest leader endpoint taken from a peer (a VotersRecord endpoint's bound too)."""

_ReplyKey = tuple[str, int, int]
"""(group, requester, correlation id): where an answer goes."""


class GrpcRaftTransport:
    """This node's end of the Raft streams to its peers, for every group it hosts.

    Args:
        node_id: this node's id.
        addresses: ``{peer id: "host:port"}`` of every peer we may send to (more with
            `set_address`).
        request_timeout_ms: how long a unary call waits for its answer; a link that brought
            no answer for twice this long while requests were out is replaced.
    """

    def __init__(
        self,
        node_id: int,
        addresses: Mapping[int, str],
        *,
        request_timeout_ms: int | None = None,
        logger: FilteringBoundLogger | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        self.node_id = NodeId(node_id)
        self._tls = tls
        """The node's mTLS settings: peers are dialled with its certificate."""
        self._addresses = {NodeId(k): v for k, v in addresses.items()}
        self._request_timeout_ms = (
            request_timeout_ms
            if request_timeout_ms is not None
            else RaftConfig().request_timeout_ms
        )
        base = logger or structlog.get_logger("kraft.raft.transport")
        self._log = base.bind(node_id=node_id)
        self._inboxes: dict[str, Inbox] = {}
        self._members: dict[str, frozenset[int]] = {}
        """Groups that admit only these senders (absent: any sender, the core decides)."""
        self._pending_rpcs: dict[_ReplyKey, asyncio.Future[Any]] = {}
        self._channels: dict[NodeId, grpc.aio.Channel] = {}
        self._stubs: dict[NodeId, raft_pb2_grpc.RaftStub] = {}
        self._links: dict[NodeId, _Link] = {}
        self._streams: set[_Route] = set()
        self._reply_routes: dict[_ReplyKey, _Route] = {}
        """(group, requester, correlation id) -> the inbound stream its request came on."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    # --- the Transport interface --------------------------------------------------------------

    def register(self, group: str, inbox: Inbox, *, members: frozenset[int] | None = None) -> None:
        """Deliver ``group``'s messages to ``inbox`` (only those from ``members``, if given).

        Raises:
            ValueError: another inbox holds ``group``.
        """
        if group in self._inboxes:
            raise ValueError(f"group {group[:_QUOTE_MAX]!r} is already registered")
        self._inboxes[group] = inbox
        if members is not None:
            self._members[group] = members

    def set_members(self, group: str, members: frozenset[int]) -> None:
        """From now on ``group`` admits messages from ``members`` only (a reassignment)."""
        if group in self._inboxes:
            self._members[group] = members

    def unregister(self, group: str) -> None:
        self._inboxes.pop(group, None)
        self._members.pop(group, None)

    @property
    def groups(self) -> frozenset[str]:
        return frozenset(self._inboxes)

    def set_address(self, peer: int, address: str) -> None:
        """Where ``peer`` listens (a group may name nodes the others do not). A peer that moved
        (a broker re-registered with another listener) gets a fresh link and channel: what the
        old ones held is dropped, and Raft's timeouts resend it."""
        nid = NodeId(peer)
        old = self._addresses.get(nid)
        self._addresses[nid] = address
        if old is None or old == address:
            return
        link = self._links.pop(nid, None)
        if link is not None:
            link.close()
        self._stubs.pop(nid, None)
        channel = self._channels.pop(nid, None)
        if channel is not None and not self._closed:
            self._spawn(channel.close())

    def send(self, group: str, msg: RaftMessage) -> None:
        if self._closed:
            return
        if type(msg) not in _REQUESTS:
            # A response: to a unary call waiting for it, else back down the stream the
            # request came on.
            key = (group, int(msg.destination), msg.correlation_id)
            fut = self._pending_rpcs.pop(key, None)
            if fut is not None:
                if not fut.done():
                    fut.set_result(msg)
                return
            route = self._reply_routes.pop(key, None)
            if route is not None:
                route.pending.pop(key, None)
                route.send(to_envelope(msg, group, self._leader_endpoint(msg)))
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
                silent_after_s=2 * self._request_timeout_ms / 1000,
            )
        link.send(to_envelope(msg, group), now_s)

    # --- KIP-853: leader endpoints ---------------------------------------------------------------

    def _leader_endpoint(self, msg: RaftMessage) -> str:
        """Where the leader a response names listens, as we know it ("" if unknown)."""
        leader_id = getattr(msg, "leader_id", None)
        return "" if leader_id is None else self._addresses.get(NodeId(leader_id), "")

    def learn_leader_endpoint(self, msg: RaftMessage, endpoint: str) -> bool:
        """A response named a leader we have no address for, and where it listens (Kafka's
        NodeEndpoints): dial it there. An address we know is never replaced this way (the
        metadata log's VotersRecord is the authority). True if it was learnt."""
        leader_id = getattr(msg, "leader_id", None)
        if leader_id is None or not endpoint or leader_id == self.node_id:
            return False
        if NodeId(leader_id) in self._addresses:
            return False
        self._addresses[NodeId(leader_id)] = endpoint[:_ENDPOINT_MAX]
        self._log.info(
            "leader_endpoint_learnt",
            leader_id=leader_id,
            endpoint=endpoint[:_QUOTE_MAX],
            peer=int(msg.source),
        )
        return True

    # --- serving ------------------------------------------------------------------------------

    def add_to_server(self, server: grpc.aio.Server) -> None:
        """Serve the Raft service on ``server`` (before it starts)."""
        raft_pb2_grpc.add_RaftServicer_to_server(_RaftServicer(self), server)

    async def close(self) -> None:
        """Close every stream and channel; answers still owed are dropped."""
        if self._closed:
            return
        self._closed = True
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
        for ch in self._channels.values():
            await ch.close()

    def stream_counts(self) -> tuple[int, int]:
        """(open outbound streams, open inbound streams): one per peer each at most, whatever
        the number of groups."""
        return sum(1 for link in self._links.values() if not link.closed), len(self._streams)

    # --- inside -------------------------------------------------------------------------------

    def _admits(self, group: str, source: int) -> bool:
        members = self._members.get(group)
        return members is None or source in members

    def _deliver(self, group: str, msg: RaftMessage) -> bool:
        inbox = self._inboxes.get(group)
        if inbox is None or not self._admits(group, int(msg.source)):
            return False
        inbox.deliver(msg)
        return True

    def _peer_lost(self, peer: NodeId, why: str) -> None:
        self._log.info("peer_connection_lost", peer=peer, details=why[:_QUOTE_MAX])
        for group, inbox in list(self._inboxes.items()):
            if self._admits(group, peer):
                inbox.peer_lost(peer)

    def _stub(self, peer: NodeId) -> raft_pb2_grpc.RaftStub | None:
        stub = self._stubs.get(peer)
        if stub is None:
            address = self._addresses.get(peer)
            if address is None:
                return None
            channel = peer_channel(address, self._tls)
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
        """The server side of a peer's Stream: deliver what it sends, write back our answers.

        The first message binds the stream to the sender id it claims (see the module
        docstring); each request's answer comes back on this stream and no other."""
        route = _Route()
        self._streams.add(route)
        failed: list[UnparseableRequest] = []

        async def pump() -> None:
            try:
                async for envelope in requests:
                    msg = from_envelope(envelope)
                    if msg is None:
                        continue
                    group = envelope_group(envelope)
                    if self._admit_on_stream(route, group, msg):
                        self._deliver(group, msg)
            except UnparseableRequest as e:  # the request guard's: aborted in the handler's task
                failed.append(e)
            finally:
                route.close()

        task = self._spawn(pump())
        try:
            while (envelope := await route.get()) is not None:
                yield envelope
            if failed:
                raise failed[0]  # in the handler's task, where the guard aborts on it
        finally:
            task.cancel()
            route.close()
            self._forget_route(route)

    def _admit_on_stream(self, route: _Route, group: str, msg: RaftMessage) -> bool:
        """Bind ``route`` to its first sender; remember where ``msg``'s answer goes."""
        if route.peer is None:
            route.peer = int(msg.source)
        reason = None
        key = (group, int(msg.source), msg.correlation_id)
        if msg.source != route.peer:
            reason = "sender_changed"
        elif type(msg) not in _REQUESTS:
            reason = "not_a_request"
        elif group not in self._inboxes:
            reason = "unknown_group"
        elif not self._admits(group, int(msg.source)):
            reason = "not_a_member"
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
                    group=group[:_QUOTE_MAX],
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
        """Deliver an inbound unary request (metadata group) and wait for its answer."""
        msg = from_proto(request)
        if self._closed or METADATA_GROUP not in self._inboxes:
            raise _Unavailable()
        loop = asyncio.get_running_loop()
        key = (METADATA_GROUP, int(msg.source), msg.correlation_id)
        if key in self._pending_rpcs or key in self._reply_routes:
            raise _Unavailable()  # another caller's request with that id awaits its answer
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending_rpcs[key] = fut
        self._deliver(METADATA_GROUP, msg)
        timeout = self._request_timeout_ms / 1000
        if isinstance(msg, FetchRequest):
            # The core parks a fetch for at most the request timeout, whatever it asks for
            # (`kraft.raft.replication`): wait no longer than that for its answer either.
            timeout += min(max(msg.max_wait_ms, 0), self._request_timeout_ms) / 1000
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
    (group, requester, correlation id) of its requests not yet answered."""

    MAX_QUEUED = 4096
    MAX_PENDING = 1024

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._closed = False
        self.peer: int | None = None
        self.pending: dict[_ReplyKey, None] = {}
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
    """Our outbound stream to one peer, for every group: requests go out in order, its answers
    come back on the same stream and are delivered to their group. A broken stream is dropped
    (with what it held: Raft retries by its own timeouts) and the next request opens a new
    one; so is a stream that brought no answer for ``silent_after_s`` while requests were out
    (a peer that lost track of it must not cut us off for good)."""

    MAX_QUEUED = 4096

    def __init__(
        self,
        transport: GrpcRaftTransport,
        peer: NodeId,
        stub: raft_pb2_grpc.RaftStub,
        *,
        silent_after_s: float,
    ) -> None:
        self._transport = transport
        self.peer = peer
        self.closed = False
        self._silent_after_s = silent_after_s
        self._unanswered_since: float | None = None
        self._dropped = 0
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._call = stub.Stream()
        self._writer = transport._spawn(self._write())
        self._reader = transport._spawn(self._read())

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
                        self._transport._log.warning(
                            "dropped_link_message",
                            peer=self.peer,
                            claimed_source=int(msg.source),
                            kind=type(msg).__name__,
                        )
                    continue
                self._unanswered_since = None
                self._transport.learn_leader_endpoint(msg, envelope.leader_endpoint)
                self._transport._deliver(envelope_group(envelope), msg)
        except grpc.aio.AioRpcError as e:
            if e.code() is grpc.StatusCode.UNAVAILABLE and not self.closed:
                # The peer's host closed the connection (its process exited) or refused a new
                # one; our own close cancels instead.
                self._transport._peer_lost(self.peer, e.details() or "")
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
    def __init__(self, transport: GrpcRaftTransport) -> None:
        self._transport = transport

    async def _handle(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await self._transport.handle_request(request)
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
        async for envelope in self._transport.handle_stream(request_iterator):
            yield envelope


__all__ = ["GrpcRaftTransport"]
