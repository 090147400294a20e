"""The Raft RPCs of KIP-595 (and KIP-996 pre-vote, KIP-630 snapshots) as frozen dataclasses,
and the metadata quorum's admin APIs (DescribeQuorum, KIP-853's voter changes).

Every Raft RPC names its ``source`` and ``destination`` node and carries the sender's
``epoch``: for a request, the epoch the sender is in (for a pre-vote, the epoch the
prospective would campaign in); for a response, the responder's current epoch, so a stale
requester learns it is behind. Responses echo the request's ``correlation_id``, which lets a
requester drop duplicated or stale responses.

Proto objects stop at the shell: a transport codec converts these to and from the wire.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.types import Epoch, NodeId, Offset
from storage.errors import ErrorCode

NO_OFFSET = Offset(-1)
ZERO_OFFSET = Offset(0)


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """A snapshot covers every offset below ``end_offset``; ``epoch`` is its last batch's epoch."""

    end_offset: Offset
    epoch: Epoch


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    """KIP-595: the leader's largest epoch <= the fetcher's last epoch, and where it ends."""

    epoch: Epoch
    end_offset: Offset


@dataclass(frozen=True, slots=True, kw_only=True)
class RaftMessage:
    """Fields every Raft message has."""

    source: NodeId
    destination: NodeId
    epoch: Epoch
    correlation_id: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteRequest(RaftMessage):
    """Ask for a vote (or, with ``pre_vote``, whether a vote would be granted: KIP-996).

    ``epoch`` is the epoch the candidate campaigns in; ``last_epoch`` and
    ``last_epoch_end_offset`` describe the end of its log (Raft §5.4.1 up-to-date check).
    """

    last_epoch: Epoch
    last_epoch_end_offset: Offset
    pre_vote: bool = False

    @property
    def candidate_id(self) -> NodeId:
        return self.source


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteResponse(RaftMessage):
    error: ErrorCode = ErrorCode.NONE
    leader_id: NodeId | None = None
    vote_granted: bool = False
    pre_vote: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginQuorumEpochRequest(RaftMessage):
    """A new leader announces itself to the voters (KIP-595); retried until acknowledged."""

    leader_id: NodeId


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginQuorumEpochResponse(RaftMessage):
    error: ErrorCode = ErrorCode.NONE
    leader_id: NodeId | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EndQuorumEpochRequest(RaftMessage):
    """A resigning leader names its preferred successors, most caught up first (KIP-595)."""

    leader_id: NodeId
    preferred_successors: tuple[NodeId, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class EndQuorumEpochResponse(RaftMessage):
    error: ErrorCode = ErrorCode.NONE
    leader_id: NodeId | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchRequest(RaftMessage):
    """Pull replication (KIP-595): the fetch offset doubles as the acknowledgement.

    ``fetch_offset`` is the fetcher's durable log end offset, ``last_fetched_epoch`` the epoch
    of the batch that ends there. ``high_watermark`` is what the fetcher knows (KIP-1166 style),
    so the leader answers at once when it knows more, else parks the fetch up to ``max_wait_ms``.
    """

    fetch_offset: Offset
    last_fetched_epoch: Epoch
    high_watermark: Offset = NO_OFFSET
    max_bytes: int = 1 << 20
    max_wait_ms: int = 0

    @property
    def replica_id(self) -> NodeId:
        return self.source


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResponse(RaftMessage):
    """Batches from the fetch offset on, or where to truncate to, or which snapshot to load.

    At most one of ``diverging_epoch`` and ``snapshot_id`` is set; ``batches`` is empty when
    either is.
    """

    error: ErrorCode = ErrorCode.NONE
    leader_id: NodeId | None = None
    high_watermark: Offset = NO_OFFSET
    log_start_offset: Offset = ZERO_OFFSET
    batches: tuple[bytes, ...] = ()
    diverging_epoch: DivergingEpoch | None = None
    snapshot_id: SnapshotId | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchSnapshotRequest(RaftMessage):
    """KIP-630: read ``max_bytes`` of a snapshot from ``position``."""

    snapshot_id: SnapshotId
    position: int
    max_bytes: int = 1 << 20

    @property
    def replica_id(self) -> NodeId:
        return self.source


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchSnapshotResponse(RaftMessage):
    error: ErrorCode = ErrorCode.NONE
    leader_id: NodeId | None = None
    snapshot_id: SnapshotId | None = None
    position: int = 0
    size_bytes: int = 0
    data: bytes = b""


# -- the metadata quorum's admin APIs (KIP-595 DescribeQuorum, KIP-853 voters) and KIP-951's
# current-leader hint, answered by the controllers' Raft shell ------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CurrentLeader:
    """The active controller as the answering controller knows it (KIP-951's CurrentLeader)."""

    leader_id: int = -1
    leader_address: str = ""
    epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeQuorumRequest:
    """KIP-595 DescribeQuorum (no arguments: kraft has one metadata partition)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumReplica:
    replica_id: int
    log_end_offset: int = -1
    lag: int = 0
    last_fetch_timestamp_ms: int = -1
    """Wall-clock milliseconds of the last fetch; -1 if it never fetched."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeQuorumResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    leader_id: int = -1
    leader_epoch: int = -1
    high_watermark: int = -1
    voters: tuple[QuorumReplica, ...] = ()
    observers: tuple[QuorumReplica, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddRaftVoterRequest:
    """KIP-853: add ``voter_id``, reached at ``endpoint`` (``host:port``), to the quorum."""

    voter_id: int
    endpoint: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AddRaftVoterResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveRaftVoterRequest:
    """KIP-853: remove ``voter_id`` from the quorum."""

    voter_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveRaftVoterResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


__all__ = [
    "AddRaftVoterRequest",
    "AddRaftVoterResponse",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "CurrentLeader",
    "DescribeQuorumRequest",
    "DescribeQuorumResponse",
    "DivergingEpoch",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "QuorumReplica",
    "RaftMessage",
    "RemoveRaftVoterRequest",
    "RemoveRaftVoterResponse",
    "SnapshotId",
    "VoteRequest",
    "VoteResponse",
]
