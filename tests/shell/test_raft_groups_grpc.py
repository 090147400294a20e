"""Two Raft groups over one `GrpcRaftTransport` per node on real gRPC: one stream per peer pair
carries both, each group elects, commits and fails over on its own, and a request for a group
the node does not host is dropped. The metadata group travels with an empty group field, as
nodes that predate groups send it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kraft._generated import raft_pb2_grpc
from kraft.cluster.ports import free_ports
from kraft.raft.messages import FetchRequest
from kraft.raft_shell import METADATA_GROUP, GrpcRaftTransport, RaftServer
from kraft.transport.channels import aio_server, bind, peer_channel
from kraft.transport.codec import envelope_group, from_envelope, to_envelope
from kraft.types import Epoch, NodeId, Offset
from tests.shell.raft_drivers import Recorder, until

pytestmark = pytest.mark.timeout(90)

DATA_GROUP = "orders-0"


def test_the_metadata_group_is_empty_on_the_wire_and_other_groups_are_named() -> None:
    msg = FetchRequest(
        source=NodeId(1),
        destination=NodeId(2),
        epoch=Epoch(1),
        correlation_id=7,
        fetch_offset=Offset(0),
        last_fetched_epoch=Epoch(0),
    )
    meta = to_envelope(msg)
    assert meta.group == "" and envelope_group(meta) == METADATA_GROUP
    named = to_envelope(msg, DATA_GROUP)
    assert named.group == DATA_GROUP and envelope_group(named) == DATA_GROUP
    assert from_envelope(named) == msg


class _Node:
    def __init__(self, node_id: int, addresses: dict[int, str], root: Path) -> None:
        self.node_id = node_id
        self.address = addresses[node_id]
        self.transport = GrpcRaftTransport(node_id, addresses)
        self.server = aio_server()
        self.transport.add_to_server(self.server)
        bind(self.server, self.address)
        self.recorders = {g: Recorder() for g in (METADATA_GROUP, DATA_GROUP)}
        self.replicas = {
            g: RaftServer(
                node_id,
                addresses,
                root / g / f"n{node_id}",
                state_machine=self.recorders[g],
                seed=node_id,
                transport=self.transport,
                group=g,
            )
            for g in (METADATA_GROUP, DATA_GROUP)
        }

    async def start(self) -> None:
        await self.server.start()
        for replica in self.replicas.values():
            await replica.start()

    async def stop(self) -> None:
        for replica in self.replicas.values():
            await replica.stop(graceful=False)
        await self.transport.close()
        await self.server.stop(grace=0.1)


async def _commit(replicas: list[RaftServer], data: bytes) -> None:
    async def attempt() -> None:
        while True:
            leader = next((r for r in replicas if r.is_leader), None)
            if leader is not None:
                try:
                    await asyncio.wait_for(leader.propose(data), 5)
                    return
                except Exception:
                    pass
            await asyncio.sleep(0.02)

    await asyncio.wait_for(attempt(), 30)


def test_two_groups_share_one_stream_per_peer_pair_and_fail_over_independently(
    tmp_path: Path,
) -> None:
    addresses = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(3))}

    async def main() -> None:
        nodes = [_Node(i, addresses, tmp_path) for i in addresses]
        for n in nodes:
            await n.start()
        try:
            meta = [n.replicas[METADATA_GROUP] for n in nodes]
            data = [n.replicas[DATA_GROUP] for n in nodes]
            await _commit(meta, b"m1")
            await _commit(data, b"d1")
            for n in nodes:
                await until(lambda n=n: n.recorders[DATA_GROUP].values == [b"d1"], "d1")
                await until(lambda n=n: n.recorders[METADATA_GROUP].values == [b"m1"], "m1")
                outbound, inbound = n.transport.stream_counts()
                assert outbound <= 2 and inbound <= 2, (n.node_id, outbound, inbound)

            # Stop the data group's leader replica; its node and the metadata group carry on.
            data_leader = next(r for r in data if r.is_leader)
            meta_leader = next(r for r in meta if r.is_leader)
            meta_epoch = meta_leader.epoch
            await data_leader.stop(graceful=False)
            rest = [r for r in data if r is not data_leader]
            await until(
                lambda: any(r.is_leader and r.epoch > data_leader.epoch for r in rest),
                "a new data-group leader",
            )
            await _commit(rest, b"d2")
            await _commit(meta, b"m2")
            assert meta_leader.is_leader and meta_leader.epoch == meta_epoch
            for n in nodes:
                await until(lambda n=n: n.recorders[METADATA_GROUP].values == [b"m1", b"m2"], "m2")
                assert b"m1" not in n.recorders[DATA_GROUP].values
                assert b"d1" not in n.recorders[METADATA_GROUP].values
        finally:
            for n in nodes:
                await n.stop()

    asyncio.run(main())


def test_a_request_for_a_group_the_node_does_not_host_gets_no_answer(tmp_path: Path) -> None:
    addresses = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(1))}

    async def main() -> None:
        (node,) = [_Node(i, addresses, tmp_path) for i in addresses]
        await node.start()
        try:
            async with peer_channel(node.address) as ch:
                call = raft_pb2_grpc.RaftStub(ch).Stream()
                answers: list[tuple[str, int]] = []

                async def read() -> None:
                    async for envelope in call:
                        msg = from_envelope(envelope)
                        if msg is not None:
                            answers.append((envelope_group(envelope), msg.correlation_id))

                reader = asyncio.create_task(read())
                for cid, group in ((1, "no-such-group"), (2, DATA_GROUP)):
                    request = FetchRequest(
                        source=NodeId(99),
                        destination=NodeId(node.node_id),
                        epoch=Epoch(0),
                        correlation_id=cid,
                        fetch_offset=Offset(0),
                        last_fetched_epoch=Epoch(0),
                    )
                    await call.write(to_envelope(request, group))
                await until(lambda: bool(answers), "the answer for the hosted group")
                await asyncio.sleep(0.2)  # NB: room for a wrong answer to show up
                assert answers == [(DATA_GROUP, 2)]
                call.cancel()
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
        finally:
            await node.stop()

    asyncio.run(main())


def test_a_leader_listener_added_before_start_hears_the_election(tmp_path: Path) -> None:
    """`RaftServer.add_leader_listener` works before `start`, as `kraft bench raft` uses it."""
    addresses = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(1))}

    async def main() -> None:
        server = RaftServer(1, addresses, tmp_path / "n1", listen=addresses[1], seed=1)
        heard: list[tuple[int | None, int]] = []
        server.add_leader_listener(lambda leader, epoch: heard.append((leader, epoch)))
        await server.start()
        try:
            await until(lambda: (1, server.epoch) in heard, "the listener to hear node 1 lead")
        finally:
            await server.stop()

    asyncio.run(main())
