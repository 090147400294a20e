"""What a Raft leader decides about one fetcher, as pure functions of its state (called by
`kraft.raft.replication.Replication`): whether the fetch position matches the leader's log
(KIP-595's ``validateOffsetAndEpoch``, with KIP-630's snapshots), when a replica counts as
caught up (KIP-853 needs it to add a voter), and how many observers a leader remembers.
"""

from __future__ import annotations

from kraft.raft.log import RaftLog
from kraft.raft.messages import DivergingEpoch, SnapshotId
from kraft.raft.roles import Leader, ReplicaProgress
from kraft.types import Epoch, NodeId, Offset

OBSERVER_SESSION_TIMEOUT_MS = 300_000
"""Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS: an observer silent this long is forgotten."""
OBSERVERS_MAX = 1024
"""The most observers a leader tracks; the stalest one goes first."""


def validate_fetch_position(
    log: RaftLog, fetch_offset: int, last_fetched_epoch: int
) -> DivergingEpoch | SnapshotId | None:
    """Kafka's ``validateOffsetAndEpoch``: None when the fetcher's log matches ours."""
    start = log.log_start_offset
    snapshot = log.snapshot_id
    if snapshot is not None and fetch_offset <= start:
        # KIP-630: behind the log start, or at it with a different history: load the
        # snapshot. At it with the snapshot's epoch: the logs match (Log Matching).
        if fetch_offset == start and last_fetched_epoch == snapshot.epoch:
            return None
        return snapshot
    if fetch_offset == 0:
        return None
    found = log.end_offset_for_epoch(last_fetched_epoch)
    if found is None:
        if snapshot is not None:
            return snapshot
        return DivergingEpoch(Epoch(0), Offset(start))
    epoch, end = found
    if epoch != last_fetched_epoch or end < fetch_offset:
        return DivergingEpoch(epoch, end)
    return None


def note_caught_up(replica: ReplicaProgress, fetch_offset: int, log_end: int, now_ms: int) -> None:
    """Kafka's ``ReplicaState.updateFetchState``: at the leader's end now, it is caught up
    now; at the end the leader had at its previous fetch, it was then (under a steady
    write load a fetcher is never at the moving end, yet keeps up)."""
    if fetch_offset >= log_end:
        replica.caught_up_ms = now_ms
    elif fetch_offset >= replica.leader_end_at_last_fetch >= 0:
        replica.caught_up_ms = max(replica.caught_up_ms, replica.last_valid_fetch_ms)
    replica.leader_end_at_last_fetch = log_end
    replica.last_valid_fetch_ms = now_ms


def make_room_for_an_observer(leader: Leader, voters: frozenset[NodeId], now_ms: int) -> None:
    """Forget observers silent for Kafka's observer session timeout, and the stalest one
    past `OBSERVERS_MAX`: fetches from made-up ids must not grow the leader without bound.
    (Observers count for nothing but DescribeQuorum.)"""
    observers = [(r.last_fetch_ms, v) for v, r in leader.replicas.items() if v not in voters]
    if len(observers) < OBSERVERS_MAX and not any(
        t < now_ms - OBSERVER_SESSION_TIMEOUT_MS for t, _ in observers
    ):
        return
    observers.sort()
    for i, (last_fetch_ms, v) in enumerate(observers):
        if (
            last_fetch_ms >= now_ms - OBSERVER_SESSION_TIMEOUT_MS
            and len(observers) - i < OBSERVERS_MAX
        ):
            break
        del leader.replicas[v]
