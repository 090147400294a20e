"""`RaftNode`: a KIP-595 Raft replica as a deterministic state machine (etcd's ``RawNode``).

Theory of operation
-------------------
The node does no I/O and reads no clock: the shell feeds it peer messages (`step`), the time
(`tick`) and proposals (`propose`), and drains its output with `ready` / `advance`. Each
`Ready` says what to persist (election `HardState`, log batches, snapshot chunks), what to
send once that is synced, and which committed batches to apply; see `Ready` for the exact
ordering. `next_deadline_ms` says when the node next needs a `tick`.

Randomness (election jitter, probe targets) comes only from the injected ``rng``, so a
simulator replays a run exactly from one seed.

Structure
---------
`RaftNode` is the public API and the dispatcher. It owns five collaborators, each holding
only its own state, and wires them together once, in ``__init__``:

- `QuorumState` (``quorum_state.py``): the role object and every transition, checked against
  its table; the logger, rebound with role and epoch on each one. The roles (``roles.py``)
  hold the per-role state: vote tallies, election timers, the leader's per-replica
  `ReplicaProgress`, parked fetches and pending proposals, a follower's fetch in flight.
- `Outbox` (``outbox.py``): messages waiting for the next `Ready`, and correlation ids.
- `Replication` (``replication.py``): Fetch and FetchSnapshot on both sides; owns the high
  watermark, the applied offset, a follower's snapshot transfer and an observer's probe.
- `Election` (``election.py``): Vote, BeginQuorumEpoch, EndQuorumEpoch and campaigning; it
  decides every role change (through `QuorumState`) and does what goes with it, so it calls
  `Replication` (start fetching, drop a leader's queue). `Replication` never calls back:
  when a fetch response may name a newer leader, `step` asks `Election` in between.
- `VoterChanges` (``voter_changes.py``): KIP-853's checks before a leader appends a
  VotersRecord (AddRaftVoter, RemoveRaftVoter).

This node keeps the `Ready` bookkeeping (the one in flight, log deletion after a
snapshot), the clock, admission (``admission.py``) and the per-role polls of `tick`, which
read best next to `next_deadline_ms`. Why not one class: election and replication together
are about a thousand lines, and they share no mutable state except through the role, so
collaborators with narrow calls between them read better than one long class or mixins
over a shared base (which this module was built from before).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, final

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.raft.admission import REQUEST_TYPES, request_error, response_admitted
from kraft.raft.config import RaftConfig, UnsafeOptions
from kraft.raft.election import Election
from kraft.raft.errors import NotLeaderError
from kraft.raft.log import RaftLog, RaftStorage
from kraft.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kraft.raft.outbox import Outbox
from kraft.raft.quorum_state import QuorumState
from kraft.raft.ready import HardState, Ready
from kraft.raft.replication import Replication
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
from kraft.raft.voter_changes import VoterChanges
from kraft.types import Epoch, NodeId, Offset
from storage.errors import (
    ErrorCode,
)


@final
class RaftNode:
    """One Raft replica: a voter if its id is in ``voters``, else an observer.

    Args:
        node_id: this replica's id.
        voters: the ids of the voters (observers know voters by id only).
        config: timeouts and limits.
        log: the shell's read-only view of the durable log and snapshots.
        persisted_state: the `HardState` last synced (``HardState()`` on first start).
        rng: the only source of randomness (election jitter).
        now_ms: the shell's clock now; deadlines are relative to it.
        logger: a structlog logger; rebound with node id, role and epoch.
        unsafe: deliberate bugs for checker tests; leave unset.
        dynamic_voters: KIP-853: the voter set lives in the log (VotersRecord control batches,
            changed by `add_voter` / `remove_voter`); ``voters`` is used only while the log
            and snapshot carry none. False: ``voters`` is fixed (``controller.quorum.voters``).
    """

    def __init__(
        self,
        node_id: NodeId,
        *,
        voters: frozenset[NodeId],
        config: RaftConfig,
        log: RaftStorage,
        persisted_state: HardState,
        rng: random.Random,
        now_ms: int,
        logger: FilteringBoundLogger | None = None,
        unsafe: UnsafeOptions | None = None,
        dynamic_voters: bool = False,
    ) -> None:
        self._id = node_id
        self._config = config
        self._raft_log = RaftLog(
            log,
            cache_bytes_max=config.log_cache_bytes_max,
            static_voters=frozenset(voters),
            dynamic_voters=dynamic_voters,
        )
        base = logger if logger is not None else structlog.get_logger("kraft.raft")
        self._quorum = QuorumState(
            local_id=node_id,
            voters=frozenset(voters),
            history=self._raft_log.voter_history,
            config=config,
            rng=rng,
            persisted=persisted_state,
            now_ms=now_ms,
            logger=base.bind(node_id=node_id),
        )
        # NB: drawn after QuorumState's election jitter; the order of draws is the seed's replay.
        self._outbox = Outbox(self._quorum, first_correlation_id=rng.getrandbits(48))
        self._replication = Replication(
            quorum=self._quorum,
            config=config,
            storage=log,
            raft_log=self._raft_log,
            outbox=self._outbox,
            rng=rng,
            unsafe=unsafe or UnsafeOptions(),
            now_ms=now_ms,
        )
        self._election = Election(
            quorum=self._quorum,
            config=config,
            raft_log=self._raft_log,
            outbox=self._outbox,
            replication=self._replication,
        )
        self._quorum.high_watermark_fn = lambda: self._replication.high_watermark
        self._unsafe = unsafe or UnsafeOptions()
        self._voter_changes = VoterChanges(
            quorum=self._quorum,
            config=config,
            raft_log=self._raft_log,
            replication=self._replication,
            unsafe=self._unsafe,
        )
        self._delete_log_before: Offset | None = None
        self._in_flight: Ready | None = None
        self._now_ms = now_ms
        self._logger.info(
            "started",
            log_end_offset=self._raft_log.log_end_offset,
            voted_for=persisted_state.voted_for,
        )

    # --- accessors ----------------------------------------------------------------------------

    @property
    def node_id(self) -> NodeId:
        return self._id

    @property
    def voters(self) -> frozenset[NodeId]:
        """The voter set in use (KIP-853: the latest in the log, committed or not)."""
        return self._quorum.voters

    @property
    def _voters(self) -> frozenset[NodeId]:
        return self._quorum.voters

    @property
    def dynamic_voters(self) -> bool:
        """Whether the voter set lives in the log (KIP-853)."""
        return self._quorum.dynamic

    @property
    def voter_endpoints(self) -> dict[NodeId, str]:
        """The voter set in use with the endpoints its VotersRecord gave ("" if unknown)."""
        return self._voter_changes.voter_endpoints()

    def voters_at(self, end_offset: int) -> dict[NodeId, str] | None:
        """The voter set of the log below ``end_offset``, for a snapshot ending there to carry
        (`kraft.raft.voters.frame_snapshot`); None while the voters are configuration."""
        history = self._raft_log.voter_history
        if history is None:
            return None
        return history.at(end_offset)

    @property
    def epoch(self) -> Epoch:
        return self._quorum.epoch

    @property
    def role(self) -> Role:
        """The current role object (read-only use: tests, simulator, DescribeQuorum)."""
        return self._quorum.role

    @property
    def role_name(self) -> str:
        return self._quorum.role.name

    @property
    def is_leader(self) -> bool:
        return isinstance(self._quorum.role, Leader)

    @property
    def leader_id(self) -> NodeId | None:
        return self._quorum.leader_id

    @property
    def voted_for(self) -> NodeId | None:
        return self._quorum.hard_state().voted_for

    @property
    def high_watermark(self) -> Offset:
        return Offset(self._replication.high_watermark)

    @property
    def log_start_offset(self) -> Offset:
        return self._raft_log.log_start_offset

    @property
    def log_end_offset(self) -> Offset:
        return self._raft_log.log_end_offset

    @property
    def durable_end_offset(self) -> Offset:
        return self._raft_log.durable_end_offset

    @property
    def last_epoch(self) -> Epoch:
        return self._raft_log.last_epoch

    @property
    def raft_log(self) -> RaftLog:
        """The core's log view (read-only use)."""
        return self._raft_log

    def snapshot_id_at(self, end_offset: int) -> SnapshotId:
        """The id of a snapshot covering offsets below ``end_offset`` (its epoch from the log)."""
        return SnapshotId(Offset(end_offset), self._raft_log.epoch_for_offset(end_offset - 1))

    # --- inputs -------------------------------------------------------------------------------

    def step(self, msg: RaftMessage, now_ms: int) -> None:
        """Take one message from a peer. Never raises for a peer's stale or bad message."""
        self._observe_time(now_ms)
        if msg.destination != self._id or msg.source == self._id:
            self._logger.warning("dropped_misaddressed", source=msg.source, dest=msg.destination)
            return
        if isinstance(msg, REQUEST_TYPES):
            error = request_error(
                msg,
                voters=self._voters,
                local_is_voter=self._quorum.is_voter,
                dynamic=self._quorum.dynamic,
            )
            if error is not None:
                # KIP-595: refused before any handler runs, so it changes no state.
                self._logger.warning(
                    "rejected_request",
                    kind=type(msg).__name__,
                    source=msg.source,
                    request_epoch=msg.epoch,
                    error=error.name,
                )
                self._outbox.send(self._error_response(msg, error))
                return
        elif not response_admitted(
            msg, voters=self._voters | {self._quorum.leader_id or msg.destination}
        ):
            self._logger.warning(
                "dropped_response",
                kind=type(msg).__name__,
                source=msg.source,
                response_epoch=msg.epoch,
            )
            return
        match msg:
            case FetchRequest():
                self._replication.handle_fetch_request(msg, now_ms)
            case FetchResponse() | FetchSnapshotResponse():
                # Match it to our one outstanding fetch first; if its epoch or leader hint is
                # news, Election moves us and replication ignores the rest of it.
                claimed = self._replication.claim_response(msg.correlation_id, msg.source)
                if claimed is False:
                    return
                if self._election.maybe_learn_leader(msg.epoch, msg.leader_id, now_ms):
                    return
                follower = claimed if isinstance(claimed, Follower) else None
                if isinstance(msg, FetchResponse):
                    self._replication.handle_fetch_response(msg, follower, now_ms)
                else:
                    self._replication.handle_fetch_snapshot_response(msg, follower, now_ms)
            case VoteRequest():
                self._election.handle_vote_request(msg, now_ms)
            case VoteResponse():
                self._election.handle_vote_response(msg, now_ms)
            case BeginQuorumEpochRequest():
                self._election.handle_begin_quorum_epoch_request(msg, now_ms)
            case BeginQuorumEpochResponse():
                self._election.handle_begin_quorum_epoch_response(msg, now_ms)
            case EndQuorumEpochRequest():
                self._election.handle_end_quorum_epoch_request(msg, now_ms)
            case EndQuorumEpochResponse():
                self._election.handle_end_quorum_epoch_response(msg, now_ms)
            case FetchSnapshotRequest():
                self._replication.handle_fetch_snapshot_request(msg, now_ms)
            case _:
                self._logger.warning("dropped_unknown_message", kind=type(msg).__name__)
        self._maybe_resign_removed_leader(now_ms)

    def tick(self, now_ms: int) -> None:
        """Let time pass: fire every deadline at or before ``now_ms``."""
        self._observe_time(now_ms)
        role = self._quorum.role
        match role:
            case Unattached():
                self._poll_unattached(role, now_ms)
            case Prospective():
                self._poll_prospective(role, now_ms)
            case Candidate():
                self._poll_candidate(role, now_ms)
            case Leader():
                self._poll_leader(role, now_ms)
            case Follower():
                self._poll_follower(role, now_ms)
            case Resigned():
                self._poll_resigned(role, now_ms)

    def propose(self, records: Sequence[bytes], now_ms: int) -> Offset:
        """Append records (one per proposal) to the leader's log, batched per linger.

        Returns:
            The offset of the first record. It is committed once the high watermark passes
            it, in this epoch; a leader change may drop it.

        Raises:
            NotLeaderError: this node is not the leader (carries the known leader and epoch).
        """
        self._observe_time(now_ms)
        role = self._quorum.role
        if type(role) is not Leader:
            raise NotLeaderError(leader_id=self._quorum.leader_id, epoch=self._quorum.epoch)
        return self._replication.accumulate(role, records, now_ms)

    def propose_batch(self, batch: bytes, now_ms: int) -> Offset:
        """Append one whole v2 record batch built by someone else (a quorum-mode partition's
        producer batch, which keeps its producer id, epoch and sequences), after any pending
        proposals. Its base offset and partition leader epoch are assigned here; the caller
        validated the batch (one batch, at least one record).

        Returns:
            Its base offset. Committed once the high watermark passes its last offset.

        Raises:
            NotLeaderError: this node is not the leader.
        """
        self._observe_time(now_ms)
        role = self._quorum.role
        if type(role) is not Leader:
            raise NotLeaderError(leader_id=self._quorum.leader_id, epoch=self._quorum.epoch)
        return self._replication.append_batch(role, batch, now_ms)

    def resign(self, now_ms: int) -> None:
        """Step down gracefully (KIP-595 EndQuorumEpoch), naming the most caught-up voters
        as preferred successors.

        Raises:
            NotLeaderError: this node is not the leader.
        """
        self._observe_time(now_ms)
        role = self._quorum.role
        if not isinstance(role, Leader):
            raise NotLeaderError(leader_id=self._quorum.leader_id, epoch=self._quorum.epoch)
        self._election.resign(role, self._successors(role), now_ms, "graceful")

    def _successors(self, role: Leader) -> tuple[NodeId, ...]:
        """The other voters, most caught up first (KIP-595 preferred successors)."""
        none = ReplicaProgress()
        return tuple(
            sorted(
                (v for v in self._voters if v != self._id),
                key=lambda v: (-role.replicas.get(v, none).end_offset, v),
            )
        )

    def peer_connection_lost(self, peer: NodeId, now_ms: int) -> None:
        """The shell saw ``peer``'s host close our connection to it (its process exited):
        a follower of ``peer`` campaigns without waiting out the fetch timeout
        (`Election.leader_connection_lost`). A network that drops packets closes nothing, so
        a partition is still found by the fetch timeout."""
        self._observe_time(now_ms)
        self._election.leader_connection_lost(peer, now_ms)

    # --- KIP-853: voter changes ---------------------------------------------------------------

    def add_voter(self, voter_id: NodeId, endpoint: str, now_ms: int) -> Offset:
        """KIP-853 AddRaftVoter, leader side: `VoterChanges.add`."""
        self._observe_time(now_ms)
        return self._voter_changes.add(voter_id, endpoint, now_ms)

    def remove_voter(self, voter_id: NodeId, now_ms: int) -> Offset:
        """KIP-853 RemoveRaftVoter, leader side: `VoterChanges.remove`."""
        self._observe_time(now_ms)
        return self._voter_changes.remove(voter_id, now_ms)

    def _maybe_resign_removed_leader(self, now_ms: int) -> None:
        """KIP-853: a leader no longer in the voter set steps down once that set commits."""
        role = self._quorum.role
        history = self._raft_log.voter_history
        if (
            type(role) is Leader
            and history is not None
            and not self._quorum.is_voter
            and self._replication.high_watermark > history.latest_offset
        ):
            self._election.resign(role, self._successors(role), now_ms, "removed_from_voters")

    def snapshot_taken(self, snapshot_id: SnapshotId) -> None:
        """The application saved a snapshot of everything below ``snapshot_id.end_offset``.

        The log before it is then deleted (``Ready.delete_log_before``), and fetchers
        behind it load the snapshot instead (KIP-630). Call after `advance` of the `Ready`
        that delivered the last committed batch in the snapshot.
        """
        end = snapshot_id.end_offset
        assert end <= self._replication.applied, "snapshot of offsets not yet applied"
        if end <= self._raft_log.log_start_offset:
            return
        assert snapshot_id == self.snapshot_id_at(end), f"wrong epoch in {snapshot_id}"
        self._raft_log.advance_log_start(snapshot_id)
        self._delete_log_before = end
        self._logger.info("snapshot_taken", snapshot_id=snapshot_id)

    # --- output -------------------------------------------------------------------------------

    def has_ready(self) -> bool:
        if self._in_flight is not None:
            return False
        replication = self._replication
        return bool(
            self._outbox
            or self._raft_log.has_unpersisted
            or replication.applied < replication.high_watermark
            or self._quorum.hard_state_changed
            or replication.has_snapshot_work
            or self._delete_log_before is not None
        )

    def ready(self) -> Ready:
        """Take the work for the shell; see `Ready` for the order to do it in."""
        assert self._in_flight is None, "advance() the previous Ready first"
        hard_state = self._quorum.take_hard_state_update()
        truncate_to, entries, entries_end = self._raft_log.take_unpersisted()
        committed = self._replication.take_committed()
        chunks, install = self._replication.take_snapshot_work()
        messages, early_messages = self._outbox.take()
        rd = Ready(
            hard_state=hard_state,
            truncate_to=truncate_to,
            entries=entries,
            entries_end_offset=entries_end,
            must_sync=bool(
                hard_state is not None
                or truncate_to is not None
                or entries
                or chunks
                or install is not None
            ),
            snapshot_chunks=chunks,
            install_snapshot=install,
            messages=messages,
            early_messages=early_messages,
            committed=committed,
            high_watermark=self.high_watermark,
            delete_log_before=self._delete_log_before,
        )
        self._delete_log_before = None
        self._in_flight = rd
        return rd

    def advance(self, ready: Ready) -> None:
        """The shell has done everything ``ready`` asked (persisted, sent, applied)."""
        assert ready is self._in_flight, "advance() takes the Ready last returned by ready()"
        self._in_flight = None
        self._replication.ready_done()
        if ready.entries or ready.truncate_to is not None:
            self._raft_log.mark_persisted(ready.entries_end_offset)
        role = self._quorum.role
        if isinstance(role, Leader):
            self._replication.maybe_advance_leader_high_watermark(role, self._now_ms)
            self._maybe_resign_removed_leader(self._now_ms)
        else:
            self._replication.maybe_send_fetch(self._now_ms)

    def next_deadline_ms(self) -> int:
        """When the node next needs a `tick` (absolute, in the shell's milliseconds)."""
        role = self._quorum.role
        match role:
            case Unattached():
                if self._quorum.campaigns:
                    return role.election_deadline_ms
                return self._replication.probe_at_ms
            case Prospective():
                nxt = role.send_at_ms if not role.sent else role.retry_at_ms
                return min(role.election_deadline_ms, nxt)
            case Candidate():
                return min(role.election_deadline_ms, role.retry_at_ms)
            case Leader():
                deadlines = [min((d for _, d in role.parked_fetches.values()), default=1 << 62)]
                if role.linger_deadline_ms is not None:
                    deadlines.append(role.linger_deadline_ms)
                if self._voters != {self._id}:
                    deadlines.append(role.check_quorum_deadline_ms)
                if role.unacked_begin_epoch:
                    deadlines.append(role.begin_epoch_retry_at_ms)
                return min(deadlines)
            case Follower():
                nxt = role.fetch_deadline_ms
                if role.fetch_correlation_id is not None:
                    nxt = min(nxt, role.fetch_sent_ms + self._config.request_timeout_ms)
                elif role.fetch_backoff_until_ms > self._now_ms:
                    nxt = min(nxt, role.fetch_backoff_until_ms)
                return nxt
            case Resigned():
                if role.unacked:
                    return min(role.election_deadline_ms, role.retry_at_ms)
                return role.election_deadline_ms
        raise AssertionError(f"unknown role {role!r}")  # pragma: no cover

    # --- internals ----------------------------------------------------------------------------

    @property
    def _logger(self) -> FilteringBoundLogger:
        return self._quorum.logger

    def _observe_time(self, now_ms: int) -> None:
        assert now_ms >= self._now_ms, f"time went backwards: {now_ms} < {self._now_ms}"
        self._now_ms = now_ms

    def _error_response(self, req: RaftMessage, error: ErrorCode) -> RaftMessage:
        """The answer to a request refused with ``error``: our epoch and leader hint only."""
        common: dict[str, Any] = {
            "source": self._id,
            "destination": req.source,
            "epoch": self._quorum.epoch,
            "correlation_id": req.correlation_id,
            "error": error,
            "leader_id": self._quorum.leader_id,
        }
        match req:
            case VoteRequest():
                return VoteResponse(**common, pre_vote=req.pre_vote)
            case BeginQuorumEpochRequest():
                return BeginQuorumEpochResponse(**common)
            case EndQuorumEpochRequest():
                return EndQuorumEpochResponse(**common)
            case FetchRequest():
                return FetchResponse(**common, high_watermark=self.high_watermark)
            case FetchSnapshotRequest():
                return FetchSnapshotResponse(**common, snapshot_id=req.snapshot_id)
        raise AssertionError(f"not a request: {req!r}")  # pragma: no cover

    def _poll_unattached(self, role: Unattached, now_ms: int) -> None:
        if self._quorum.campaigns:
            if now_ms >= role.election_deadline_ms:
                self._election.become_prospective(now_ms, reason="election_timeout")
        else:
            self._replication.poll_probe(now_ms)

    def _poll_prospective(self, role: Prospective, now_ms: int) -> None:
        if now_ms >= role.election_deadline_ms:
            if role.leader_id is not None:
                # KIP-996: the pre-vote failed while others still follow our old leader
                # (say, a one-way partition): go back to fetching from it.
                self._election.become_follower(role.epoch, role.leader_id, now_ms)
            else:
                self._election.become_prospective(now_ms, reason="pre_vote_timeout")
        elif now_ms >= role.send_at_ms and (not role.sent or now_ms >= role.retry_at_ms):
            self._election.send_vote_requests(now_ms)

    def _poll_candidate(self, role: Candidate, now_ms: int) -> None:
        if now_ms >= role.election_deadline_ms:
            # Kafka 4 / KIP-996: a candidate that did not win backs off, then pre-votes again.
            self._election.become_prospective(
                now_ms, backoff_ms=self._quorum.random_backoff_ms(), reason="election_lost"
            )
        elif now_ms >= role.retry_at_ms:
            self._election.send_vote_requests(now_ms)

    def _poll_leader(self, role: Leader, now_ms: int) -> None:
        if role.linger_deadline_ms is not None and now_ms >= role.linger_deadline_ms:
            self._replication.drain_accumulator(role, now_ms)
        if self._voters != {self._id} and now_ms >= role.check_quorum_deadline_ms:
            # KIP-595 check-quorum: no majority has fetched from us recently; step down.
            self._election.resign(role, (), now_ms, "check_quorum_expired")
            return
        if role.unacked_begin_epoch and now_ms >= role.begin_epoch_retry_at_ms:
            self._election.send_begin_quorum_epoch(role, now_ms)
        self._replication.complete_parked_fetches(role, now_ms, expired_only=True)

    def _poll_follower(self, role: Follower, now_ms: int) -> None:
        if now_ms >= role.fetch_deadline_ms:
            if self._quorum.campaigns:
                # NB: every follower of a dead leader times out at about the same moment (the
                # leader answered their parked fetches together); pre-voting at once, they
                # grant each other and split the vote. A random backoff lets one go first.
                self._election.become_prospective(
                    now_ms,
                    backoff_ms=0 if role.leader_lost else self._quorum.random_backoff_ms(),
                    reason="leader_connection_lost" if role.leader_lost else "fetch_timeout",
                )
            else:
                self._election.become_unattached(role.epoch, now_ms)
            return
        if (
            role.fetch_correlation_id is not None
            and now_ms >= role.fetch_sent_ms + self._config.request_timeout_ms
        ):
            role.fetch_correlation_id = None  # lost: ask again
        self._replication.maybe_send_fetch(now_ms)

    def _poll_resigned(self, role: Resigned, now_ms: int) -> None:
        if now_ms >= role.election_deadline_ms:
            if not self._quorum.campaigns:  # KIP-853: removed; it stays on as an observer
                self._election.become_unattached(role.epoch, now_ms)
                return
            self._election.become_prospective(now_ms, reason="election_timeout")
        elif role.unacked and now_ms >= role.retry_at_ms:
            self._election.send_end_quorum_epoch(role, now_ms)


__all__ = ["RaftNode"]
