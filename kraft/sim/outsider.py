"""The outsider: forged Raft messages from ids outside the voter set, with huge epochs.

Issue 10 found that an EndQuorumEpoch from id 999 with epoch 2^31-1 moved a controller to that
epoch, and that Vote, BeginQuorumEpoch and EndQuorumEpoch from non-voters forced failovers.
The nemesis's ``outsider`` fault sends bursts of such messages, of every kind, claiming the
outsider's own id or an observer's, naming real voters as leaders, with epochs from
`FORGED_EPOCH_MIN` up to `EPOCH_MAX`. The checker's ``outsider_ignored`` invariant fails if
any node ever takes such an epoch; liveness after the heal shows none forced a lasting outage.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from kraft.raft.admission import EPOCH_MAX
from kraft.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
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
from kraft.sim.checker import FORGED_EPOCH_MIN
from kraft.types import Epoch, NodeId, Offset

OUTSIDER_ID = NodeId(999)
"""The outsider's own id: in no voter set and no simulated node."""


def forge_message(
    rng: random.Random, *, source: NodeId, destination: NodeId, voters: Sequence[NodeId]
) -> RaftMessage:
    """One forged message of a random kind from ``source`` (a non-voter) to ``destination``."""
    epoch = Epoch(rng.randint(FORGED_EPOCH_MIN, EPOCH_MAX))
    leader = rng.choice([source, *voters])
    offset = Offset(rng.randint(0, 1 << 40))
    head: dict[str, Any] = {
        "source": source,
        "destination": destination,
        "epoch": epoch,
        "correlation_id": rng.getrandbits(48),
    }
    kind = rng.randrange(10)
    if kind == 0:
        return VoteRequest(
            **head,
            last_epoch=Epoch(epoch - 1),
            last_epoch_end_offset=offset,
            pre_vote=rng.random() < 0.5,
        )
    if kind == 1:
        return VoteResponse(
            **head, vote_granted=True, pre_vote=rng.random() < 0.5, leader_id=leader
        )
    if kind == 2:
        return BeginQuorumEpochRequest(**head, leader_id=leader)
    if kind == 3:
        return BeginQuorumEpochResponse(**head, leader_id=leader)
    if kind == 4:
        return EndQuorumEpochRequest(**head, leader_id=leader, preferred_successors=(destination,))
    if kind == 5:
        return EndQuorumEpochResponse(**head, leader_id=leader)
    if kind == 6:
        return FetchRequest(
            **head,
            fetch_offset=Offset(rng.randint(0, 1000)),
            last_fetched_epoch=Epoch(rng.randint(0, 3)),
            high_watermark=offset,
            max_wait_ms=rng.choice((0, 50, 1 << 30)),
        )
    if kind == 7:
        return FetchResponse(**head, leader_id=leader, high_watermark=offset)
    snapshot = SnapshotId(offset, Epoch(rng.randint(0, epoch)))
    if kind == 8:
        return FetchSnapshotRequest(**head, snapshot_id=snapshot, position=rng.randint(0, 1 << 20))
    return FetchSnapshotResponse(**head, leader_id=leader, snapshot_id=snapshot, size_bytes=1 << 30)


__all__ = ["OUTSIDER_ID", "forge_message"]
