"""`RaftHost`: one `RaftNode` run under the Ready contract inside a larger simulation.

`SimCluster` (``cluster.py``) owns its scheduler, network and nodes; the broker simulation
(``replication/sim/``) needs Raft nodes that share a scheduler and an `EnvelopeNetwork` with
brokers and clients: the controller quorum's voters and the brokers' metadata observers. A
`RaftHost` is that shell, the same loop as `SimCluster`'s (persist -> after a random disk
latency, sync -> send -> apply -> advance; tick at ``next_deadline_ms``; crash, restart, pause,
resume), around a pluggable `HostedStateMachine`, with every `RaftChecker` hook called where
`SimCluster` calls it, so the Raft invariants hold on the controllers and observers too.

Snapshots (KIP-630): every ``snapshot_every_records`` applied offsets the host saves
``(applied, digest)`` + the state machine's own snapshot bytes; a restart or an installed
snapshot hands those bytes back to ``restore``. The digest is `RaftChecker`'s running CRC over
every applied batch, so ``committed_identical`` covers state loaded from snapshots as well.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, final

from structlog.typing import FilteringBoundLogger

from kraft.raft import RaftConfig, RaftNode, Ready
from kraft.raft.messages import RaftMessage
from kraft.sim.checker import RaftChecker
from kraft.sim.cluster import (
    NEVER,
    AppState,
    SimNode,
    decode_app_snapshot,
    encode_app_snapshot,
)
from kraft.sim.scheduler import Scheduler, SimClock
from kraft.types import NodeId, Offset
from storage.records import BatchHeader


class HostedStateMachine(Protocol):
    """What a `RaftHost` drives: the replicated state machine of one node."""

    def restore(self, data: bytes | None) -> None:
        """Load a snapshot written by `snapshot` (``None``: start empty)."""

    def apply_batch(self, batch: bytes, header: BatchHeader) -> None:
        """Apply one committed batch (control batches too; most ignore them)."""

    def applied(self) -> None:
        """Every committed batch of one `Ready` has been applied (before `advance`)."""

    def snapshot(self) -> bytes:
        """The state after the last applied batch."""

    def after_activity(self) -> None:
        """The node took an input or finished a Ready (watch for a leader change here)."""


@dataclass(slots=True, kw_only=True)
class RaftEnv:
    """What every `RaftHost` of one simulation shares."""

    scheduler: Scheduler
    clock: SimClock
    rng: random.Random
    checker: RaftChecker
    nodes: dict[NodeId, SimNode]
    """Every hosted node (voters and observers), for the checker."""
    send: Callable[[RaftMessage], None]
    config: RaftConfig
    voters: frozenset[NodeId]
    logger: FilteringBoundLogger
    sync_latency_max_ms: int = 2
    snapshot_every_records: int = 1 << 30


@final
class RaftHost:
    """The Ready loop of one node; its `SimNode` (disk, incarnation) outlives crashes."""

    def __init__(self, env: RaftEnv, node_id: NodeId, state_machine: HostedStateMachine) -> None:
        self.env = env
        self.n = SimNode(node_id=node_id, is_voter=node_id in env.voters)
        self.sm = state_machine
        env.nodes[node_id] = self.n

    @property
    def node(self) -> RaftNode | None:
        return self.n.node

    @property
    def is_up(self) -> bool:
        return self.n.node is not None

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        n, env = self.n, self.env
        assert n.node is None
        n.incarnation += 1
        n.paused = False
        sid = n.disk.latest_snapshot_id()
        if sid is None:
            n.app = AppState()
            self.sm.restore(None)
        else:
            n.app, payload = decode_app_snapshot(n.disk.snapshot_data(sid))
            self.sm.restore(payload)
        n.node = RaftNode(
            n.node_id,
            voters=env.voters,
            config=env.config,
            log=n.disk,
            persisted_state=n.disk.hard_state,
            rng=random.Random(env.rng.getrandbits(64)),
            now_ms=env.clock.now_ms,
            logger=env.logger,
        )
        assert n.node.high_watermark == n.app.applied, "app state and core disagree on restart"
        env.checker.on_start(n)
        n.wake_at = NEVER
        self.after_activity()

    def crash(self) -> None:
        """Kill the process: memory and unsynced writes are lost."""
        n = self.n
        if n.node is None:
            return
        n.lose_process()
        self.env.checker.on_crash(n)

    def pause(self) -> None:
        if self.n.node is not None:
            self.n.paused = True

    def resume(self) -> None:
        """Finish the persists deferred while paused; the owner then replays its inbox."""
        n = self.n
        if not n.paused:
            return
        n.paused = False
        for action in n.deferred:
            action()
        n.deferred.clear()
        if n.node is not None:
            n.wake_at = NEVER
            self.after_activity()

    # --- inputs -------------------------------------------------------------------------------

    def deliver(self, msg: RaftMessage) -> None:
        """Step a peer's message (the owner queues it while paused)."""
        node = self.n.node
        if node is None:
            return
        node.step(msg, self.env.clock.now_ms)
        self.after_activity()

    def propose(self, records: list[bytes]) -> Offset:
        """`RaftNode.propose`; raises `NotLeaderError`."""
        node = self.n.node
        assert node is not None
        offset = node.propose(records, self.env.clock.now_ms)
        self.after_activity()
        return offset

    # --- the loop (SimCluster's) --------------------------------------------------------------

    def after_activity(self) -> None:
        n, env = self.n, self.env
        node = n.node
        if node is None:
            return
        if not n.in_flight and node.has_ready():
            rd = node.ready()
            for msg in rd.early_messages:
                env.checker.on_send(msg)
                env.send(msg)
            n.disk.write_ready(rd)
            n.in_flight = True
            latency = env.rng.randint(0, env.sync_latency_max_ms) if rd.must_sync else 0
            inc = n.incarnation
            env.scheduler.after(latency, lambda: self._persisted(inc, rd))
        deadline = node.next_deadline_ms()
        if deadline < n.wake_at:
            n.wake_at = deadline
            inc = n.incarnation
            env.scheduler.at(deadline, lambda: self._wake(inc, deadline))
        env.checker.after_event(n, env.nodes)
        self.sm.after_activity()

    def _wake(self, incarnation: int, deadline: int) -> None:
        n = self.n
        if n.incarnation != incarnation or n.wake_at != deadline or n.node is None:
            return
        n.wake_at = NEVER
        if n.paused:
            return  # resume() reschedules
        now = self.env.clock.now_ms
        n.note_wake(now)
        n.node.tick(now)
        self.after_activity()

    def _persisted(self, incarnation: int, rd: Ready) -> None:
        n, env = self.n, self.env
        if n.incarnation != incarnation or n.node is None:
            return  # crashed meanwhile: the unsynced writes are gone
        if n.paused:
            n.deferred.append(lambda: self._persisted(incarnation, rd))
            return
        if rd.must_sync:
            n.disk.sync()
        for msg in rd.messages:
            env.checker.on_send(msg)
            env.send(msg)
        self._apply(rd)
        n.in_flight = False
        n.node.advance(rd)
        self._maybe_snapshot()
        self.after_activity()

    def _apply(self, rd: Ready) -> None:
        n, checker = self.n, self.env.checker
        app = n.app
        if rd.install_snapshot is not None:
            sid = rd.install_snapshot
            n.app, payload = decode_app_snapshot(n.disk.snapshot_data(sid))
            app = n.app
            assert app.applied == sid.end_offset, "snapshot content does not match its id"
            checker.on_digest(n.node_id, app.applied, app.digest)
            self.sm.restore(payload)
        for batch in rd.committed:
            self.sm.apply_batch(batch, n.apply_committed(batch, checker))
        if rd.install_snapshot is not None or rd.committed:
            self.sm.applied()
        if rd.delete_log_before is not None:
            n.disk.delete_before(rd.delete_log_before)

    def _maybe_snapshot(self) -> None:
        n = self.n
        node = n.node
        if node is None:
            return  # the state machine crashed the node while applying
        app = n.app
        if app.applied - node.log_start_offset < self.env.snapshot_every_records:
            return
        sid = node.snapshot_id_at(app.applied)
        n.disk.save_snapshot(sid, encode_app_snapshot(app, self.sm.snapshot()))
        n.disk.sync()
        node.snapshot_taken(sid)


__all__ = ["HostedStateMachine", "RaftEnv", "RaftHost"]
