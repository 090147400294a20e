"""Hostile Raft input on real gRPC (issue 10): RPCs from a non-voter with huge epochs are
refused (finding 1), and a forged stream claiming a voter's id cannot divert that voter's
answers, and hanging it up leaves the voter replicating (finding 2)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from kraft._generated import raft_pb2_grpc
from kraft.cluster.ports import free_ports
from kraft.raft.admission import EPOCH_MAX
from kraft.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    RaftMessage,
    VoteRequest,
)
from kraft.raft_shell import RaftServer
from kraft.transport.channels import peer_channel
from kraft.transport.codec import from_envelope, from_proto, to_envelope, to_proto
from kraft.types import Epoch, NodeId, Offset
from storage.errors import ErrorCode, NotControllerError

pytestmark = pytest.mark.timeout(90)

FORGED_BASE_CID = 1 << 56
"""Correlation ids of the forged stream's requests: far from any node's own."""


async def _until(predicate: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def _replicates(servers: list[RaftServer], voter: RaftServer, tag: bytes) -> None:
    """Commit a few entries (at whoever leads) and wait until ``voter``'s log reaches the
    commit."""
    for i in range(5):
        deadline = time.monotonic() + 20
        while True:
            leader = next((s for s in servers if s.is_leader), None)
            try:
                if leader is not None:
                    await asyncio.wait_for(leader.propose(tag + b"%d" % i), 10)
                    break
            except NotControllerError:
                pass
            assert time.monotonic() < deadline, "no leader commits"
            await asyncio.sleep(0.05)
    target = leader.high_watermark
    await _until(lambda: int(voter.node.log_end_offset) >= target, f"voter to reach {target}")


def test_a_forged_stream_claiming_a_voter_does_not_cut_it_off(tmp_path: Path) -> None:
    voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(3))}

    async def main() -> None:
        servers = [
            RaftServer(i, voters, tmp_path / f"n{i}", listen=voters[i], seed=i) for i in voters
        ]
        for s in servers:
            await s.start()
        channel = None
        try:
            await _until(lambda: any(s.is_leader for s in servers), "a leader")
            leader = next(s for s in servers if s.is_leader)
            victim, other = [s for s in servers if s is not leader]
            await _replicates(servers, victim, b"before")

            # An outsider opens a stream to the leader claiming to be the victim, and keeps
            # fetching as it; then it claims a second id on the same stream.
            channel = peer_channel(voters[leader.node_id])
            call = raft_pb2_grpc.RaftStub(channel).Stream()
            received: list[RaftMessage] = []

            async def read() -> None:
                async for envelope in call:
                    msg = from_envelope(envelope)
                    if msg is not None:
                        received.append(msg)

            reader = asyncio.create_task(read())

            def forged(cid: int, source: int) -> Any:
                return to_envelope(
                    FetchRequest(
                        source=NodeId(source),
                        destination=leader.node_id,
                        epoch=Epoch(leader.epoch),
                        correlation_id=cid,
                        fetch_offset=Offset(0),
                        last_fetched_epoch=Epoch(0),
                        max_wait_ms=50,
                    )
                )

            sent: list[int] = []
            for i in range(20):
                cid = FORGED_BASE_CID + i
                sent.append(cid)
                await call.write(forged(cid, victim.node_id))
                await asyncio.sleep(0.02)
            await call.write(forged(FORGED_BASE_CID - 1, other.node_id))  # another id: dropped
            await _replicates(servers, victim, b"during")
            await _until(lambda: len(received) >= len(sent), "answers to the forged fetches")
            # The forged stream got the answers to its own requests and nothing else.
            assert {m.correlation_id for m in received} == set(sent)

            # Hanging up the forged stream leaves the victim's own stream alone.
            call.cancel()
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            await _replicates(servers, victim, b"after")
        finally:
            if channel is not None:
                await channel.close()
            for s in servers:
                await s.stop(graceful=False)

    asyncio.run(main())


def test_raft_rpcs_from_a_non_voter_with_int32_max_epochs_leave_the_quorum_alive(
    tmp_path: Path,
) -> None:
    """The finding on real gRPC: EndQuorumEpoch, BeginQuorumEpoch and Vote from id 999 with
    epoch 2^31-1, sent to every voter, are refused with INCONSISTENT_VOTER_SET; no epoch
    moves, no Raft loop dies, and the quorum keeps committing (the same core runs under
    `ReplicatedLog`, whose shell this is)."""
    voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(3))}

    async def main() -> None:
        servers = [
            RaftServer(i, voters, tmp_path / f"n{i}", listen=voters[i], seed=i) for i in voters
        ]
        for s in servers:
            await s.start()
        try:
            await _until(lambda: any(s.is_leader for s in servers), "a leader")
            await _replicates(servers, servers[0], b"before")
            epochs = [s.epoch for s in servers]
            for s in servers:
                dest = NodeId(s.node_id)
                head: dict[str, Any] = {
                    "source": NodeId(999),
                    "destination": dest,
                    "epoch": EPOCH_MAX,
                    "correlation_id": 1,
                }
                async with grpc.aio.insecure_channel(voters[dest]) as channel:
                    stub = raft_pb2_grpc.RaftStub(channel)
                    for call, req in (
                        (
                            stub.EndQuorumEpoch,
                            EndQuorumEpochRequest(
                                **head, leader_id=NodeId(999), preferred_successors=(dest,)
                            ),
                        ),
                        (stub.BeginQuorumEpoch, BeginQuorumEpochRequest(**head, leader_id=dest)),
                        (
                            stub.Vote,
                            VoteRequest(
                                **head,
                                last_epoch=Epoch(EPOCH_MAX - 1),
                                last_epoch_end_offset=Offset(1 << 40),
                            ),
                        ),
                    ):
                        resp = from_proto(await call(to_proto(req), timeout=5))
                        assert getattr(resp, "error", None) == ErrorCode.INCONSISTENT_VOTER_SET
            assert [s.epoch for s in servers] == epochs
            await _replicates(servers, servers[0], b"after")
            assert [s.epoch for s in servers] == epochs
            assert all(s.supervisor.death is None for s in servers)
        finally:
            for s in servers:
                await s.stop(graceful=False)

    asyncio.run(main())
