"""`RaftChecker`: the safety invariants, checked after every simulated event.

- ``single_leader_per_epoch``: at most one node is ever leader of an epoch (Raft §5.2).
- ``monotonic_epoch``: a node's epoch never decreases (in memory within one incarnation, and
  its synced epoch across restarts); a restarted node is in at least the highest epoch it
  sent a message in (the epoch was synced before the send).
- ``one_vote_per_epoch``: a voter grants at most one candidate per epoch, across restarts.
- ``monotonic_high_watermark``: a node's high watermark never decreases (per incarnation;
  KRaft does not persist it).
- ``high_watermark_on_majority``: every batch below a leader's high watermark is durable,
  byte for byte, on a majority of voters (or covered by their snapshots).
- ``committed_identical``: every node applies the same batch at each committed offset, and
  reaches the same state digest at each offset (snapshots included).
- ``committed_never_lost``: a new leader of epoch E holds every batch that a leader of an
  epoch below E committed (Raft §5.4 Leader Completeness). NB: a stale leader of a lower
  epoch may legitimately lack batches committed in higher epochs.
- ``epoch_fits_wire``: no node sends an epoch outside int32 (``0..EPOCH_MAX``).
- ``voter_sets_overlap`` (KIP-853): on every log, each voter set and the one before it have
  no two disjoint majorities (one voter changes at a time), and so do a leader's latest set
  and its committed one (no second change while one is uncommitted), so an old-set majority
  and a new-set majority cannot elect two leaders or commit two histories. The majority checks
  above use the voter set the leader is using, as it changes.
- ``outsider_ignored``: no node ever enters an epoch at or above `FORGED_EPOCH_MIN`, which
  only the nemesis's outsider sends (forged messages from ids outside the voter set).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, final

from kraft.raft.admission import EPOCH_MAX
from kraft.raft.messages import RaftMessage, VoteRequest, VoteResponse
from kraft.raft.quorum import majority_size
from kraft.raft.voters import VoterHistory
from kraft.types import NodeId

if TYPE_CHECKING:
    from kraft.sim.cluster import SimNode


FORGED_EPOCH_MIN = 1 << 30
"""Epochs from here to `EPOCH_MAX` are the outsider's: no run elects that often."""


class InvariantViolated(AssertionError):
    """A safety or liveness property failed in the simulator."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


def majorities_can_be_disjoint(a: frozenset[NodeId], b: frozenset[NodeId]) -> bool:
    """Whether some majority of ``a`` and some majority of ``b`` share no node: each takes
    its own nodes first, and the shared ones must cover what is left of both."""
    shared = len(a & b)
    need_a = max(0, majority_size(len(a)) - len(a - b))
    need_b = max(0, majority_size(len(b)) - len(b - a))
    return need_a + need_b <= shared


@final
class RaftChecker:
    """Tracks what the cluster has done so far and fails on the first broken invariant."""

    def __init__(self, voters: frozenset[NodeId]) -> None:
        self.voters = voters
        self.leaders_by_epoch: dict[int, NodeId] = {}
        self._epoch: dict[NodeId, int] = {}
        self._durable_epoch: dict[NodeId, int] = {}
        self._high_watermark: dict[NodeId, int] = {}
        self._completeness_checked: set[int] = set()
        self.committed: dict[int, tuple[int, int]] = {}
        """base offset -> (next offset, crc32 of the batch): every batch any node applied."""
        self.commit_epochs: dict[int, tuple[int, int, int]] = {}
        """base offset -> (next offset, crc32, epoch of the leader that first committed it)."""
        self.digests: dict[int, int] = {}
        """offset -> state digest after applying everything below it."""
        self.checks = 0
        self._sent_epoch: dict[NodeId, int] = {}
        self._votes: dict[tuple[NodeId, int], NodeId] = {}
        self._voter_record_seen: dict[NodeId, int] = {}
        self.voter_changes_seen = 0
        """VotersRecords checked by ``voter_sets_overlap`` (a node's new latest record)."""

    def fail(self, invariant: str, detail: str) -> None:
        raise InvariantViolated(invariant, detail)

    def on_crash(self, n: SimNode) -> None:
        self._epoch.pop(n.node_id, None)
        self._high_watermark.pop(n.node_id, None)

    def on_wipe(self, n: SimNode) -> None:
        self.on_crash(n)
        self._durable_epoch.pop(n.node_id, None)
        self._sent_epoch.pop(n.node_id, None)

    def on_send(self, msg: RaftMessage) -> None:
        """Called for each message as the shell sends it (after persisting its Ready)."""
        src = msg.source
        if not 0 <= msg.epoch <= EPOCH_MAX:
            self.fail("epoch_fits_wire", f"node {src} sent epoch {msg.epoch}: {msg!r}"[:300])
        if isinstance(msg, VoteRequest) and msg.pre_vote:
            return  # carries the epoch it would campaign in, not its own
        if msg.epoch > self._sent_epoch.get(src, -1):
            self._sent_epoch[src] = msg.epoch
        if isinstance(msg, VoteResponse) and msg.vote_granted and not msg.pre_vote:
            holder = self._votes.setdefault((src, msg.epoch), msg.destination)
            if holder != msg.destination:
                self.fail(
                    "one_vote_per_epoch",
                    f"node {src} voted for {holder} and {msg.destination} in epoch {msg.epoch}",
                )

    def on_start(self, n: SimNode) -> None:
        node = n.node
        assert node is not None
        sent = self._sent_epoch.get(n.node_id, -1)
        if node.epoch < sent:
            self.fail(
                "monotonic_epoch",
                f"node {n.node_id} restarted in epoch {node.epoch} after sending in epoch {sent}",
            )

    def after_event(self, n: SimNode, nodes: dict[NodeId, SimNode]) -> None:
        node = n.node
        if node is None:
            return
        self.checks += 1
        nid = n.node_id
        epoch = node.epoch
        if epoch < self._epoch.get(nid, -1):
            self.fail("monotonic_epoch", f"node {nid} went from {self._epoch[nid]} to {epoch}")
        if epoch >= FORGED_EPOCH_MIN:
            self.fail("outsider_ignored", f"node {nid} took the forged epoch {epoch}")
        self._epoch[nid] = epoch
        durable_epoch = n.disk.hard_state.epoch
        if durable_epoch < self._durable_epoch.get(nid, -1):
            self.fail("monotonic_epoch", f"node {nid} synced epoch went back to {durable_epoch}")
        self._durable_epoch[nid] = durable_epoch
        history = node.raft_log.voter_history
        if history is not None and history.latest_offset != self._voter_record_seen.get(nid, -1):
            self._voter_record_seen[nid] = history.latest_offset
            if history.latest_offset >= 0:
                self._check_voter_change(nid, history.latest_offset, history)
                if node.is_leader:
                    self._check_against_committed(nid, node.high_watermark, history)
        is_leader = node.is_leader
        if is_leader:
            holder = self.leaders_by_epoch.setdefault(epoch, nid)
            if holder != nid:
                self.fail("single_leader_per_epoch", f"nodes {holder} and {nid} led epoch {epoch}")
            if epoch not in self._completeness_checked:
                self._completeness_checked.add(epoch)
                self._check_leader_completeness(n)
        hw = node.high_watermark
        prev = self._high_watermark.get(nid, -1)
        if hw < prev:
            self.fail("monotonic_high_watermark", f"node {nid} went from {prev} to {hw}")
        if is_leader and hw > prev:
            self._check_on_majority(n, max(prev, node.log_start_offset), hw, nodes)
        self._high_watermark[nid] = hw

    def _check_voter_change(self, nid: NodeId, offset: int, history: VoterHistory) -> None:
        self.voter_changes_seen += 1
        before = history.at(offset)
        old = frozenset(before) if before is not None else self.voters
        new = history.ids
        if majorities_can_be_disjoint(old, new):
            self.fail(
                "voter_sets_overlap",
                f"node {nid}: voter set {sorted(new)} at offset {offset} after {sorted(old)} "
                "admits two disjoint majorities",
            )

    def _check_against_committed(self, nid: NodeId, hwm: int, history: VoterHistory) -> None:
        # A leader's new set against its committed one: two uncommitted changes in a row
        # would each overlap the one before, yet not the committed set.
        committed = history.at(hwm)
        old = frozenset(committed) if committed is not None else self.voters
        if majorities_can_be_disjoint(old, history.ids):
            self.fail(
                "voter_sets_overlap",
                f"leader {nid}: voter set {sorted(history.ids)} and the committed "
                f"{sorted(old)} admit two disjoint majorities",
            )

    def _check_leader_completeness(self, n: SimNode) -> None:
        node = n.node
        assert node is not None
        log = node.raft_log
        start = log.log_start_offset
        for base, (next_offset, crc, commit_epoch) in self.commit_epochs.items():
            if next_offset <= start or commit_epoch >= node.epoch:
                continue
            found = log.read(base, 1, end_offset=base + 1)
            if not found or zlib.crc32(found[0]) != crc:
                self.fail(
                    "committed_never_lost",
                    f"leader {n.node_id} of epoch {node.epoch} lacks committed batch at {base}",
                )

    def _check_on_majority(
        self, n: SimNode, low: int, high: int, nodes: dict[NodeId, SimNode]
    ) -> None:
        node = n.node
        assert node is not None
        if low >= high:
            return
        voters = node.voters  # KIP-853: the set the leader counts, the latest in its log
        need = majority_size(len(voters))
        for batch in node.raft_log.read(low, 1 << 40, end_offset=high):
            base = int.from_bytes(batch[:8], "big", signed=True)
            if base not in self.commit_epochs:
                next_offset = base + int.from_bytes(batch[23:27], "big") + 1
                self.commit_epochs[base] = (next_offset, zlib.crc32(batch), node.epoch)
            holders = 0
            for v in voters:
                if v not in nodes:
                    continue
                img = nodes[v].disk.durable
                if img.log_start > base or img.batch_at(base) == batch:
                    holders += 1
            if holders < need:
                self.fail(
                    "high_watermark_on_majority",
                    f"leader {n.node_id} epoch {node.epoch} high watermark {high} covers batch "
                    f"at {base} durable on only {holders} of {len(voters)} voters",
                )

    def on_apply(self, nid: NodeId, base: int, next_offset: int, batch: bytes, digest: int) -> None:
        crc = zlib.crc32(batch)
        seen = self.committed.setdefault(base, (next_offset, crc))
        if seen != (next_offset, crc):
            self.fail("committed_identical", f"node {nid} applied a different batch at {base}")
        self.on_digest(nid, next_offset, digest)

    def on_digest(self, nid: NodeId, offset: int, digest: int) -> None:
        seen = self.digests.setdefault(offset, digest)
        if seen != digest:
            self.fail("committed_identical", f"node {nid} state differs at offset {offset}")


__all__ = ["FORGED_EPOCH_MIN", "InvariantViolated", "RaftChecker", "majorities_can_be_disjoint"]
