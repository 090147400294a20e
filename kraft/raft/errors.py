"""Errors raised by the Raft core.

Two kinds (STYLE §5):

- `NotLeaderError` is an operating error: `RaftNode.propose` on a replica that is not the
  leader. It carries the leader id and epoch this replica knows, so a client can redirect.
- `InvalidTransitionError` is a programmer error: `QuorumState` was asked for a transition
  its preconditions forbid. It is an `InvariantViolation` and crashes the node.

Peers' stale or bad requests never raise: the core answers them with an `ErrorCode`.
"""

from __future__ import annotations

from typing import final

from kraft.types import Epoch, NodeId
from storage.errors import InvariantViolation, NotLeaderOrFollowerError


@final
class NotLeaderError(NotLeaderOrFollowerError):  # type: ignore[misc]
    """This replica is not the Raft leader (Kafka error 6, NOT_LEADER_OR_FOLLOWER).

    NB: subclasses the @final `NotLeaderOrFollowerError` on purpose: it is that error with a
    leader hint, so shells map it to the same wire code; `ERROR_CLASSES` lists direct subclasses
    of `KraftError` only, so the one-class-per-code rule still holds.
    """

    def __init__(self, message: str = "", *, leader_id: NodeId | None, epoch: Epoch) -> None:
        if not message:
            message = f"not the leader (leader: {leader_id}, epoch: {epoch})"
        super().__init__(message)
        self.leader_id = leader_id
        self.epoch = epoch

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_not_leader, (self.message, self.leader_id, self.epoch))


def _rebuild_not_leader(message: str, leader_id: NodeId | None, epoch: Epoch) -> NotLeaderError:
    return NotLeaderError(message, leader_id=leader_id, epoch=epoch)


@final
class InvalidTransitionError(InvariantViolation):
    """`QuorumState` refused a role transition whose preconditions do not hold (a bug)."""


__all__ = ["InvalidTransitionError", "NotLeaderError"]
