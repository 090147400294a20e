"""`GrpcRaftTransport`'s routing without sockets: the stream identity rules hold per peer
whatever the group, and answers are keyed by (group, requester, correlation id), so two groups
may use the same correlation ids on one stream."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from kraft.raft.messages import FetchRequest, FetchResponse, RaftMessage
from kraft.raft_shell import METADATA_GROUP, GrpcRaftTransport
from kraft.raft_shell.grpc_transport import _Route
from kraft.transport.codec import envelope_group, from_envelope
from kraft.types import Epoch, NodeId, Offset
from storage.errors import ErrorCode


class _Inbox:
    def __init__(self) -> None:
        self.got: list[RaftMessage] = []

    def deliver(self, msg: RaftMessage) -> None:
        self.got.append(msg)


def _fetch(source: int, cid: int) -> FetchRequest:
    return FetchRequest(
        source=NodeId(source),
        destination=NodeId(1),
        epoch=Epoch(1),
        correlation_id=cid,
        fetch_offset=Offset(0),
        last_fetched_epoch=Epoch(0),
    )


def _answer(request: FetchRequest) -> FetchResponse:
    return FetchResponse(
        source=request.destination,
        destination=request.source,
        epoch=request.epoch,
        correlation_id=request.correlation_id,
        error=ErrorCode.NONE,
        leader_id=NodeId(1),
        high_watermark=Offset(0),
        log_start_offset=Offset(0),
    )


def _drain(route: _Route) -> list[Any]:
    out = []
    while not route._queue.empty():
        out.append(route._queue.get_nowait())
    return out


def test_one_stream_carries_two_groups_with_the_same_correlation_ids() -> None:
    async def main() -> None:
        transport = GrpcRaftTransport(1, {})
        meta, data = _Inbox(), _Inbox()
        transport.register(METADATA_GROUP, meta)
        transport.register("orders-0", data)
        route = _Route()
        first, second = _fetch(2, cid=7), _fetch(2, cid=7)
        assert transport._admit_on_stream(route, METADATA_GROUP, first)
        assert transport._admit_on_stream(route, "orders-0", second)
        transport._deliver(METADATA_GROUP, first)
        transport._deliver("orders-0", second)
        assert meta.got == [first] and data.got == [second]
        # Each group's answer goes back on the stream, named with its group.
        transport.send("orders-0", _answer(second))
        transport.send(METADATA_GROUP, _answer(first))
        sent = _drain(route)
        assert [envelope_group(e) for e in sent] == ["orders-0", METADATA_GROUP]
        assert [from_envelope(e).correlation_id for e in sent] == [7, 7]  # type: ignore[union-attr]
        assert sent[1].group == ""  # the metadata group travels as it always did
        await transport.close()

    asyncio.run(main())


def test_a_stream_stays_bound_to_its_first_sender_in_every_group() -> None:
    async def main() -> None:
        transport = GrpcRaftTransport(1, {})
        transport.register(METADATA_GROUP, _Inbox())
        transport.register("orders-0", _Inbox())
        route = _Route()
        assert transport._admit_on_stream(route, "orders-0", _fetch(2, cid=1))
        # Another id, in the other group: dropped, as in the same group.
        assert not transport._admit_on_stream(route, METADATA_GROUP, _fetch(3, cid=1))
        # A response on an inbound stream: dropped.
        assert not transport._admit_on_stream(route, METADATA_GROUP, _answer(_fetch(2, cid=2)))
        # A group this node does not host: dropped, never delivered.
        assert not transport._admit_on_stream(route, "elsewhere", _fetch(2, cid=3))
        assert route.dropped == 3
        # A second stream claiming 2 cannot take over the first one's pending answer.
        other = _Route()
        assert not transport._admit_on_stream(other, "orders-0", _fetch(2, cid=1))
        transport.send("orders-0", _answer(_fetch(2, cid=1)))
        assert len(_drain(route)) == 1 and not _drain(other)
        await transport.close()

    asyncio.run(main())


def test_a_partition_group_admits_only_its_replicas_on_streams_and_links() -> None:
    """Issue #12: a quorum-mode partition's group hears from its replicas only (the voter-only
    rule, before the core), whatever the stream; other groups are unaffected."""

    async def main() -> None:
        transport = GrpcRaftTransport(1, {})
        partition, meta = _Inbox(), _Inbox()
        transport.register("t-id:0", partition, members=frozenset({1, 2, 3}))
        transport.register(METADATA_GROUP, meta)
        outsider = _Route()
        assert not transport._admit_on_stream(outsider, "t-id:0", _fetch(4, cid=1))
        assert transport._admit_on_stream(outsider, METADATA_GROUP, _fetch(4, cid=2))
        member = _Route()
        assert transport._admit_on_stream(member, "t-id:0", _fetch(2, cid=1))
        # A response from a non-member arriving on our own link is not delivered either.
        from_outsider = dataclasses.replace(_answer(_fetch(2, cid=3)), source=NodeId(4))
        assert not transport._deliver("t-id:0", from_outsider)
        assert transport._deliver("t-id:0", _fetch(3, cid=4))
        # A reassignment moves the membership; unregistering forgets it.
        transport.set_members("t-id:0", frozenset({1, 2, 4}))
        assert transport._admit_on_stream(_Route(), "t-id:0", _fetch(4, cid=5))
        assert not transport._admit_on_stream(_Route(), "t-id:0", _fetch(3, cid=6))
        transport.unregister("t-id:0")
        transport.register("t-id:0", partition)
        assert transport._admit_on_stream(_Route(), "t-id:0", _fetch(5, cid=7))
        await transport.close()

    asyncio.run(main())


def test_a_peer_that_moves_gets_a_new_channel() -> None:
    async def main() -> None:
        transport = GrpcRaftTransport(1, {2: "127.0.0.1:1"})
        first = transport._stub(NodeId(2))
        transport.set_address(2, "127.0.0.1:1")  # unchanged: same channel
        assert transport._stub(NodeId(2)) is first
        transport.set_address(2, "127.0.0.1:2")
        assert transport._stub(NodeId(2)) is not first
        assert transport._addresses[NodeId(2)] == "127.0.0.1:2"
        await transport.close()

    asyncio.run(main())


def test_a_response_names_its_leaders_endpoint_and_an_observer_dials_it_there() -> None:
    """KIP-853 (Kafka's NodeEndpoints): voter 1 answers an observer's fetch naming leader 4,
    which joined after the observer last read the log; the answer carries 4's address, and the
    observer, which had none for 4, takes it (a known address is never replaced)."""

    async def main() -> None:
        voter = GrpcRaftTransport(1, {1: "h:1", 4: "h:4"})
        voter.register(METADATA_GROUP, _Inbox())
        route = _Route()
        request = _fetch(101, cid=3)
        assert voter._admit_on_stream(route, METADATA_GROUP, request)
        voter.send(METADATA_GROUP, dataclasses.replace(_answer(request), leader_id=NodeId(4)))
        [envelope] = _drain(route)
        assert envelope.leader_endpoint == "h:4"
        answer = from_envelope(envelope)
        assert answer is not None

        observer = GrpcRaftTransport(101, {1: "h:1"})
        assert observer._stub(NodeId(4)) is None  # nowhere to send 4 a fetch
        assert observer.learn_leader_endpoint(answer, envelope.leader_endpoint)
        assert observer._stub(NodeId(4)) is not None
        assert not observer.learn_leader_endpoint(answer, "elsewhere:9")  # 4 is known now
        assert observer._addresses[NodeId(4)] == "h:4"
        await voter.close()
        await observer.close()

    asyncio.run(main())
