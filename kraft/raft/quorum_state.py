"""`QuorumState`: the current role and every transition between roles.

Allowed transitions (after Kafka's ``QuorumState``, with KIP-996's Prospective state);
"E+" means to a higher epoch, "E" within the same epoch::

    Unattached  -> Unattached (E+, or E to record a vote), Prospective (election timeout),
                   Follower (E/E+, leader discovered)
    Prospective -> Unattached (E+), Prospective (E, retry), Candidate (pre-vote majority),
                   Follower (E/E+)
    Candidate   -> Unattached (E+), Prospective (E, election lost), Leader (vote majority),
                   Follower (E/E+)
    Leader      -> Unattached (E+), Follower (E+), Resigned (E: graceful or check-quorum)
    Follower    -> Unattached (E+; E for observers only), Prospective (E, fetch timeout),
                   Follower (E+)
    Resigned    -> Unattached (E+), Prospective (E, election timeout), Follower (E+)

Observers (not in the voter set) are only ever Unattached or Follower. Every transition
checks its preconditions and raises `InvalidTransitionError` when they fail; epochs never
decrease and never pass `EPOCH_MAX`, the largest the wire carries (so a node in that epoch
can no longer become a candidate). The election state to persist (`HardState`) follows
from the role, and so does ``logger``: every assignment of ``role`` rebinds it with the new
role's name and epoch, so whoever logs next names the role it is in.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import NoReturn, final

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.raft.admission import EPOCH_MAX
from kraft.raft.config import RaftConfig
from kraft.raft.errors import InvalidTransitionError
from kraft.raft.ready import HardState
from kraft.raft.roles import (
    Candidate,
    Follower,
    Leader,
    Prospective,
    ReplicaProgress,
    Resigned,
    Role,
    Unattached,
)
from kraft.raft.voters import VoterHistory
from kraft.types import Epoch, NodeId


@final
class QuorumState:
    """Owns the role; `RaftNode` asks it for every transition."""

    __slots__ = (
        "_base_logger",
        "_config",
        "_history",
        "_last_hard_state",
        "_rng",
        "_role",
        "_static_voters",
        "high_watermark_fn",
        "local_id",
        "logger",
    )

    def __init__(
        self,
        *,
        local_id: NodeId,
        voters: frozenset[NodeId],
        config: RaftConfig,
        rng: random.Random,
        persisted: HardState,
        now_ms: int,
        logger: FilteringBoundLogger | None = None,
        history: VoterHistory | None = None,
    ) -> None:
        assert voters, "a quorum needs voters"
        self._base_logger: FilteringBoundLogger = (
            logger
            if logger is not None
            else structlog.get_logger("kraft.raft").bind(node_id=local_id)
        )
        self.logger = self._base_logger  # rebound with role and epoch by every transition
        self.local_id = local_id
        self._static_voters = voters
        self._history = history
        self.high_watermark_fn: Callable[[], int] = lambda: 0
        """The node's high watermark (set by `RaftNode` once replication exists)."""
        self._config = config
        self._rng = rng
        self._last_hard_state = persisted
        epoch = persisted.epoch
        # On restart: a former leader resigns (it lost its leader state); a follower resumes
        # fetching; anyone else is unattached and keeps its vote (never votes twice, §5.2).
        if persisted.leader_id == local_id and self.campaigns:
            self.role = Resigned(
                epoch=epoch,
                preferred_successors=(),
                unacked=set(self.voters - {local_id}),
                retry_at_ms=now_ms,
                election_deadline_ms=now_ms + self.random_election_timeout_ms(),
            )
        elif persisted.leader_id is not None and persisted.leader_id != local_id:
            self.role = Follower(
                epoch=epoch,
                leader_id=persisted.leader_id,
                voted_for=persisted.voted_for,
                fetch_deadline_ms=now_ms + config.fetch_timeout_ms,
            )
        else:
            self.role = Unattached(
                epoch=epoch,
                voted_for=persisted.voted_for,
                election_deadline_ms=now_ms + self.random_election_timeout_ms(),
            )

    # --- accessors ----------------------------------------------------------------------------

    @property
    def role(self) -> Role:
        return self._role

    @role.setter
    def role(self, role: Role) -> None:
        # Every transition ends here: the logger names the role and epoch it is now in.
        self._role = role
        self.logger = self._base_logger.bind(role=role.name, epoch=role.epoch)

    @property
    def epoch(self) -> Epoch:
        return self.role.epoch

    @property
    def voters(self) -> frozenset[NodeId]:
        """The voter set in use: KIP-853's latest one in the log, else the static one."""
        return self._history.ids if self._history is not None else self._static_voters

    @property
    def dynamic(self) -> bool:
        """Whether the voter set comes from the log (KIP-853), not only from configuration."""
        return self._history is not None

    def may_follow(self, leader_id: NodeId) -> bool:
        """Whether a leader named for an epoch may be followed. KIP-853: with the voter set in
        the log ours may be stale (a leader being removed leads until the change commits; a
        joining node knows no voters yet), so any other node may be; statically, voters only."""
        if leader_id == self.local_id:
            return False
        return self.dynamic or leader_id in self.voters

    @property
    def campaigns(self) -> bool:
        """Whether this node stands for election: a voter, or (KIP-853) one that the latest,
        not yet committed, VotersRecord in its log removes. NB: such a removed leader may
        hold the only copy of that record; were it to stop campaigning, the voters whose
        logs lack the record would need its vote and never get it (their logs are behind),
        and the quorum could elect no one. Elected, it leads until the record commits, then
        resigns; its own vote never counts in a set it is not in."""
        if self.is_voter:
            return True
        history = self._history
        return (
            history is not None
            and history.latest_offset >= self.high_watermark_fn()
            and self.local_id in history.previous_ids
        )

    @property
    def is_voter(self) -> bool:
        return self.local_id in self.voters

    @property
    def leader_id(self) -> NodeId | None:
        """The leader of the current epoch, if known."""
        match self.role:
            case Leader():
                return self.local_id
            case Follower(leader_id=leader):
                return leader
            case _:
                return None

    def hard_state(self) -> HardState:
        """The election state implied by the role."""
        match self.role:
            case Unattached(epoch=e, voted_for=v):
                return HardState(epoch=e, voted_for=v, leader_id=None)
            case Prospective(epoch=e, voted_for=v, leader_id=leader):
                return HardState(epoch=e, voted_for=v, leader_id=leader)
            case Candidate(epoch=e):
                return HardState(epoch=e, voted_for=self.local_id, leader_id=None)
            case Leader(epoch=e) | Resigned(epoch=e):
                return HardState(epoch=e, voted_for=self.local_id, leader_id=self.local_id)
            case Follower(epoch=e, voted_for=v, leader_id=leader):
                return HardState(epoch=e, voted_for=v, leader_id=leader)
        raise AssertionError(f"unknown role {self.role!r}")  # pragma: no cover

    @property
    def hard_state_changed(self) -> bool:
        return self.hard_state() != self._last_hard_state

    def take_hard_state_update(self) -> HardState | None:
        """The hard state to persist if it changed since last taken, else None."""
        current = self.hard_state()
        if current == self._last_hard_state:
            return None
        assert current.epoch >= self._last_hard_state.epoch, "persisted epoch went backwards"
        if current.epoch == self._last_hard_state.epoch:
            prev = self._last_hard_state.voted_for
            assert prev is None or current.voted_for == prev, "voted twice in one epoch"
        self._last_hard_state = current
        return current

    def leader_or_raise(self) -> Leader:
        if not isinstance(self.role, Leader):
            raise InvalidTransitionError(f"not the leader: {self.role.name}")
        return self.role

    def follower_or_raise(self) -> Follower:
        if not isinstance(self.role, Follower):
            raise InvalidTransitionError(f"not a follower: {self.role.name}")
        return self.role

    def random_election_timeout_ms(self) -> int:
        """Raft §5.2: a random timeout in [T, 2T) makes split votes rare."""
        t = self._config.election_timeout_ms
        return t + self._rng.randrange(t)

    def random_backoff_ms(self) -> int:
        return self._rng.randrange(self._config.election_backoff_max_ms + 1)

    # --- transitions --------------------------------------------------------------------------

    def transition_to_unattached(self, epoch: Epoch, now_ms: int) -> Unattached:
        """To a higher epoch with no known leader (or, for an observer whose fetches time out,
        to the same epoch)."""
        # KIP-853: a leader removed from the voters, once resigned, is an observer too.
        same_epoch_observer = (
            epoch == self.epoch and not self.is_voter and isinstance(self.role, Follower | Resigned)
        )
        if epoch <= self.epoch and not same_epoch_observer:
            self._refuse(f"unattached in epoch {epoch}")
        self._check_epoch(epoch)
        role = Unattached(
            epoch=epoch,
            # NB: in the same epoch the vote stays (a voter removed while following may have
            # voted in it: Raft §5.2, one vote per epoch, also across a restart).
            voted_for=self.hard_state().voted_for if epoch == self.epoch else None,
            election_deadline_ms=now_ms + self.random_election_timeout_ms(),
        )
        self.role = role
        return role

    def transition_to_unattached_voted(self, epoch: Epoch, candidate: NodeId, now_ms: int) -> None:
        """Record a vote for ``candidate`` in ``epoch`` (Raft §5.2: one vote per epoch)."""
        if not self.dynamic and (not self.is_voter or candidate not in self.voters):
            self._refuse("vote by or for a non-voter")
        role = self.role
        if epoch < self.epoch:
            self._refuse(f"vote in past epoch {epoch}")
        self._check_epoch(epoch)
        if epoch == self.epoch and not (
            isinstance(role, Unattached) and role.voted_for in (None, candidate)
        ):
            self._refuse(f"vote for {candidate} in epoch {epoch}")
        self.role = Unattached(
            epoch=epoch,
            voted_for=candidate,
            election_deadline_ms=now_ms + self.random_election_timeout_ms(),
        )

    def transition_to_prospective(self, now_ms: int, *, backoff_ms: int = 0) -> Prospective:
        """KIP-996: a voter that lost its leader (or an election) asks for pre-votes."""
        role = self.role
        if not self.campaigns:
            self._refuse("observers never campaign")
        voted_for: NodeId | None = None
        leader: NodeId | None = None
        match role:
            case Unattached(voted_for=v):
                voted_for = v
            case Follower(voted_for=v, leader_id=leader_id):
                voted_for, leader = v, leader_id
            case Prospective(voted_for=v, leader_id=leader_id):
                voted_for, leader = v, leader_id
            case Candidate() | Resigned():
                voted_for = self.local_id
            case Leader():
                self._refuse("a leader resigns before it campaigns")
        new = Prospective(
            epoch=role.epoch,
            voted_for=voted_for,
            leader_id=leader,
            election_deadline_ms=now_ms + backoff_ms + self.random_election_timeout_ms(),
            send_at_ms=now_ms + backoff_ms,
        )
        new.granted.add(self.local_id)
        self.role = new
        return new

    def transition_to_candidate(self, now_ms: int) -> Candidate:
        """Raft §5.2 after a KIP-996 pre-vote majority: bump the epoch and vote for ourselves."""
        if not isinstance(self.role, Prospective):
            self._refuse("candidacy without a pre-vote")
        self._check_epoch(self.epoch + 1)
        role = Candidate(
            epoch=Epoch(self.epoch + 1),
            election_deadline_ms=now_ms + self.random_election_timeout_ms(),
        )
        role.granted.add(self.local_id)
        self.role = role
        return role

    def transition_to_leader(self, epoch_start_offset: int, now_ms: int) -> Leader:
        """Raft §5.2: a candidate with votes from a majority leads its epoch."""
        role = self.role
        if not isinstance(role, Candidate) or 2 * len(role.granted) <= len(self.voters):
            self._refuse("leadership without a vote majority")
        others = self.voters - {self.local_id}
        leader = Leader(
            epoch=role.epoch,
            epoch_start_offset=epoch_start_offset,
            replicas={v: ReplicaProgress() for v in others},
            unacked_begin_epoch=set(others),
            begin_epoch_retry_at_ms=now_ms,
            check_quorum_deadline_ms=now_ms + self._config.check_quorum_timeout_ms,
        )
        self.role = leader
        return leader

    def transition_to_follower(self, epoch: Epoch, leader_id: NodeId, now_ms: int) -> Follower:
        """Follow ``leader_id``: in a higher epoch, or in ours if we knew no leader in it."""
        role = self.role
        if not self.may_follow(leader_id):
            self._refuse(f"follow {leader_id}")
        if epoch < self.epoch:
            self._refuse(f"follow in past epoch {epoch}")
        self._check_epoch(epoch)
        if epoch == self.epoch and not isinstance(role, Unattached | Prospective | Candidate):
            self._refuse(f"follow {leader_id} from {role.name} in the same epoch")
        voted_for: NodeId | None = None
        if epoch == self.epoch:
            match role:
                case Unattached(voted_for=v) | Prospective(voted_for=v):
                    voted_for = v
                case Candidate():
                    voted_for = self.local_id
        follower = Follower(
            epoch=epoch,
            leader_id=leader_id,
            voted_for=voted_for,
            fetch_deadline_ms=now_ms + self._config.fetch_timeout_ms,
        )
        self.role = follower
        return follower

    def transition_to_resigned(self, preferred_successors: tuple[NodeId, ...], now_ms: int) -> None:
        """KIP-595: a leader steps down in its epoch (graceful or check-quorum)."""
        role = self.leader_or_raise()
        self.role = Resigned(
            epoch=role.epoch,
            preferred_successors=preferred_successors,
            unacked=set(self.voters - {self.local_id}),
            retry_at_ms=now_ms,
            election_deadline_ms=now_ms + self.random_election_timeout_ms(),
        )

    @property
    def can_campaign(self) -> bool:
        """Whether the next epoch still fits the wire (a voter's only way up is +1)."""
        return self.campaigns and self.epoch < EPOCH_MAX

    def _check_epoch(self, epoch: int) -> None:
        if epoch > EPOCH_MAX:
            self._refuse(f"enter epoch {epoch} past the wire's int32")

    def _refuse(self, what: str) -> NoReturn:
        raise InvalidTransitionError(
            f"node {self.local_id} in {self.role.name} epoch {self.epoch}: cannot {what}"
        )


__all__ = ["QuorumState"]
