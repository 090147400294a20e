"""Every Raft message survives the trip to proto bytes and back unchanged."""

from __future__ import annotations

import pytest

from kraft.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DivergingEpoch,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kraft.transport.codec import from_proto, to_proto
from kraft.types import Epoch, NodeId, Offset
from storage.errors import ErrorCode
from storage.records import build_batch

H = {"source": NodeId(1), "destination": NodeId(2), "epoch": Epoch(7), "correlation_id": 99}
B1 = build_batch([b"a", b"b"], timestamp_ms=5, base_offset=10, partition_leader_epoch=7)
B2 = build_batch([b"c"], timestamp_ms=6, base_offset=12, partition_leader_epoch=7)
SNAP = SnapshotId(end_offset=Offset(100), epoch=Epoch(3))

MESSAGES: list[RaftMessage] = [
    VoteRequest(**H, last_epoch=Epoch(6), last_epoch_end_offset=Offset(40), pre_vote=True),
    VoteResponse(**H, error=ErrorCode.FENCED_LEADER_EPOCH, leader_id=None, vote_granted=False),
    VoteResponse(**H, leader_id=NodeId(3), vote_granted=True, pre_vote=True),
    BeginQuorumEpochRequest(**H, leader_id=NodeId(1)),
    BeginQuorumEpochResponse(**H, leader_id=NodeId(1)),
    EndQuorumEpochRequest(**H, leader_id=NodeId(1), preferred_successors=(NodeId(3), NodeId(2))),
    EndQuorumEpochResponse(**H, error=ErrorCode.NOT_LEADER_OR_FOLLOWER),
    FetchRequest(
        **H,
        fetch_offset=Offset(12),
        last_fetched_epoch=Epoch(7),
        high_watermark=Offset(10),
        max_wait_ms=500,
    ),
    FetchResponse(**H, leader_id=NodeId(1), high_watermark=Offset(13), batches=(B1, B2)),
    FetchResponse(**H, leader_id=NodeId(1), diverging_epoch=DivergingEpoch(Epoch(5), Offset(30))),
    FetchResponse(**H, leader_id=NodeId(1), log_start_offset=Offset(100), snapshot_id=SNAP),
    FetchSnapshotRequest(**H, snapshot_id=SNAP, position=4096, max_bytes=1024),
    FetchSnapshotResponse(**H, snapshot_id=SNAP, position=4096, size_bytes=9000, data=b"x" * 10),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_message_round_trips_through_wire_bytes(message: RaftMessage) -> None:
    wire = to_proto(message).SerializeToString()
    parsed = type(to_proto(message))()
    parsed.ParseFromString(wire)
    assert from_proto(parsed) == message
