"""KIP-853 voter changes on the leader (`RaftNode.add_voter` / `remove_voter`): the checks
Kafka makes before a VotersRecord is appended, and the append.

One change at a time: a new one waits until the last is committed, and a new leader first
commits an entry of its own epoch. A node joins only once caught up, so that the new majority
can go on committing at once.
"""

from __future__ import annotations

from typing import final

from kraft.raft.config import RaftConfig, UnsafeOptions
from kraft.raft.errors import NotLeaderError
from kraft.raft.log import RaftLog
from kraft.raft.quorum_state import QuorumState
from kraft.raft.replication import Replication
from kraft.raft.roles import Leader
from kraft.types import NodeId, Offset
from storage.errors import (
    DuplicateVoterError,
    InvalidRequestError,
    RequestTimedOutError,
    VoterNotFoundError,
)


@final
class VoterChanges:
    """Checks and appends voter changes for a leader (a `RaftNode` collaborator)."""

    def __init__(
        self,
        *,
        quorum: QuorumState,
        config: RaftConfig,
        raft_log: RaftLog,
        replication: Replication,
        unsafe: UnsafeOptions,
    ) -> None:
        self._quorum = quorum
        self._config = config
        self._raft_log = raft_log
        self._replication = replication
        self._unsafe = unsafe

    def voter_endpoints(self) -> dict[NodeId, str]:
        """The voter set in use with the endpoints its VotersRecord gave ("" if unknown)."""
        history = self._raft_log.voter_history
        if history is None:
            return {v: "" for v in self._quorum.voters}
        return history.latest

    def add(self, voter_id: NodeId, endpoint: str, now_ms: int) -> Offset:
        """Append a VotersRecord that adds ``voter_id`` (KIP-853 AddRaftVoter, leader side).

        The node must be fetching from this leader as an observer and be caught up (a fetch at
        or past the high watermark within the last ``fetch_timeout_ms``, Kafka's rule), so that
        the new majority can go on committing at once.

        Returns:
            The record's offset: the change is done when the high watermark passes it.

        Raises:
            NotLeaderError: not the leader.
            DuplicateVoterError: it is a voter already.
            RequestTimedOutError: retriable: another change is uncommitted, this leader has not
                committed in its epoch yet, or the node is not caught up.
            InvalidRequestError: the voter set is static configuration, or a bad id.
        """
        leader = self._leader()
        if voter_id < 0:
            raise InvalidRequestError(f"bad voter id {voter_id}")
        if voter_id in self._quorum.voters:
            raise DuplicateVoterError(f"node {voter_id} is a voter already")
        replica = leader.replicas.get(voter_id)
        hwm = self._replication.high_watermark
        if (
            replica is None
            or replica.caught_up_ms < 0
            or replica.caught_up_ms < now_ms - self._config.fetch_timeout_ms
        ):
            fetched = "never fetched" if replica is None else f"fetched to {replica.end_offset}"
            raise RequestTimedOutError(
                f"node {voter_id} is not caught up ({fetched}, high watermark {hwm}); "
                "start it as an observer and retry"
            )
        voters = self.voter_endpoints()
        voters[voter_id] = endpoint[:255]
        return self._append_voters(leader, voters, now_ms, added=voter_id)

    def remove(self, voter_id: NodeId, now_ms: int) -> Offset:
        """Append a VotersRecord without ``voter_id`` (KIP-853 RemoveRaftVoter, leader side).
        A leader that removes itself leads until the record commits, then resigns.

        Raises:
            NotLeaderError, RequestTimedOutError, InvalidRequestError: as `add`.
            VoterNotFoundError: it is not a voter.
        """
        leader = self._leader()
        if voter_id not in self._quorum.voters:
            raise VoterNotFoundError(f"node {voter_id} is not a voter")
        if self._quorum.voters == {voter_id}:
            raise InvalidRequestError(f"node {voter_id} is the last voter")
        voters = self.voter_endpoints()
        del voters[voter_id]
        return self._append_voters(leader, voters, now_ms, removed=voter_id)

    def _leader(self) -> Leader:
        history = self._raft_log.voter_history
        if history is None:
            raise InvalidRequestError(
                "the voter set is static (controller.quorum.voters); "
                "start the quorum with controller.quorum.bootstrap.servers to change it"
            )
        role = self._quorum.role
        if type(role) is not Leader:
            raise NotLeaderError(leader_id=self._quorum.leader_id, epoch=self._quorum.epoch)
        hwm = self._replication.high_watermark
        if hwm <= role.epoch_start_offset:
            # Ongaro's fix (raft-dev, 2015), kept by KIP-853: a new leader first commits an
            # entry of its own epoch, so no change from an older epoch is still pending.
            raise RequestTimedOutError("the leader has not committed in its epoch yet; retry")
        if history.latest_offset >= hwm and not self._unsafe.concurrent_voter_changes:
            raise RequestTimedOutError("another voter change is not committed yet; retry")
        return role

    def _append_voters(
        self,
        leader: Leader,
        voters: dict[NodeId, str],
        now_ms: int,
        *,
        added: NodeId | None = None,
        removed: NodeId | None = None,
    ) -> Offset:
        offset = self._replication.append_voters(leader, voters, now_ms)
        self._quorum.logger.info(
            "voter_change_appended",
            offset=offset,
            added=added,
            removed=removed,
            voters=sorted(voters),
        )
        return offset
