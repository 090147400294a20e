"""Which peer messages the core lets in: KIP-595's voter-only rules and numbers that make sense.

Theory of operation
-------------------
`RaftNode.step` asks `request_error` about every request and `response_admitted` about every
response before any handler sees it, so no handler can change state on a message these rules
refuse. A refused request is answered with the error (and our epoch and leader hint) and
changes nothing; a refused response is dropped.

- **Numbers** (Kafka answers INVALID_REQUEST): epochs are int32 on the wire and never
  negative, so any message outside ``0..EPOCH_MAX`` is refused; offsets, sizes and waits are
  never negative; a candidate's last epoch is below the epoch it campaigns in, and a
  fetcher's last fetched epoch is not above the epoch it fetches in (Kafka's
  ``handleVoteRequest`` / ``validateFetchRequest``).
- **Voters only** (Kafka's ``validateVoterOnlyRequest``, KIP-595), with a static voter set:
  Vote, BeginQuorumEpoch and EndQuorumEpoch must come from a voter, and be sent to a voter,
  else INCONSISTENT_VOTER_SET. With the voter set in the log (KIP-853) they are let in from
  anyone (Raft thesis §4.1: a replica's set may be stale, and refusing a candidate or a
  leader its log does not know yet can leave a quorum unable to elect); the candidate counts
  votes against its own set, pre-vote (KIP-996) keeps removed voters from disrupting, and
  only authenticated transport binds an id to a node. BeginQuorumEpoch and EndQuorumEpoch
  speak for their ``leader_id``, which must be their sender.
- **Observers** may send Fetch and FetchSnapshot only; the leader counts an observer's fetch
  offset for nothing (the high watermark is a majority of *voters*).
- **Responses** come only from voters, or from the leader we fetch from (KIP-853: it may
  have left the voter set in our log): we send requests to no one else, so a response from
  anyone else is forged or misrouted, and is dropped before its epoch can move us.

NB: identity is what a message *claims*. A peer that claims a voter's id passes these rules;
only authenticated transport (mutual TLS, a later issue) binds an id to a node.
"""

from __future__ import annotations

from typing import Final

from kraft.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    RaftMessage,
    VoteRequest,
)
from kraft.types import Epoch, NodeId
from storage.errors import ErrorCode

EPOCH_MAX: Final = Epoch(2**31 - 1)
"""The largest epoch the wire carries (int32, as in Kafka). A node in this epoch can follow a
leader of it but can no longer campaign: its next epoch would not fit."""

REQUEST_TYPES: Final = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
)
_VOTER_ONLY: Final = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest)


def epoch_in_range(epoch: int) -> bool:
    return 0 <= epoch <= EPOCH_MAX


def request_error(
    msg: RaftMessage,
    *,
    voters: frozenset[NodeId],
    local_is_voter: bool,
    dynamic: bool = False,
) -> ErrorCode | None:
    """Why the core must refuse request ``msg`` without looking further, or None."""
    if not epoch_in_range(msg.epoch) or msg.source < 0:
        return ErrorCode.INVALID_REQUEST
    match msg:
        case VoteRequest():
            if (
                msg.last_epoch < 0
                or msg.last_epoch_end_offset < 0
                or msg.last_epoch >= msg.epoch  # Kafka: lastEpoch >= candidateEpoch
            ):
                return ErrorCode.INVALID_REQUEST
        case BeginQuorumEpochRequest() | EndQuorumEpochRequest():
            if msg.leader_id != msg.source and msg.source in voters:
                return ErrorCode.INVALID_REQUEST
        case FetchRequest():
            if (
                msg.fetch_offset < 0
                or msg.last_fetched_epoch < 0
                or msg.last_fetched_epoch > msg.epoch  # Kafka's validateFetchRequest
                or msg.high_watermark < -1
                or msg.max_bytes < 0
                or msg.max_wait_ms < 0
            ):
                return ErrorCode.INVALID_REQUEST
        case FetchSnapshotRequest():
            snapshot = msg.snapshot_id
            if snapshot.end_offset < 0 or snapshot.epoch < 0 or msg.max_bytes < 0:
                return ErrorCode.INVALID_REQUEST
    if (
        isinstance(msg, _VOTER_ONLY)
        and not dynamic
        and (msg.source not in voters or not local_is_voter)
    ):
        return ErrorCode.INCONSISTENT_VOTER_SET
    return None


def response_admitted(msg: RaftMessage, *, voters: frozenset[NodeId]) -> bool:
    """Whether a response may reach the handlers: from a voter, with a wire-sized epoch."""
    return msg.source in voters and epoch_in_range(msg.epoch)


def is_request(msg: RaftMessage) -> bool:
    return isinstance(msg, REQUEST_TYPES)


__all__ = [
    "EPOCH_MAX",
    "REQUEST_TYPES",
    "epoch_in_range",
    "is_request",
    "request_error",
    "response_admitted",
]
