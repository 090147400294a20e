"""Pull replication (KIP-595), snapshots (KIP-630), the high watermark and the accumulator.

Theory of operation
-------------------
A follower sends one Fetch at a time, ``(fetch_offset, last_fetched_epoch)``, where
``fetch_offset`` is its *durable* log end: in KRaft the next fetch offset is the
acknowledgement, so a follower fetches again only after `RaftNode.advance` says the batches
it appended are synced. The leader checks the pair against its epoch cache:

- ``fetch_offset`` below the log start (or at it with another epoch) -> ``snapshot_id``: the
  follower loads that snapshot with FetchSnapshot, in chunks, then fetches from its end;
- the follower's last epoch ends earlier in the leader's log, or is not in it -> a
  ``diverging_epoch = (epoch, end_offset)``: the follower truncates to
  ``min(end_offset, its own end of that epoch)`` (KIP-101: never to its high watermark) and
  fetches again;
- otherwise the fetch is valid: the leader records ``fetch_offset`` as that replica's end,
  recomputes the high watermark, and answers with batches from ``fetch_offset`` on (or parks
  the fetch up to ``max_wait_ms`` when there is nothing new to say).

High watermark (KIP-595, Raft §5.4.2): the largest offset a majority of voters (the leader's
own durable end included) has fetched past, and only once that is past the start of the
leader's epoch. Followers take ``min(leader's high watermark, own log end)``. It never moves
backwards on a node.

Proposals accumulate in the leader for ``append_linger_ms`` (or up to
``append_batch_bytes_max``) and become one v2 record batch with the epoch as its partition
leader epoch: the batch, not the record, is the unit the core moves around.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import final

from structlog.typing import FilteringBoundLogger

from kraft.raft.config import RaftConfig, UnsafeOptions
from kraft.raft.leader_fetches import (
    OBSERVER_SESSION_TIMEOUT_MS,
    OBSERVERS_MAX,
    make_room_for_an_observer,
    note_caught_up,
    validate_fetch_position,
)
from kraft.raft.log import RaftLog, RaftStorage
from kraft.raft.messages import (
    DivergingEpoch,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    SnapshotId,
)
from kraft.raft.outbox import Outbox
from kraft.raft.quorum import has_majority, next_high_watermark
from kraft.raft.quorum_state import QuorumState
from kraft.raft.ready import SnapshotChunk
from kraft.raft.roles import Follower, Leader, ReplicaProgress
from kraft.raft.voters import build_voters_batch, split_snapshot
from kraft.types import Epoch, NodeId, Offset
from storage.errors import CorruptRecordError, ErrorCode
from storage.records import (
    build_batch,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
)


@final
class Replication:
    """Fetch and FetchSnapshot on both sides, the high watermark and the accumulator.

    It owns what the log has agreed on and handed out: the high watermark, the offset up to
    which committed batches went to the application, a follower's snapshot transfer and an
    observer's leader probe. The leader's per-replica progress, parked fetches and pending
    proposals live in the `Leader` role, a follower's fetch in the `Follower` role: they
    end with the role. It never changes the role itself (that is `Election`'s job).
    """

    __slots__ = (
        "_applied",
        "_config",
        "_high_watermark",
        "_id",
        "_install_in_flight",
        "_install_snapshot",
        "_outbox",
        "_probe_correlation_id",
        "_quorum",
        "_raft_log",
        "_rng",
        "_snapshot_chunks",
        "_snapshot_voters",
        "_storage",
        "_unsafe",
        "probe_at_ms",
    )

    def __init__(
        self,
        *,
        quorum: QuorumState,
        config: RaftConfig,
        storage: RaftStorage,
        raft_log: RaftLog,
        outbox: Outbox,
        rng: random.Random,
        unsafe: UnsafeOptions,
        now_ms: int,
    ) -> None:
        self._quorum = quorum
        self._id = quorum.local_id
        self._config = config
        self._storage = storage
        self._raft_log = raft_log
        self._outbox = outbox
        self._rng = rng
        self._unsafe = unsafe
        start = raft_log.log_start_offset
        snapshot = raft_log.snapshot_id
        if snapshot is not None and start < snapshot.end_offset <= raft_log.log_end_offset:
            start = snapshot.end_offset  # the log before it was not deleted yet
        # NB: the high watermark is not persisted (as in KRaft): after a restart the node
        # knows only that its snapshot is committed and learns the rest from the leader.
        # The application loads the latest snapshot and is given batches from its end on.
        # Invariant: log_start_offset <= applied <= high_watermark <= log_end_offset
        self._high_watermark: int = start
        self._applied: int = start
        # KIP-630, follower side: chunks to write and a fetched snapshot to install (for the
        # next Ready), and whether the Ready in flight installs one.
        self._snapshot_chunks: list[SnapshotChunk] = []
        self._install_snapshot: SnapshotId | None = None
        self._install_in_flight = False
        # KIP-853: the voters frame of the snapshot being fetched, read from its first chunk
        # ("unknown": that chunk was too short to hold it; read from storage once installed).
        self._snapshot_voters: dict[NodeId, str] | str | None = None
        # An unattached observer asks a random voter who leads, once per request timeout.
        self._probe_correlation_id: int | None = None
        self.probe_at_ms = now_ms

    # --- state --------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def applied(self) -> int:
        """Committed batches below this offset went to the application (or a snapshot)."""
        return self._applied

    @property
    def has_snapshot_work(self) -> bool:
        return bool(self._snapshot_chunks) or self._install_snapshot is not None

    @property
    def _logger(self) -> FilteringBoundLogger:
        return self._quorum.logger

    def take_snapshot_work(self) -> tuple[tuple[SnapshotChunk, ...], SnapshotId | None]:
        """Chunks to write and the snapshot to install, for the next `Ready`."""
        chunks = tuple(self._snapshot_chunks)
        install = self._install_snapshot
        self._snapshot_chunks = []
        self._install_snapshot = None
        self._install_in_flight = install is not None
        return chunks, install

    @property
    def _voters(self) -> frozenset[NodeId]:
        return self._quorum.voters

    def ready_done(self) -> None:
        """The shell finished the `Ready` in flight (any snapshot install in it is done)."""
        if self._install_in_flight and self._snapshot_voters == "unknown":
            self._raft_log.load_snapshot_voters()
            self._snapshot_voters = None
        self._install_in_flight = False

    def take_committed(self) -> tuple[bytes, ...]:
        """Committed batches not yet given to the application, up to ``apply_bytes_max``."""
        if self._applied >= self._high_watermark:
            return ()
        batches = self._raft_log.read(
            self._applied, self._config.apply_bytes_max, end_offset=self._high_watermark
        )
        out: list[bytes] = []
        for batch in batches:
            header = read_header(batch)
            if header.next_offset <= self._applied:
                continue
            assert header.base_offset == self._applied, "committed batches are not contiguous"
            assert header.next_offset <= self._high_watermark, "batch straddles the watermark"
            out.append(batch)
            self._applied = header.next_offset
        return tuple(out)

    def _set_high_watermark(self, offset: int) -> None:
        # Invariant: the high watermark never goes backwards on a node (KIP-595).
        assert offset >= self._high_watermark, (
            f"high watermark would go back from {self._high_watermark} to {offset}"
        )
        assert offset <= self._raft_log.log_end_offset, "high watermark past the log end"
        self._high_watermark = offset

    # --- leader: serving fetches --------------------------------------------------------------

    def _leader_request_error(self, epoch: Epoch) -> ErrorCode | None:
        """Kafka's validateLeaderOnlyRequest."""
        if epoch < self._quorum.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if epoch > self._quorum.epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if not isinstance(self._quorum.role, Leader):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None

    def _fetch_error(self, req: FetchRequest, error: ErrorCode) -> None:
        self._outbox.send(
            FetchResponse(
                source=self._id,
                destination=req.source,
                epoch=self._quorum.epoch,
                correlation_id=req.correlation_id,
                error=error,
                leader_id=self._quorum.leader_id,
                high_watermark=Offset(self._high_watermark),
            )
        )

    def handle_fetch_request(self, req: FetchRequest, now_ms: int) -> None:
        error = self._leader_request_error(req.epoch)
        if error is not None:
            self._fetch_error(req, error)
            return
        leader = self._quorum.leader_or_raise()
        replica = self._record_fetch(leader, req.source, now_ms)
        superseded = leader.parked_fetches.pop(req.source, None)
        if superseded is not None:
            # A newer fetch supersedes a parked one; answer the old one now rather than drop
            # it: a second sender claiming the same id (a forged stream, or a restarted peer)
            # must not leave the first one waiting for an answer that never comes.
            self._outbox.send(self._fetch_response(superseded[0], None))
        position = validate_fetch_position(self._raft_log, req.fetch_offset, req.last_fetched_epoch)
        if position is not None:
            self._outbox.send(self._fetch_response(req, position))
            return
        replica.end_offset = req.fetch_offset
        note_caught_up(replica, req.fetch_offset, self._raft_log.log_end_offset, now_ms)
        if req.source in self._voters:
            self.maybe_advance_leader_high_watermark(leader, now_ms)
        if req.fetch_offset >= self._raft_log.log_end_offset and req.max_wait_ms > 0:
            # Bounded by our request timeout: a peer cannot hold a fetch (or an RPC) open longer.
            wait_ms = min(req.max_wait_ms, self._config.request_timeout_ms)
            if req.high_watermark < self._high_watermark:  # it only has the high watermark to learn
                wait_ms = min(wait_ms, self._config.high_watermark_linger_ms)
            if wait_ms > 0:
                leader.parked_fetches[req.source] = (req, now_ms + wait_ms)
                return
        self._outbox.send(self._fetch_response(req, None))

    def _record_fetch(self, leader: Leader, replica_id: NodeId, now_ms: int) -> ReplicaProgress:
        replica = leader.replicas.get(replica_id)
        if replica is None:  # an observer's first fetch
            make_room_for_an_observer(leader, self._voters, now_ms)
            replica = leader.replicas[replica_id] = ReplicaProgress()
        replica.last_fetch_ms = now_ms
        if replica_id in self._voters:
            leader.unacked_begin_epoch.discard(replica_id)  # it knows who leads
            leader.fetched_since_check.add(replica_id)
            # KIP-595 check-quorum: the deadline moves once a majority has fetched.
            me = 1 if self._quorum.is_voter else 0  # KIP-853: a leader being removed
            if has_majority(len(leader.fetched_since_check) + me, len(self._voters)):
                leader.check_quorum_deadline_ms = now_ms + self._config.check_quorum_timeout_ms
                leader.fetched_since_check.clear()
        return replica

    def _fetch_response(
        self, req: FetchRequest, position: DivergingEpoch | SnapshotId | None
    ) -> FetchResponse:
        batches: tuple[bytes, ...] = ()
        if position is None:
            batches = tuple(
                self._raft_log.read(
                    req.fetch_offset, min(req.max_bytes, self._config.fetch_max_bytes)
                )
            )
        return FetchResponse(
            source=self._id,
            destination=req.source,
            epoch=self._quorum.epoch,
            correlation_id=req.correlation_id,
            leader_id=self._id,
            high_watermark=Offset(self._high_watermark),
            log_start_offset=self._raft_log.log_start_offset,
            batches=batches,
            diverging_epoch=position if isinstance(position, DivergingEpoch) else None,
            snapshot_id=position if isinstance(position, SnapshotId) else None,
        )

    def complete_parked_fetches(self, leader: Leader, now_ms: int, *, expired_only: bool) -> None:
        if not leader.parked_fetches:
            return
        for replica_id, (req, deadline) in list(leader.parked_fetches.items()):
            if expired_only and now_ms < deadline:
                continue
            del leader.parked_fetches[replica_id]
            self._outbox.send(self._fetch_response(req, None))

    def maybe_advance_leader_high_watermark(self, leader: Leader, now_ms: int) -> bool:
        log = self._raft_log
        if self._unsafe.commit_without_majority:
            new: int | None = log.durable_end_offset
            if new is not None and new <= self._high_watermark:
                new = None
        else:
            # KIP-853: a leader removed by an uncommitted VotersRecord leads on, but its own
            # log counts for the majority only while it is a voter.
            ends: list[int] = [log.durable_end_offset] if self._quorum.is_voter else []
            ends += [
                r.end_offset
                for v, r in leader.replicas.items()
                if v in self._voters and r.end_offset >= 0 and v != self._id
            ]
            new = next_high_watermark(
                current=self._high_watermark,
                end_offsets=ends,
                voter_count=len(self._voters),
                epoch_start_offset=leader.epoch_start_offset,
            )
        if new is None:
            return False
        self._set_high_watermark(new)
        if leader.pending_records and new >= log.log_end_offset:
            # Adaptive linger: the in-flight entries committed; send what queued behind them.
            self.drain_accumulator(leader, now_ms)
        self._tell_parked_fetches_the_high_watermark(leader, now_ms)
        return True

    def _tell_parked_fetches_the_high_watermark(self, leader: Leader, now_ms: int) -> None:
        """Parked fetchers must learn the new high watermark: within its linger, or with the next
        entry if one comes sooner (it completes every parked fetch)."""
        linger = self._config.high_watermark_linger_ms
        if linger == 0:
            self.complete_parked_fetches(leader, now_ms, expired_only=False)
            return
        by = now_ms + linger
        for replica_id, (req, deadline) in leader.parked_fetches.items():
            if deadline > by:
                leader.parked_fetches[replica_id] = (req, by)

    # --- leader: FetchSnapshot ----------------------------------------------------------------

    def handle_fetch_snapshot_request(self, req: FetchSnapshotRequest, now_ms: int) -> None:
        error = self._leader_request_error(req.epoch)
        data = b""
        size = 0
        if error is None:
            self._record_fetch(self._quorum.leader_or_raise(), req.source, now_ms)
            found = self._storage.snapshot_size_bytes(req.snapshot_id)
            if found is None:
                error = ErrorCode.SNAPSHOT_NOT_FOUND
            elif not 0 <= req.position <= found:
                error = ErrorCode.POSITION_OUT_OF_RANGE
            else:
                size = found
                limit = max(1, min(req.max_bytes, self._config.fetch_snapshot_max_bytes))
                data = self._storage.read_snapshot(req.snapshot_id, req.position, limit)
        self._outbox.send(
            FetchSnapshotResponse(
                source=self._id,
                destination=req.source,
                epoch=self._quorum.epoch,
                correlation_id=req.correlation_id,
                error=error or ErrorCode.NONE,
                leader_id=self._quorum.leader_id,
                snapshot_id=req.snapshot_id,
                position=req.position,
                size_bytes=size,
                data=data,
            )
        )

    # --- follower: fetching -------------------------------------------------------------------

    def _fetch_blocked(self) -> bool:
        """A follower's fetch offset is its ack, so the entries below it must be durable when
        the fetch leaves. A fetch goes to the outbox, which the shell sends only after it has
        synced the Ready carrying it, and every entry appended so far is in that Ready or an
        earlier one: the fetch may name the log end at once, and ride the same fsync as the
        entries it acknowledges (one Ready, not two, per round trip). A truncation or a
        snapshot install still in progress blocks it."""
        return (
            self._raft_log.has_pending_truncation
            or self._install_in_flight
            or self._install_snapshot is not None
            or bool(self._snapshot_chunks)
        )

    def maybe_send_fetch(self, now_ms: int) -> bool:
        role = self._quorum.role
        if not isinstance(role, Follower):
            return False
        if role.fetch_correlation_id is not None or now_ms < role.fetch_backoff_until_ms:
            return False
        if self._fetch_blocked():
            return False
        correlation_id = self._outbox.correlation_id()
        role.fetch_correlation_id = correlation_id
        role.fetch_sent_ms = now_ms
        log = self._raft_log
        if role.snapshot_fetch is not None:
            self._outbox.send(
                FetchSnapshotRequest(
                    source=self._id,
                    destination=role.leader_id,
                    epoch=role.epoch,
                    correlation_id=correlation_id,
                    snapshot_id=role.snapshot_fetch,
                    position=role.snapshot_position,
                    max_bytes=self._config.fetch_snapshot_max_bytes,
                )
            )
        else:
            self._outbox.send(
                FetchRequest(
                    source=self._id,
                    destination=role.leader_id,
                    epoch=role.epoch,
                    correlation_id=correlation_id,
                    fetch_offset=log.log_end_offset,
                    last_fetched_epoch=log.last_epoch,
                    high_watermark=Offset(self._high_watermark),
                    max_bytes=self._config.fetch_max_bytes,
                    max_wait_ms=self._config.fetch_max_wait_ms,
                )
            )
        return True

    def _send_probe(self, now_ms: int) -> None:
        """An unattached observer asks a random voter who leads (it answers with a hint)."""
        voter = self._rng.choice(sorted(self._voters))
        correlation_id = self._outbox.correlation_id()
        self._probe_correlation_id = correlation_id
        self.probe_at_ms = now_ms + self._config.request_timeout_ms
        log = self._raft_log
        self._outbox.send(
            FetchRequest(
                source=self._id,
                destination=voter,
                epoch=self._quorum.epoch,
                correlation_id=correlation_id,
                fetch_offset=log.durable_end_offset,
                last_fetched_epoch=log.last_epoch,
                high_watermark=Offset(self._high_watermark),
                max_bytes=0,
                max_wait_ms=0,
            )
        )

    def claim_response(self, correlation_id: int, source: NodeId) -> Follower | bool | None:
        """Match a response to our one outstanding fetch (the `Follower` that sent it) or
        probe (None); False: it answers nothing we asked, drop it."""
        role = self._quorum.role
        if (
            isinstance(role, Follower)
            and correlation_id == role.fetch_correlation_id
            and source == role.leader_id
        ):
            role.fetch_correlation_id = None
            return role
        if correlation_id == self._probe_correlation_id:
            self._probe_correlation_id = None
            return None
        return False

    def handle_fetch_response(
        self, resp: FetchResponse, follower: Follower | None, now_ms: int
    ) -> None:
        """A response `claim_response` matched to ``follower``'s fetch (None: to a probe),
        whose epoch and leader hint moved us nowhere."""
        if follower is None or resp.epoch < follower.epoch:
            self.maybe_send_fetch(now_ms)
            return
        if resp.error != ErrorCode.NONE:
            follower.fetch_backoff_until_ms = now_ms + self._config.retry_backoff_ms
            return
        follower.last_fetched_ok_ms = now_ms
        follower.fetch_deadline_ms = now_ms + self._config.fetch_timeout_ms
        follower.leader_lost = False
        if resp.diverging_epoch is not None:
            self._truncate_to_diverging_epoch(resp.diverging_epoch)
        elif resp.snapshot_id is not None:
            follower.snapshot_fetch = resp.snapshot_id
            follower.snapshot_position = 0
            self._logger.info("snapshot_fetch_started", snapshot_id=resp.snapshot_id)
        else:
            self._append_as_follower(resp)
        self.maybe_send_fetch(now_ms)

    def _truncate_to_diverging_epoch(self, diverging: DivergingEpoch) -> None:
        log = self._raft_log
        local = log.end_offset_for_epoch(diverging.epoch)
        # KIP-101/595: truncate to the leader's epoch end offset, not to our high watermark.
        offset = diverging.end_offset if local is None else min(diverging.end_offset, local[1])
        offset = max(offset, log.log_start_offset)
        if offset >= log.log_end_offset:
            return
        # Invariant: committed entries are never truncated (Raft §5.4 Leader Completeness).
        assert offset >= self._high_watermark, (
            f"truncating to {offset} below the high watermark {self._high_watermark}"
        )
        new_end = log.truncate_to(offset)
        self._logger.info("truncated", log_end_offset=new_end, diverging_epoch=diverging.epoch)

    def _append_as_follower(self, resp: FetchResponse) -> None:
        log = self._raft_log
        for batch in resp.batches:
            try:
                header = read_header(batch)
            except CorruptRecordError:
                self._logger.warning("dropped_corrupt_batch")
                return
            if header.next_offset <= log.log_end_offset:
                continue
            if header.base_offset != log.log_end_offset or header.record_count <= 0:
                self._logger.warning("dropped_batch_out_of_order", base_offset=header.base_offset)
                return
            if not log.last_epoch <= header.partition_leader_epoch <= resp.epoch:
                epoch = header.partition_leader_epoch
                self._logger.warning("dropped_batch_bad_epoch", batch_epoch=epoch)
                return
            log.append(batch, header)
        high_watermark = min(resp.high_watermark, log.log_end_offset)
        if high_watermark > self._high_watermark:
            self._set_high_watermark(high_watermark)

    def handle_fetch_snapshot_response(
        self, resp: FetchSnapshotResponse, follower: Follower | None, now_ms: int
    ) -> None:
        """As `handle_fetch_response`, for a snapshot chunk."""
        if follower is None or resp.epoch < follower.epoch:
            self.maybe_send_fetch(now_ms)
            return
        snapshot = follower.snapshot_fetch
        if resp.error != ErrorCode.NONE or snapshot is None:
            # SNAPSHOT_NOT_FOUND / POSITION_OUT_OF_RANGE: a newer snapshot replaced it; refetch.
            follower.snapshot_fetch = None
            follower.fetch_backoff_until_ms = now_ms + self._config.retry_backoff_ms
            return
        if resp.snapshot_id != snapshot or resp.position != follower.snapshot_position:
            self.maybe_send_fetch(now_ms)
            return
        if not resp.data and resp.position < resp.size_bytes:
            follower.fetch_backoff_until_ms = now_ms + self._config.retry_backoff_ms
            return
        follower.last_fetched_ok_ms = now_ms
        follower.fetch_deadline_ms = now_ms + self._config.fetch_timeout_ms
        follower.leader_lost = False
        if resp.position == 0 and self._raft_log.voter_history is not None:
            try:
                self._snapshot_voters = split_snapshot(resp.data)[0]
            except CorruptRecordError:
                self._snapshot_voters = "unknown"
        self._snapshot_chunks.append(SnapshotChunk(snapshot, resp.position, resp.data))
        follower.snapshot_position += len(resp.data)
        if follower.snapshot_position >= resp.size_bytes:
            follower.snapshot_fetch = None
            self._install_fetched_snapshot(snapshot)
        self.maybe_send_fetch(now_ms)

    def _install_fetched_snapshot(self, snapshot: SnapshotId) -> None:
        """KIP-630: the snapshot replaces the whole log; everything in it is committed."""
        voters = self._snapshot_voters
        self._raft_log.install_snapshot(snapshot, voters if isinstance(voters, dict) else None)
        if voters != "unknown":
            self._snapshot_voters = None
        self._install_snapshot = snapshot
        self._high_watermark = max(self._high_watermark, snapshot.end_offset)
        self._applied = max(self._applied, snapshot.end_offset)
        self._logger.info("snapshot_installed", snapshot_id=snapshot)

    def schedule_probe(self, now_ms: int) -> None:
        """An observer that lost its leader asks a voter at once."""
        self.probe_at_ms = now_ms

    def poll_probe(self, now_ms: int) -> None:
        if not self._quorum.campaigns and now_ms >= self.probe_at_ms:
            self._send_probe(now_ms)

    # --- leader: the accumulator --------------------------------------------------------------

    def accumulate(self, leader: Leader, records: Sequence[bytes], now_ms: int) -> Offset:
        """Queue proposals behind the log end; returns the offset of the first record."""
        pending = leader.pending_records
        log_end = self._raft_log.log_end_offset
        offset = log_end + len(pending)
        if not records:
            return Offset(offset)
        pending.extend(records)
        leader.pending_bytes += len(records[0]) if len(records) == 1 else sum(map(len, records))
        # Adaptive linger (Nagle's rule): with nothing awaiting replication there is nothing to
        # batch behind, so append at once; otherwise linger, and the accumulator is drained
        # when the in-flight entries commit or the linger expires, whichever comes first.
        config = self._config
        if (
            leader.pending_bytes >= config.append_batch_bytes_max
            or self._high_watermark >= log_end
            or config.append_linger_ms == 0
        ):
            self.drain_accumulator(leader, now_ms)
        elif leader.linger_deadline_ms is None:
            leader.linger_deadline_ms = now_ms + config.append_linger_ms
        return Offset(offset)

    def drain_accumulator(self, leader: Leader, now_ms: int) -> None:
        if not leader.pending_records:
            leader.linger_deadline_ms = None
            return
        log = self._raft_log
        batch = build_batch(
            leader.pending_records,
            timestamp_ms=now_ms,
            base_offset=log.log_end_offset,
            partition_leader_epoch=leader.epoch,
        )
        leader.pending_records = []
        leader.pending_bytes = 0
        leader.linger_deadline_ms = None
        log.append(batch)
        self.complete_parked_fetches(leader, now_ms, expired_only=False)

    def append_batch(self, leader: Leader, batch: bytes, now_ms: int) -> Offset:
        """Append a batch built elsewhere (a producer's, with its producer id, epoch and
        sequences) at the log end, after whatever the accumulator holds: its base offset and
        partition leader epoch are rewritten in place (outside the batch CRC, as Kafka's
        leader does). Returns its base offset."""
        self.drain_accumulator(leader, now_ms)
        log = self._raft_log
        buf = bytearray(batch)
        base = log.log_end_offset
        set_base_offset(buf, base)
        set_partition_leader_epoch(buf, leader.epoch)
        log.append(bytes(buf))
        self.complete_parked_fetches(leader, now_ms, expired_only=False)
        return Offset(base)

    def append_voters(self, leader: Leader, voters: Mapping[NodeId, str], now_ms: int) -> Offset:
        """KIP-853: append a VotersRecord after whatever the accumulator holds; the log takes
        the new set at once (committed or not). Returns its offset."""
        self.drain_accumulator(leader, now_ms)
        log = self._raft_log
        base = log.log_end_offset
        log.append(
            build_voters_batch(epoch=leader.epoch, voters=voters, base_offset=base, now_ms=now_ms)
        )
        self.complete_parked_fetches(leader, now_ms, expired_only=False)
        # NB: check-quorum starts afresh for the new set: a leader of one voter never moved
        # its deadline (no voter fetched), and would resign the moment a second one joined.
        leader.fetched_since_check.clear()
        leader.check_quorum_deadline_ms = now_ms + self._config.check_quorum_timeout_ms
        # The majority may have changed: a smaller one can commit what is there already.
        self.maybe_advance_leader_high_watermark(leader, now_ms)
        return Offset(base)

    def drop_leader_state(self, leader: Leader, reason: str) -> None:
        if leader.pending_records:
            self._logger.info("dropped_proposals", count=len(leader.pending_records), reason=reason)
        leader.pending_records = []
        leader.pending_bytes = 0
        leader.parked_fetches.clear()


__all__ = ["OBSERVERS_MAX", "OBSERVER_SESSION_TIMEOUT_MS", "Replication"]
