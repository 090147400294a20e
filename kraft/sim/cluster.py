"""`SimCluster`: Raft nodes wired to a `SimNetwork` and `SimDisk`s, driven by a `Scheduler`.

Each `SimNode` is the simulator's shell around one `RaftNode`: it runs the `Ready` contract
(persist -> after a random disk latency, sync -> send -> apply -> advance), ticks the node at
its `next_deadline_ms`, and keeps a tiny state machine (a running digest of the applied
batches) that it snapshots now and then. Nodes crash (losing unsynced writes and in-memory
state), restart from their disks, pause and resume, or are wiped and rejoin (observers only:
a wiped voter would forget its vote, which Raft forbids).
"""

from __future__ import annotations

import logging
import random
import struct
import zlib
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final, final

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.raft import RaftConfig, RaftNode, Ready, SnapshotId, UnsafeOptions
from kraft.raft.messages import RaftMessage
from kraft.raft.voters import frame_snapshot, split_snapshot
from kraft.sim.checker import RaftChecker
from kraft.sim.disk import SimDisk
from kraft.sim.network import LinkProfile, SimNetwork
from kraft.sim.scheduler import Scheduler, SimClock
from kraft.types import NodeId
from storage.records import BatchHeader, read_header, record_values

SIM_TIMEOUTS: Final = {
    "election_timeout_ms": 150,
    "fetch_timeout_ms": 250,
    "request_timeout_ms": 200,
}
"""The Raft timeouts the simulators run with (the Raft and controller simulator here, the
broker cluster simulator of ``replication.sim``, the scenario scripts of tests/). Their network
is loopback-like (a few ms per message, no TCP retransmissions), and their seed ranges,
liveness windows and failover figures were written against these; the product's defaults
(`RaftConfig`, 300 / 600 / 400 ms since issue 29) leave room for a real network's losses."""


def sim_raft_config(**overrides: int) -> RaftConfig:
    """`RaftConfig` with `SIM_TIMEOUTS`, then ``overrides``."""
    return RaftConfig(**{**SIM_TIMEOUTS, **overrides})


NEVER = 1 << 62
_SNAPSHOT_HEAD = struct.Struct(">qI")
SNAPSHOT_FILLER = bytes(range(256)) * 2
"""Padding that makes snapshots span several FetchSnapshot chunks."""


@dataclass(slots=True, kw_only=True)
class DiskProfile:
    sync_latency_min_ms: int = 0
    sync_latency_max_ms: int = 2
    unsafe_skip_sync: bool = False
    """A deliberate bug for checker tests: the shell ignores ``Ready.must_sync``."""
    unsafe_volatile_hard_state: bool = False
    """A deliberate bug for checker tests: votes and epochs are never synced."""


@dataclass(slots=True)
class AppState:
    """The replicated state machine: a digest chained over every applied batch."""

    applied: int = 0
    digest: int = 0
    batches: int = 0


@dataclass(slots=True, kw_only=True)
class SimNode:
    node_id: NodeId
    is_voter: bool
    disk: SimDisk = field(default_factory=SimDisk)
    node: RaftNode | None = None
    incarnation: int = 0
    paused: bool = False
    inbox: list[RaftMessage] = field(default_factory=list)
    deferred: list[Callable[[], None]] = field(default_factory=list)
    wake_at: int = NEVER
    in_flight: bool = False
    app: AppState = field(default_factory=AppState)
    same_time_wakes: int = 0
    last_wake_ms: int = -1

    @property
    def is_up(self) -> bool:
        return self.node is not None

    def lose_process(self) -> None:
        """A crash: the core, its in-flight Ready, inbox and unsynced writes are gone."""
        self.node = None
        self.incarnation += 1
        self.disk.crash()
        self.in_flight = False
        self.paused = False
        self.inbox.clear()
        self.deferred.clear()
        self.wake_at = NEVER

    def note_wake(self, now_ms: int) -> None:
        """Count wake-ups at one instant; a thousand of them is a livelock."""
        if now_ms == self.last_wake_ms:
            self.same_time_wakes += 1
            assert self.same_time_wakes < 1000, f"node {self.node_id} livelocked at {now_ms} ms"
        else:
            self.same_time_wakes = 0
            self.last_wake_ms = now_ms

    def apply_committed(self, batch: bytes, checker: RaftChecker) -> BatchHeader:
        """Chain one committed batch into the digest (and tell the checker); its header."""
        app = self.app
        header = read_header(batch)
        assert header.base_offset == app.applied, (
            f"node {self.node_id} applies {header.base_offset} after {app.applied}"
        )
        app.digest = zlib.crc32(batch, app.digest)
        app.applied = header.next_offset
        app.batches += 1
        checker.on_apply(self.node_id, header.base_offset, app.applied, batch, app.digest)
        return header


def encode_app_snapshot(
    app: AppState, payload: bytes, voters: Mapping[NodeId, str] | None = None
) -> bytes:
    """A snapshot: the voter set at its end if it came from the log (KIP-853,
    `frame_snapshot`), ``(applied, digest)``, then the state machine's own ``payload``."""
    return frame_snapshot(voters, _SNAPSHOT_HEAD.pack(app.applied, app.digest) + payload)


def decode_app_snapshot(data: bytes) -> tuple[AppState, bytes]:
    """The inverse of `encode_app_snapshot` (the voters frame is the core's to read)."""
    _, data = split_snapshot(data)
    applied, digest = _SNAPSHOT_HEAD.unpack_from(data)
    return AppState(applied=int(applied), digest=int(digest)), data[_SNAPSHOT_HEAD.size :]


def sim_logger(clock: SimClock, seed: int, level: int) -> FilteringBoundLogger:
    """A structlog logger stamped with ``seed`` and ``sim_time_ms``; silent below ``level``."""

    def add_sim_time(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        event["sim_time_ms"] = clock.now_ms
        return event

    logger: FilteringBoundLogger = structlog.wrap_logger(
        structlog.PrintLogger(),
        wrapper_class=structlog.make_filtering_bound_logger(level),
        processors=[
            add_sim_time,
            structlog.processors.add_log_level,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
    )
    return logger.bind(seed=hex(seed))


@final
class SimCluster:
    """Voters ``1..voters`` and observers after them, all driven by one seed."""

    def __init__(
        self,
        *,
        seed: int,
        voters: int = 3,
        observers: int = 0,
        config: RaftConfig | None = None,
        link: LinkProfile | None = None,
        disk: DiskProfile | None = None,
        snapshot_every_records: int = 200,
        unsafe: UnsafeOptions | None = None,
        log_level: int = logging.CRITICAL,
        dynamic_voters: bool = False,
    ) -> None:
        self.seed = seed
        self.dynamic_voters = dynamic_voters
        """KIP-853: the voter set lives in the log and changes (`kraft.sim.membership`);
        ``voters`` is the initial set every node is configured with."""
        self.rng = random.Random(seed)
        self.clock = SimClock()
        self.scheduler = Scheduler(self.clock)
        self.config = config or sim_raft_config(fetch_snapshot_max_bytes=200)
        self.network = SimNetwork(
            scheduler=self.scheduler,
            rng=random.Random(self.rng.getrandbits(64)),
            deliver=self._deliver,
            profile=link or LinkProfile(),
        )
        self.disk_profile = disk or DiskProfile()
        self.voter_ids = frozenset(NodeId(i) for i in range(1, voters + 1))
        self.nodes: dict[NodeId, SimNode] = {}
        for i in range(1, voters + observers + 1):
            nid = NodeId(i)
            self.nodes[nid] = SimNode(
                node_id=nid,
                is_voter=nid in self.voter_ids,
                disk=SimDisk(
                    unsafe_volatile_hard_state=self.disk_profile.unsafe_volatile_hard_state
                ),
            )
        self.checker = RaftChecker(self.voter_ids)
        self.ever_voters: set[NodeId] = set(self.voter_ids)
        """Every node any log has named a voter: never wiped (it may hold a vote)."""
        self.snapshot_every_records = snapshot_every_records
        self.unsafe = unsafe
        self.logger = sim_logger(self.clock, seed, log_level)
        self.on_commit: Callable[[NodeId, bytes, int], None] | None = None
        for n in self.nodes.values():
            self.start(n)

    # --- node lifecycle -----------------------------------------------------------------------

    def start(self, n: SimNode) -> None:
        assert n.node is None
        n.incarnation += 1
        n.app = self._load_app_state(n)
        n.node = RaftNode(
            n.node_id,
            voters=self.voter_ids,
            config=self.config,
            log=n.disk,
            persisted_state=n.disk.hard_state,
            rng=random.Random(self.rng.getrandbits(64)),
            now_ms=self.clock.now_ms,
            logger=self.logger,
            unsafe=self.unsafe,
            dynamic_voters=self.dynamic_voters,
        )
        assert n.node.high_watermark == n.app.applied, "app state and core disagree on restart"
        self.checker.on_start(n)
        n.wake_at = NEVER
        self._after_activity(n)

    def crash(self, n: SimNode) -> None:
        if n.node is None:
            return
        n.lose_process()
        self.checker.on_crash(n)
        for peer in self.nodes.values():
            if peer is not n:
                self.network.connection_closed(n.node_id, peer.node_id, self._losing(peer, n))

    def _losing(self, n: SimNode, peer: SimNode) -> Callable[[], None]:
        return lambda: self._peer_lost(n, peer.node_id)

    def _peer_lost(self, n: SimNode, peer: NodeId) -> None:
        if n.node is None:
            return
        if n.paused:
            n.deferred.append(lambda: self._peer_lost(n, peer))
            return
        n.node.peer_connection_lost(peer, self.clock.now_ms)
        self._after_activity(n)

    def wipe(self, n: SimNode) -> None:
        """Crash and lose the whole disk (observers only: a voter must keep its vote)."""
        assert not n.is_voter, "wiping a voter breaks Raft's one-vote-per-epoch rule"
        self.crash(n)
        n.disk.wipe()
        self.checker.on_wipe(n)

    def pause(self, n: SimNode) -> None:
        if n.node is not None:
            n.paused = True

    def resume(self, n: SimNode) -> None:
        if not n.paused:
            return
        n.paused = False
        inc = n.incarnation
        for action in n.deferred:
            action()
        n.deferred.clear()
        inbox, n.inbox = n.inbox, []
        for msg in inbox:
            if n.incarnation != inc or n.node is None:
                break
            n.node.step(msg, self.clock.now_ms)
            self._after_activity(n)
        if n.node is not None:
            n.wake_at = NEVER
            self._after_activity(n)

    # --- the shell loop -----------------------------------------------------------------------

    def _deliver(self, msg: RaftMessage) -> None:
        n = self.nodes.get(msg.destination)
        if n is None or n.node is None:
            return  # to the nemesis's outsider, or a node that is down
        if n.paused:
            n.inbox.append(msg)
            return
        n.node.step(msg, self.clock.now_ms)
        self._after_activity(n)

    def _after_activity(self, n: SimNode) -> None:
        node = n.node
        if node is None:
            return
        if not n.in_flight and node.has_ready():
            rd = node.ready()
            for msg in rd.early_messages:  # step 0 of the Ready contract
                self.checker.on_send(msg)
                self.network.send(msg)
            n.disk.write_ready(rd)
            n.in_flight = True
            latency = 0
            if rd.must_sync:
                p = self.disk_profile
                latency = self.rng.randint(p.sync_latency_min_ms, p.sync_latency_max_ms)
            inc = n.incarnation
            self.scheduler.after(latency, lambda: self._persisted(n, inc, rd))
        deadline = node.next_deadline_ms()
        if deadline < n.wake_at:
            n.wake_at = deadline
            inc = n.incarnation
            self.scheduler.at(deadline, lambda: self._wake(n, inc, deadline))
        if self.dynamic_voters:
            for v in node.voters - self.ever_voters:
                self.ever_voters.add(v)
                if v in self.nodes:
                    self.nodes[v].is_voter = True
        self.checker.after_event(n, self.nodes)

    def _wake(self, n: SimNode, incarnation: int, deadline: int) -> None:
        if n.incarnation != incarnation or n.wake_at != deadline or n.node is None:
            return
        n.wake_at = NEVER
        if n.paused:
            return  # resume() reschedules
        now = self.clock.now_ms
        n.note_wake(now)
        n.node.tick(now)
        self._after_activity(n)

    def _persisted(self, n: SimNode, incarnation: int, rd: Ready) -> None:
        if n.incarnation != incarnation or n.node is None:
            return  # crashed meanwhile: the unsynced writes are gone
        if n.paused:
            n.deferred.append(lambda: self._persisted(n, incarnation, rd))
            return
        if rd.must_sync and not self.disk_profile.unsafe_skip_sync:
            n.disk.sync()
        for msg in rd.messages:
            self.checker.on_send(msg)
            self.network.send(msg)
        self._apply(n, rd)
        n.in_flight = False
        n.node.advance(rd)
        self._maybe_snapshot(n)
        self._after_activity(n)

    # --- the state machine --------------------------------------------------------------------

    def _apply(self, n: SimNode, rd: Ready) -> None:
        app = n.app
        if rd.install_snapshot is not None:
            sid = rd.install_snapshot
            loaded, _ = decode_app_snapshot(n.disk.snapshot_data(sid))
            app.applied, app.digest = loaded.applied, loaded.digest
            assert app.applied == sid.end_offset, "snapshot content does not match its id"
            self.checker.on_digest(n.node_id, app.applied, app.digest)
        for batch in rd.committed:
            header = n.apply_committed(batch, self.checker)
            if self.on_commit is not None and not header.is_control:
                for i, value in enumerate(record_values(batch)):
                    if value is not None:
                        self.on_commit(n.node_id, value, header.base_offset + i)
        if rd.delete_log_before is not None:
            n.disk.delete_before(rd.delete_log_before)

    def _maybe_snapshot(self, n: SimNode) -> None:
        node = n.node
        assert node is not None
        app = n.app
        if app.applied - node.log_start_offset < self.snapshot_every_records:
            return
        sid: SnapshotId = node.snapshot_id_at(app.applied)
        voters = node.voters_at(sid.end_offset)
        n.disk.save_snapshot(sid, encode_app_snapshot(app, SNAPSHOT_FILLER, voters))
        n.disk.sync()
        node.snapshot_taken(sid)
        self._after_activity(n)

    def _load_app_state(self, n: SimNode) -> AppState:
        """What the state machine recovers on start: the latest snapshot, or nothing."""
        sid = n.disk.latest_snapshot_id()
        if sid is None:
            assert n.disk.log_start_offset() == 0, "log start past 0 without a snapshot"
            return AppState()
        assert n.disk.log_start_offset() <= sid.end_offset <= n.disk.log_end_offset()
        app, _ = decode_app_snapshot(n.disk.snapshot_data(sid))
        return app

    # --- queries ------------------------------------------------------------------------------

    def leader(self) -> SimNode | None:
        """The live, unpaused leader of the highest epoch, if any."""
        best: SimNode | None = None
        for n in self.nodes.values():
            node = n.node
            if (
                node is not None
                and not n.paused
                and node.is_leader
                and (best is None or node.epoch > best.node.epoch)  # type: ignore[union-attr]
            ):
                best = n
        return best


__all__ = [
    "AppState",
    "DiskProfile",
    "SimCluster",
    "SimNode",
    "decode_app_snapshot",
    "encode_app_snapshot",
    "sim_logger",
]
