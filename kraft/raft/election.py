"""Leader election: Vote with pre-vote (KIP-595, KIP-996), BeginQuorumEpoch, EndQuorumEpoch.

Theory of operation
-------------------
A voter that hears from no leader (its election timeout as `Unattached`, its fetch timeout as
`Follower`) becomes `Prospective` and sends pre-votes for the next epoch, changing nothing
durable. A voter grants a pre-vote if the prospective's log is at least as up to date as its
own and it has not fetched successfully from a live leader within the fetch timeout (KIP-996),
so a partitioned node cannot disrupt a healthy quorum. On a pre-vote majority the node becomes
`Candidate`: it bumps the epoch and votes for itself, and the vote requests go out only after
that `HardState` is synced (the `Ready` contract). A vote is granted at most once per epoch,
to a candidate whose log is up to date (Raft §5.2, §5.4.1), and the grant is sent only after
the vote is synced. With a vote majority the candidate leads, appends a leader-change batch
and announces itself with BeginQuorumEpoch until every voter has acknowledged (or fetched).

A leader that resigns (gracefully, or when check-quorum finds no majority fetching) sends
EndQuorumEpoch with its preferred successors, most caught up first; a successor campaigns
after a back-off that grows with its position in that list.
"""

from __future__ import annotations

from typing import final

from structlog.typing import FilteringBoundLogger

from kraft.raft.config import RaftConfig
from kraft.raft.control import build_leader_change_batch
from kraft.raft.log import RaftLog
from kraft.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    VoteRequest,
    VoteResponse,
)
from kraft.raft.outbox import Outbox
from kraft.raft.quorum import has_majority
from kraft.raft.quorum_state import QuorumState
from kraft.raft.replication import Replication
from kraft.raft.roles import (
    Candidate,
    Follower,
    Leader,
    Prospective,
    Resigned,
    Unattached,
)
from kraft.types import Epoch, NodeId
from storage.errors import ErrorCode


@final
class Election:
    """Vote, BeginQuorumEpoch and EndQuorumEpoch handling, campaigning, and every role change.

    It keeps no state of its own: the vote tallies and election timers belong to the roles
    (`Prospective`, `Candidate`, `Resigned`, ...), which `QuorumState` creates and checks. This
    class decides *when* to move (timeouts, majorities, a higher epoch or a new leader heard
    of) and does what goes with a move: drop a leader's pending work, send the requests of
    the new role, start fetching from a new leader.
    """

    __slots__ = ("_config", "_id", "_outbox", "_quorum", "_raft_log", "_replication")

    def __init__(
        self,
        *,
        quorum: QuorumState,
        config: RaftConfig,
        raft_log: RaftLog,
        outbox: Outbox,
        replication: Replication,
    ) -> None:
        self._quorum = quorum
        self._id = quorum.local_id
        self._config = config
        self._raft_log = raft_log
        self._outbox = outbox
        self._replication = replication

    @property
    def _logger(self) -> FilteringBoundLogger:
        return self._quorum.logger

    @property
    def _voters(self) -> frozenset[NodeId]:
        return self._quorum.voters

    # --- following ----------------------------------------------------------------------------

    def become_follower(self, epoch: Epoch, leader_id: NodeId, now_ms: int) -> None:
        role = self._quorum.role
        if isinstance(role, Leader):
            self._replication.drop_leader_state(role, "higher_epoch")
        self._quorum.transition_to_follower(epoch, leader_id, now_ms)
        self._logger.info("became_follower", leader_id=leader_id)
        self._replication.maybe_send_fetch(now_ms)

    def become_unattached(self, epoch: Epoch, now_ms: int) -> None:
        role = self._quorum.role
        if isinstance(role, Leader):
            self._replication.drop_leader_state(role, "higher_epoch")
        self._quorum.transition_to_unattached(epoch, now_ms)
        self._logger.info("became_unattached")
        if not self._quorum.campaigns:
            self._replication.schedule_probe(now_ms)

    def on_higher_epoch(self, epoch: Epoch, leader_id: NodeId | None, now_ms: int) -> None:
        """Any message from a higher epoch moves us there (Raft §5.1)."""
        assert epoch > self._quorum.epoch
        if leader_id is not None and self._quorum.may_follow(leader_id):
            self.become_follower(epoch, leader_id, now_ms)
        else:
            self.become_unattached(epoch, now_ms)

    def maybe_learn_leader(self, epoch: Epoch, leader_id: NodeId | None, now_ms: int) -> bool:
        """A peer told us who leads ``epoch``: follow if that is news. Returns True if we moved."""
        if epoch > self._quorum.epoch:
            self.on_higher_epoch(epoch, leader_id, now_ms)
            return True
        role = self._quorum.role
        if (
            epoch == self._quorum.epoch
            and leader_id is not None
            and self._quorum.may_follow(leader_id)
            and isinstance(role, Unattached | Prospective | Candidate)
            # NB: a prospective that gave up on its leader does not follow it again just
            # because peers still name it (Kafka: only when no leader is known); it returns to
            # it when its pre-vote round times out.
            and not (isinstance(role, Prospective) and role.leader_id is not None)
        ):
            self.become_follower(epoch, leader_id, now_ms)
            return True
        return False

    # --- campaigning --------------------------------------------------------------------------

    def become_prospective(self, now_ms: int, *, backoff_ms: int = 0, reason: str) -> None:
        role = self._quorum.role
        if isinstance(role, Leader):  # pragma: no cover - QuorumState refuses it too
            self._replication.drop_leader_state(role, reason)
        self._quorum.transition_to_prospective(now_ms, backoff_ms=backoff_ms)
        self._logger.info("became_prospective", reason=reason, backoff_ms=backoff_ms)
        if not self._maybe_win_pre_vote(now_ms) and backoff_ms == 0:
            self.send_vote_requests(now_ms)

    def _maybe_win_pre_vote(self, now_ms: int) -> bool:
        role = self._quorum.role
        if not isinstance(role, Prospective) or not self._quorum.can_campaign:
            return False
        if not has_majority(len(role.granted & self._voters), len(self._voters)):
            return False
        self._quorum.transition_to_candidate(now_ms)
        self._logger.info("became_candidate", log_end_offset=self._raft_log.log_end_offset)
        if not self._maybe_win_election(now_ms):
            self.send_vote_requests(now_ms)
        return True

    def _maybe_win_election(self, now_ms: int) -> bool:
        role = self._quorum.role
        if not isinstance(role, Candidate):
            return False
        if not has_majority(len(role.granted & self._voters), len(self._voters)):
            return False
        log = self._raft_log
        start = log.log_end_offset
        leader = self._quorum.transition_to_leader(start, now_ms)
        # KIP-595 / Raft thesis §6.4: open the epoch with an entry of its own.
        log.append(
            build_leader_change_batch(
                epoch=leader.epoch,
                leader_id=self._id,
                voters=self._voters,
                base_offset=start,
                now_ms=now_ms,
            )
        )
        self._logger.info("became_leader", epoch_start_offset=start)
        self.send_begin_quorum_epoch(leader, now_ms)
        return True

    def send_vote_requests(self, now_ms: int) -> None:
        role = self._quorum.role
        if isinstance(role, Prospective):
            if not self._quorum.can_campaign:
                # Only forged or absurd epochs get here (2^31 elections otherwise): refuse to
                # put an epoch on the wire that it cannot carry; a leader of this epoch may
                # still be followed.
                self._logger.error("epoch_exhausted", epoch_max=role.epoch)
                role.sent = True
                role.retry_at_ms = now_ms + self._config.request_timeout_ms
                return
            pre_vote = True
            epoch = Epoch(role.epoch + 1)  # KIP-996: the epoch it would campaign in
            role.sent = True
        elif isinstance(role, Candidate):
            pre_vote = False
            epoch = role.epoch
        else:
            return
        role.retry_at_ms = now_ms + self._config.request_timeout_ms
        log = self._raft_log
        for voter in sorted(self._voters - role.granted - role.rejected - {self._id}):
            self._outbox.send(
                VoteRequest(
                    source=self._id,
                    destination=voter,
                    epoch=epoch,
                    correlation_id=self._outbox.correlation_id(),
                    last_epoch=log.last_epoch,
                    last_epoch_end_offset=log.log_end_offset,
                    pre_vote=pre_vote,
                )
            )

    def send_begin_quorum_epoch(self, leader: Leader, now_ms: int) -> None:
        leader.begin_epoch_retry_at_ms = now_ms + self._config.request_timeout_ms
        for voter in sorted(leader.unacked_begin_epoch):
            self._outbox.send(
                BeginQuorumEpochRequest(
                    source=self._id,
                    destination=voter,
                    epoch=leader.epoch,
                    correlation_id=self._outbox.correlation_id(),
                    leader_id=self._id,
                )
            )

    def send_end_quorum_epoch(self, resigned: Resigned, now_ms: int) -> None:
        resigned.retry_at_ms = now_ms + self._config.request_timeout_ms
        for voter in sorted(resigned.unacked):
            self._outbox.send(
                EndQuorumEpochRequest(
                    source=self._id,
                    destination=voter,
                    epoch=resigned.epoch,
                    correlation_id=self._outbox.correlation_id(),
                    leader_id=self._id,
                    preferred_successors=resigned.preferred_successors,
                )
            )

    def resign(
        self, leader: Leader, successors: tuple[NodeId, ...], now_ms: int, reason: str
    ) -> None:
        self._replication.drop_leader_state(leader, reason)
        self._quorum.transition_to_resigned(successors, now_ms)
        self._logger.info("resigned", reason=reason, preferred_successors=list(successors))
        role = self._quorum.role
        assert isinstance(role, Resigned)
        self.send_end_quorum_epoch(role, now_ms)

    # --- Vote ---------------------------------------------------------------------------------

    def handle_vote_request(self, req: VoteRequest, now_ms: int) -> None:
        granted = False
        error = ErrorCode.NONE
        if not self._quorum.dynamic and (
            req.source not in self._voters or not self._quorum.is_voter
        ):
            error = ErrorCode.INCONSISTENT_VOTER_SET
        elif req.epoch < self._quorum.epoch:
            error = ErrorCode.FENCED_LEADER_EPOCH
        else:
            if not req.pre_vote and req.epoch > self._quorum.epoch:
                self.on_higher_epoch(req.epoch, None, now_ms)
            elif req.pre_vote and req.epoch - 1 > self._quorum.epoch:
                # NB: a pre-vote is sent for the prospective's epoch + 1, so its sender is
                # already in an epoch above ours (it won a pre-vote once, then lost the vote).
                # It can never fetch from a leader of a lower epoch nor win a pre-vote while
                # we follow one, so move up to its epoch: the quorum re-elects above it (etcd
                # does the same when a stale-term node answers a leader).
                self.on_higher_epoch(Epoch(req.epoch - 1), None, now_ms)
            granted = self._can_grant_vote(req, now_ms)
            if granted and not req.pre_vote:
                # Raft §5.2: the vote is persisted (Ready.hard_state) before this response goes.
                self._quorum.transition_to_unattached_voted(req.epoch, req.source, now_ms)
                self._logger.info("voted", candidate_id=req.source)
        self._outbox.send(
            VoteResponse(
                source=self._id,
                destination=req.source,
                epoch=self._quorum.epoch,
                correlation_id=req.correlation_id,
                error=error,
                leader_id=self._quorum.leader_id,
                vote_granted=granted,
                pre_vote=req.pre_vote,
            )
        )

    def _can_grant_vote(self, req: VoteRequest, now_ms: int) -> bool:
        log = self._raft_log
        # Raft §5.4.1: only for a candidate whose log is at least as up to date as ours.
        up_to_date = (req.last_epoch, req.last_epoch_end_offset) >= (
            log.last_epoch,
            log.log_end_offset,
        )
        if not up_to_date:
            return False
        role = self._quorum.role
        if req.pre_vote:
            if req.epoch <= self._quorum.epoch:
                return False
            match role:
                case Leader() | Resigned():
                    return False
                case Follower():
                    # KIP-996: refuse while the leader is alive as far as we know.
                    heard = role.last_fetched_ok_ms
                    recently = heard is not None and now_ms - heard < self._config.fetch_timeout_ms
                    return role.leader_resigned or role.leader_lost or not recently
                case _:
                    return True
        assert req.epoch == self._quorum.epoch
        return isinstance(role, Unattached) and role.voted_for in (None, req.source)

    def handle_vote_response(self, resp: VoteResponse, now_ms: int) -> None:
        if resp.epoch > self._quorum.epoch:
            self.on_higher_epoch(resp.epoch, resp.leader_id, now_ms)
            return
        if resp.source not in self._voters:
            return
        if self.maybe_learn_leader(resp.epoch, resp.leader_id, now_ms):
            return
        role = self._quorum.role
        if isinstance(role, Prospective) and resp.pre_vote:
            self._tally(role.granted, role.rejected, resp)
            self._maybe_win_pre_vote(now_ms)
        elif isinstance(role, Candidate) and not resp.pre_vote and resp.epoch == role.epoch:
            self._tally(role.granted, role.rejected, resp)
            if not self._maybe_win_election(now_ms) and self._vote_rejected(role):
                # Kafka's isVoteRejected: a majority can no longer be reached in this epoch
                # (a split vote, typically), so back off now instead of waiting out the whole
                # election timeout.
                self.become_prospective(
                    now_ms, backoff_ms=self._quorum.random_backoff_ms(), reason="vote_rejected"
                )

    def _vote_rejected(self, role: Candidate) -> bool:
        rejected = len(role.rejected & self._voters)
        return not has_majority(len(self._voters) - rejected, len(self._voters))

    @staticmethod
    def _tally(granted: set[NodeId], rejected: set[NodeId], resp: VoteResponse) -> None:
        if resp.vote_granted and resp.error == ErrorCode.NONE:
            granted.add(resp.source)
            rejected.discard(resp.source)
        elif resp.source not in granted:
            rejected.add(resp.source)

    # --- BeginQuorumEpoch ---------------------------------------------------------------------

    def handle_begin_quorum_epoch_request(self, req: BeginQuorumEpochRequest, now_ms: int) -> None:
        error = ErrorCode.NONE
        if not self._quorum.may_follow(req.leader_id):
            error = ErrorCode.INCONSISTENT_VOTER_SET
        elif req.epoch < self._quorum.epoch:
            error = ErrorCode.FENCED_LEADER_EPOCH
        elif not self.maybe_learn_leader(req.epoch, req.leader_id, now_ms):
            known = self._quorum.leader_id
            if known != req.leader_id:
                # Two leaders in one epoch: a broken invariant somewhere; refuse, never raise.
                self._logger.error("conflicting_leader", leader_id=known, claimed=req.leader_id)
                error = ErrorCode.INVALID_REQUEST
        self._outbox.send(
            BeginQuorumEpochResponse(
                source=self._id,
                destination=req.source,
                epoch=self._quorum.epoch,
                correlation_id=req.correlation_id,
                error=error,
                leader_id=self._quorum.leader_id,
            )
        )

    def handle_begin_quorum_epoch_response(
        self, resp: BeginQuorumEpochResponse, now_ms: int
    ) -> None:
        if resp.epoch > self._quorum.epoch:
            self.on_higher_epoch(resp.epoch, resp.leader_id, now_ms)
            return
        role = self._quorum.role
        if isinstance(role, Leader) and resp.epoch == role.epoch and resp.error == ErrorCode.NONE:
            role.unacked_begin_epoch.discard(resp.source)

    # --- EndQuorumEpoch -----------------------------------------------------------------------

    def handle_end_quorum_epoch_request(self, req: EndQuorumEpochRequest, now_ms: int) -> None:
        error = ErrorCode.NONE
        if req.epoch < self._quorum.epoch:
            error = ErrorCode.FENCED_LEADER_EPOCH
        elif self._quorum.campaigns:
            if req.epoch > self._quorum.epoch:
                self.on_higher_epoch(req.epoch, None, now_ms)
            backoff = self._end_epoch_backoff_ms(req.preferred_successors)
            role = self._quorum.role
            if isinstance(role, Follower) and role.leader_id == req.leader_id:
                role.leader_resigned = True
                role.fetch_deadline_ms = min(role.fetch_deadline_ms, now_ms + backoff)
            elif isinstance(role, Unattached):
                role.election_deadline_ms = min(role.election_deadline_ms, now_ms + backoff)
            self._logger.info("leader_resigned", leader_id=req.leader_id, backoff_ms=backoff)
        self._outbox.send(
            EndQuorumEpochResponse(
                source=self._id,
                destination=req.source,
                epoch=self._quorum.epoch,
                correlation_id=req.correlation_id,
                error=error,
                leader_id=self._quorum.leader_id,
            )
        )

    def leader_connection_lost(self, peer: NodeId, now_ms: int) -> None:
        """The shell saw ``peer``'s host close our connection to it: its process exited (a
        crash, a kill). If it is our leader, do not wait out the fetch timeout: campaign in
        our turn among the other voters (below), and grant pre-votes to the others, who see
        the same. Pre-vote keeps a false alarm (a leader that still answers the others)
        from costing an epoch, and a fetch that succeeds clears it."""
        role = self._quorum.role
        if not isinstance(role, Follower) or role.leader_id != peer or role.leader_lost:
            return  # an observer's deadline moves too: it asks a voter who leads sooner
        role.leader_lost = True
        # Every follower sees the close at once: they take turns, in voter id order, one
        # back-off bound apart (EndQuorumEpoch's successor order, KIP-595), so the first one's
        # vote request reaches the next before that one campaigns and splits the vote.
        others = sorted(v for v in self._voters if v != peer)
        turn = others.index(self._id) if self._id in others else len(others)
        backoff = (
            turn * self._config.election_backoff_max_ms + self._quorum.random_backoff_ms() // 4
        )
        role.fetch_deadline_ms = min(role.fetch_deadline_ms, now_ms + backoff)
        self._logger.info("leader_connection_lost", leader_id=peer, backoff_ms=backoff)

    def _end_epoch_backoff_ms(self, successors: tuple[NodeId, ...]) -> int:
        """KIP-595: the first preferred successor campaigns at once, later ones back off
        exponentially; voters not in the list wait a full election timeout."""
        if self._id not in successors:
            return self._quorum.random_election_timeout_ms()
        position = successors.index(self._id)
        if position == 0:
            return 0
        base = max(1, self._config.retry_backoff_ms)
        return min(self._config.election_backoff_max_ms, base << (position - 1))

    def handle_end_quorum_epoch_response(self, resp: EndQuorumEpochResponse, now_ms: int) -> None:
        if resp.epoch > self._quorum.epoch:
            self.on_higher_epoch(resp.epoch, resp.leader_id, now_ms)
            return
        role = self._quorum.role
        if isinstance(role, Resigned) and resp.epoch == role.epoch:
            role.unacked.discard(resp.source)


__all__ = ["Election"]
