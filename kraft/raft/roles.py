"""The six Raft roles of KIP-595 + KIP-996, each holding only its own state (Kafka's
``EpochState`` family). `QuorumState` creates them; nothing else does.

Every role knows its ``epoch``. Deadlines are absolute times in the shell's milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft.raft.messages import FetchRequest, SnapshotId
from kraft.types import Epoch, NodeId


@dataclass(slots=True, kw_only=True)
class Unattached:
    """No known leader in ``epoch``; ``voted_for`` is this epoch's vote, if any.

    A voter campaigns (becomes `Prospective`) at ``election_deadline_ms``; an observer
    instead asks a random voter who leads (`RaftNode` probes every request timeout).
    """

    name = "unattached"
    epoch: Epoch
    voted_for: NodeId | None
    election_deadline_ms: int


@dataclass(slots=True, kw_only=True)
class Prospective:
    """KIP-996 pre-vote: asks voters whether they would vote, without bumping the epoch.

    ``leader_id`` is the leader this node followed in ``epoch`` before its fetches timed out.
    Pre-vote requests go out at ``send_at_ms`` (a random back-off after a lost election).
    """

    name = "prospective"
    epoch: Epoch
    voted_for: NodeId | None
    leader_id: NodeId | None
    election_deadline_ms: int
    send_at_ms: int
    granted: set[NodeId] = field(default_factory=set)
    rejected: set[NodeId] = field(default_factory=set)
    sent: bool = False
    retry_at_ms: int = 0


@dataclass(slots=True, kw_only=True)
class Candidate:
    """Raft §5.2: voted for itself in ``epoch`` (persisted) and asks the others."""

    name = "candidate"
    epoch: Epoch
    election_deadline_ms: int
    granted: set[NodeId] = field(default_factory=set)
    rejected: set[NodeId] = field(default_factory=set)
    retry_at_ms: int = 0


@dataclass(slots=True)
class ReplicaProgress:
    """How far one replica (voter or observer) has fetched from this leader (etcd's
    ``Progress``; unrelated to the ISR
    broker's ``replication.core.ReplicaState``)."""

    end_offset: int = -1
    """The replica's last valid fetch offset: everything below it is durable there."""
    last_fetch_ms: int = -1
    caught_up_ms: int = -1
    """When the replica last held everything the leader had (KIP-853: a new voter must have
    been caught up within the fetch timeout): Kafka's ``lastCaughtUpTimestamp``."""
    leader_end_at_last_fetch: int = -1
    last_valid_fetch_ms: int = -1
    """When the leader's end was ``leader_end_at_last_fetch``."""


@dataclass(slots=True, kw_only=True)
class Leader:
    """Raft §5.3 / KIP-595: serves fetches, advances the high watermark, batches proposals.

    ``epoch_start_offset`` is where the leader-change batch opening this epoch sits; nothing
    commits until a majority has fetched past it.
    """

    name = "leader"
    epoch: Epoch
    epoch_start_offset: int
    replicas: dict[NodeId, ReplicaProgress]
    """Every voter but this one, and each observer that has fetched."""
    unacked_begin_epoch: set[NodeId]
    begin_epoch_retry_at_ms: int
    check_quorum_deadline_ms: int
    fetched_since_check: set[NodeId] = field(default_factory=set)
    parked_fetches: dict[NodeId, tuple[FetchRequest, int]] = field(default_factory=dict)
    """Caught-up fetches waiting for data: replica -> (request, answer-by time)."""
    pending_records: list[bytes] = field(default_factory=list)
    pending_bytes: int = 0
    linger_deadline_ms: int | None = None


@dataclass(slots=True, kw_only=True)
class Follower:
    """Fetches from ``leader_id`` (KIP-595 pull replication).

    ``fetch_deadline_ms`` is when, not having fetched successfully, it gives up on the leader.
    """

    name = "follower"
    epoch: Epoch
    leader_id: NodeId
    voted_for: NodeId | None
    fetch_deadline_ms: int
    last_fetched_ok_ms: int | None = None
    """The last successful fetch: within the fetch timeout, pre-votes are refused (KIP-996)."""
    leader_resigned: bool = False
    """The leader sent EndQuorumEpoch: grant pre-votes even though it answered recently."""
    leader_lost: bool = False
    """Our connection to the leader was closed by its host (its process exited): grant
    pre-votes even though it answered recently, until a fetch succeeds again."""
    fetch_correlation_id: int | None = None
    fetch_sent_ms: int = 0
    fetch_backoff_until_ms: int = 0
    snapshot_fetch: SnapshotId | None = None
    """KIP-630: loading this snapshot from the leader instead of fetching batches."""
    snapshot_position: int = 0


@dataclass(slots=True, kw_only=True)
class Resigned:
    """A former leader of ``epoch``: votes for nobody in it and waits for the next leader.

    It tells the voters with EndQuorumEpoch (retried until acknowledged) and campaigns
    itself after ``election_deadline_ms``.
    """

    name = "resigned"
    epoch: Epoch
    preferred_successors: tuple[NodeId, ...]
    unacked: set[NodeId]
    retry_at_ms: int
    election_deadline_ms: int


Role = Unattached | Prospective | Candidate | Leader | Follower | Resigned

__all__ = [
    "Candidate",
    "Follower",
    "Leader",
    "Prospective",
    "ReplicaProgress",
    "Resigned",
    "Role",
    "Unattached",
]
