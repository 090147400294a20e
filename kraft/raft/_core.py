"""State and helpers shared by `RaftNode`'s parts (election, replication, the public API).

`RaftNode` is assembled from `NodeCore` plus two mixins so that no module grows past a few
hundred lines: ``election.py`` (Vote, BeginQuorumEpoch, EndQuorumEpoch, campaigning) and
``replication.py`` (Fetch, FetchSnapshot, the high watermark, the append accumulator).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from structlog.typing import FilteringBoundLogger

from kraft.raft.config import RaftConfig
from kraft.raft.log import RaftLog, RaftStorage
from kraft.raft.messages import FetchResponse, RaftMessage, SnapshotId
from kraft.raft.quorum_state import QuorumState
from kraft.raft.ready import Ready, SnapshotChunk
from kraft.raft.roles import Candidate, Follower, Leader, Prospective, Unattached
from kraft.types import Epoch, NodeId, Offset


@dataclass(frozen=True, slots=True, kw_only=True)
class UnsafeOptions:
    """Deliberate protocol bugs, for proving that the simulator's checkers can fail.

    Never set these outside tests.
    """

    commit_without_majority: bool = False
    """The leader advances its high watermark to its own log end, ignoring the voters."""


class NodeCore:
    """Fields and helpers every part of `RaftNode` uses."""

    _id: NodeId
    _voters: frozenset[NodeId]
    _config: RaftConfig
    _rng: random.Random
    _storage: RaftStorage
    _raft_log: RaftLog
    _quorum: QuorumState
    _base_logger: FilteringBoundLogger
    _logger: FilteringBoundLogger
    _unsafe: UnsafeOptions
    # Invariant: log_start_offset <= applied <= high_watermark <= log_end_offset
    _high_watermark: int
    _applied: int
    _outbox: list[RaftMessage]
    _early_outbox: list[RaftMessage]
    _snapshot_chunks: list[SnapshotChunk]
    _install_snapshot: SnapshotId | None
    _install_in_flight: bool
    _delete_log_before: Offset | None
    _in_flight: Ready | None
    _next_correlation_id: int
    _probe_correlation_id: int | None
    _probe_at_ms: int
    _now_ms: int

    # --- implemented by the mixins ------------------------------------------------------------

    def _maybe_send_fetch(self, now_ms: int) -> bool:
        raise NotImplementedError

    def _send_vote_requests(self, now_ms: int) -> None:
        raise NotImplementedError

    def _drop_leader_state(self, leader: Leader, reason: str) -> None:
        raise NotImplementedError

    # --- shared helpers -----------------------------------------------------------------------

    @property
    def _epoch(self) -> Epoch:
        return self._quorum.epoch

    def _correlation_id(self) -> int:
        self._next_correlation_id += 1
        return self._next_correlation_id

    def _send(self, msg: RaftMessage) -> None:
        if isinstance(msg, FetchResponse) and isinstance(self._quorum.role, Leader):
            # Raft thesis §10.2.1: a leader may replicate entries before its own write is
            # durable; the high watermark counts its own log only once synced.
            self._early_outbox.append(msg)
        else:
            self._outbox.append(msg)

    def _rebind(self) -> None:
        self._logger = self._base_logger.bind(role=self._quorum.role.name, epoch=self._epoch)

    def _set_high_watermark(self, offset: int) -> None:
        # Invariant: the high watermark never goes backwards on a node (KIP-595).
        assert offset >= self._high_watermark, (
            f"high watermark would go back from {self._high_watermark} to {offset}"
        )
        assert offset <= self._raft_log.log_end_offset, "high watermark past the log end"
        self._high_watermark = offset

    def _become_follower(self, epoch: Epoch, leader_id: NodeId, now_ms: int) -> None:
        role = self._quorum.role
        if isinstance(role, Leader):
            self._drop_leader_state(role, "higher_epoch")
        self._quorum.transition_to_follower(epoch, leader_id, now_ms)
        self._rebind()
        self._logger.info("became_follower", leader_id=leader_id)
        self._maybe_send_fetch(now_ms)

    def _become_unattached(self, epoch: Epoch, now_ms: int) -> None:
        role = self._quorum.role
        if isinstance(role, Leader):
            self._drop_leader_state(role, "higher_epoch")
        self._quorum.transition_to_unattached(epoch, now_ms)
        self._rebind()
        self._logger.info("became_unattached")
        if not self._quorum.is_voter:
            self._probe_at_ms = now_ms

    def _on_higher_epoch(self, epoch: Epoch, leader_id: NodeId | None, now_ms: int) -> None:
        """Any message from a higher epoch moves us there (Raft §5.1)."""
        assert epoch > self._epoch
        if leader_id is not None and leader_id != self._id and leader_id in self._voters:
            self._become_follower(epoch, leader_id, now_ms)
        else:
            self._become_unattached(epoch, now_ms)

    def _maybe_learn_leader(self, epoch: Epoch, leader_id: NodeId | None, now_ms: int) -> bool:
        """A peer told us who leads ``epoch``: follow if that is news. Returns True if we moved."""
        if epoch > self._epoch:
            self._on_higher_epoch(epoch, leader_id, now_ms)
            return True
        role = self._quorum.role
        if (
            epoch == self._epoch
            and leader_id is not None
            and leader_id != self._id
            and leader_id in self._voters
            and isinstance(role, Unattached | Prospective | Candidate)
            # NB: a prospective that gave up on its leader does not follow it again just
            # because peers still name it (Kafka: only when no leader is known); it returns to
            # it when its pre-vote round times out.
            and not (isinstance(role, Prospective) and role.leader_id is not None)
        ):
            self._become_follower(epoch, leader_id, now_ms)
            return True
        return False

    def _follower(self) -> Follower | None:
        role = self._quorum.role
        return role if isinstance(role, Follower) else None


__all__ = ["NodeCore", "UnsafeOptions"]
