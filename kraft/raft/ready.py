"""`Ready`: what the shell must persist, send and apply, in that order; and `HardState`."""

from __future__ import annotations

from dataclasses import dataclass

from kraft.raft.messages import RaftMessage, SnapshotId
from kraft.types import Epoch, NodeId, Offset

NO_OFFSET = Offset(-1)
ZERO_OFFSET = Offset(0)
ZERO_EPOCH = Epoch(0)


@dataclass(frozen=True, slots=True, kw_only=True)
class HardState:
    """The election state that must survive a crash (Kafka's ``quorum-state`` file).

    ``voted_for`` is the vote cast in ``epoch`` (Raft §5.2: at most one per epoch);
    ``leader_id`` the leader known in ``epoch``.
    """

    epoch: Epoch = ZERO_EPOCH
    voted_for: NodeId | None = None
    leader_id: NodeId | None = None


@dataclass(frozen=True, slots=True)
class SnapshotChunk:
    """KIP-630: ``data`` goes at ``position`` of the snapshot being fetched."""

    snapshot_id: SnapshotId
    position: int
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Ready:
    """Work for the shell, produced by `RaftNode.ready`. The ordering contract:

    0. ``early_messages`` may be sent at once, before step 1: a leader's fetch responses,
       which carry entries it may not have synced yet (Raft thesis §10.2.1; the high
       watermark counts the leader's own log only once it is durable).
    1. Persist: write ``hard_state`` if set; apply ``truncate_to`` if set, then append
       ``entries``; write ``snapshot_chunks``, then, if ``install_snapshot`` is set, make that
       snapshot the log's start (delete the whole log; log start = its end offset). If
       ``must_sync`` is set, fsync all of it before step 2.
    2. Send ``messages``, and only now: vote grants, candidates' vote requests and fetch
       offsets (a follower's acknowledgement) depend on step 1 (etcd's ``msgsAfterAppend``).
    3. Apply: if ``install_snapshot`` is set, load that snapshot into the state machine first;
       then apply ``committed`` batches in order (skip control batches). Delete log batches
       that end at or before ``delete_log_before`` if set (a snapshot now covers them).
    4. Call `RaftNode.advance` with this Ready. Until then `has_ready` is False: one Ready is
       in flight at a time; `step`, `tick` and `propose` may still be called meanwhile.
    """

    hard_state: HardState | None = None
    truncate_to: Offset | None = None
    entries: tuple[bytes, ...] = ()
    entries_end_offset: Offset = NO_OFFSET
    """The log end offset once ``entries`` are appended."""
    must_sync: bool = False
    snapshot_chunks: tuple[SnapshotChunk, ...] = ()
    install_snapshot: SnapshotId | None = None
    messages: tuple[RaftMessage, ...] = ()
    early_messages: tuple[RaftMessage, ...] = ()
    committed: tuple[bytes, ...] = ()
    high_watermark: Offset = ZERO_OFFSET
    delete_log_before: Offset | None = None


__all__ = ["HardState", "Ready", "SnapshotChunk"]
