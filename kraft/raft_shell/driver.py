"""`RaftDriver`: one Raft group's node driven through the Ready loop, over a `Transport`.

The loop, one Ready at a time (the order is the `Ready` contract, ``kraft/raft/ready.py``)::

    rd = node.ready()
    send(rd.early_messages)          # a leader's fetch responses need not wait (§10.2.1)
    storage.persist(rd)              # hard state, truncation, batches, snapshot chunks; fsync
    send(rd.messages)                # only now: responses resolve parked RPCs, requests go out
    apply(rd.committed)              # state machine callback, then resolve proposals
    node.advance(rd)

Everything runs on one event-loop thread. A Ready's own work is synchronous but for one
yield, after a leader's early fetch responses when the Ready must sync, so the transport puts
them on the wire before the fsync blocks the loop; inputs delivered meanwhile are allowed by
the core while a Ready is out, and wait for the next one. Group commit falls out of this:
proposals that arrive during an fsync are batched into the next Ready and share its fsync.

The driver does no networking: it sends through the `Transport` it is given, under its group
name, and the transport calls `RaftDriver.deliver` with inbound messages. Time comes from the
``clock`` it is given. Its other jobs are small classes of their own: `Proposals` (futures
settled by what commits), `Applier` and `Snapshots` (the state machine), `LeaderListeners`,
and `describe_quorum` (the DescribeQuorum view).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping, Sequence

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.metrics.raft import RaftLatency
from kraft.raft import RaftConfig, RaftNode
from kraft.raft.errors import NotLeaderError
from kraft.raft.messages import RaftMessage, SnapshotId
from kraft.raft_shell.clock import clock_ms
from kraft.raft_shell.describe import QuorumStatus, describe_quorum
from kraft.raft_shell.listeners import LeaderListener, LeaderListeners
from kraft.raft_shell.proposals import Proposals
from kraft.raft_shell.snapshots import Snapshots
from kraft.raft_shell.state_machine import Applier, NullStateMachine, StateMachine
from kraft.raft_shell.storage import DriverStorage
from kraft.raft_shell.transport import Transport
from kraft.supervision import LoopSupervisor
from kraft.transport.codec import METADATA_GROUP
from kraft.types import NodeId
from storage.errors import LogClosedError, NotControllerError


class _Wakeup:
    """An `asyncio.Event` for one waiter with a timeout, without `asyncio.wait_for`'s task.

    The Raft loop sleeps on it between deadlines and is woken by every message and proposal,
    so a wakeup costs one future and one timer handle, not a task and its callbacks.
    """

    __slots__ = ("_flag", "_waiter")

    def __init__(self) -> None:
        self._flag = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._flag = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def is_set(self) -> bool:
        return self._flag

    def clear(self) -> None:
        self._flag = False

    async def wait(self, timeout_s: float) -> None:
        """Return once set, or after ``timeout_s``."""
        if self._flag:
            return
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        timer = loop.call_later(timeout_s, _wake_up, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _wake_up(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class RaftDriver:
    """Drives one replica of one Raft group: voters are ``{id: "host:port"}`` (the address only
    names the leader in NOT_CONTROLLER errors); a node not among them is an observer.

    Args:
        node_id: this node's id.
        voters: every voter's id and address.
        storage: the group's disk (`DurableRaftStorage`), opened.
        transport: carries this group's messages (`Transport`).
        group: the group's name on the transport.
        state_machine: receives committed records (`StateMachine`).
        snapshot_interval_bytes: take a snapshot after this many applied bytes (0: never).
        clock: milliseconds that never go backwards (`clock_ms`).
        rng: the core's randomness (election jitter); seeded from ``seed`` if not given.
        supervisor: the process's `LoopSupervisor` (one of its own by default).
        dynamic_voters: KIP-853: the voter set lives in the log and changes with `add_voter`
            and `remove_voter`; ``voters`` are then the initial set (and the addresses to
            reach them), used until the log carries a VotersRecord.
    """

    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, str],
        storage: DriverStorage,
        transport: Transport,
        *,
        group: str = METADATA_GROUP,
        config: RaftConfig | None = None,
        state_machine: StateMachine | None = None,
        snapshot_interval_bytes: int = 0,
        clock: Callable[[], int] = clock_ms,
        rng: random.Random | None = None,
        seed: int | None = None,
        supervisor: LoopSupervisor | None = None,
        logger: FilteringBoundLogger | None = None,
        dynamic_voters: bool = False,
    ) -> None:
        self.node_id = NodeId(node_id)
        self.dynamic_voters = dynamic_voters
        self._voters_seen = -2
        """The offset of the VotersRecord whose endpoints the transport last learnt."""
        self.voters = {NodeId(k): v for k, v in voters.items()}
        self.group = group
        self.config = config or RaftConfig()
        self.storage = storage
        self._transport = transport
        self._clock = clock
        self._rng = rng or random.Random(seed if seed is not None else time.time_ns() ^ node_id)
        base = logger or structlog.get_logger("kraft.raft.driver")
        self._log = base.bind(node_id=node_id)
        if group != METADATA_GROUP:
            self._log = self._log.bind(group=group)
        self.supervisor = supervisor if supervisor is not None else LoopSupervisor(self._log)
        """Watches the Raft loop: if it dies, proposals fail (and a server process exits)."""
        self.supervisor.on_death(self._on_loop_death)
        self.applier = Applier(state_machine or NullStateMachine())
        self.snapshots = Snapshots(storage, self.applier, snapshot_interval_bytes)
        self.latency = RaftLatency()
        self.proposals = Proposals(
            self.not_leader_error, clock=clock, on_committed=self.latency.committed
        )
        self.listeners = LeaderListeners(self._log)
        self._node: RaftNode | None = None
        self._wake = _Wakeup()
        self._loop_task: asyncio.Task[None] | None = None
        self._snapshot_task: asyncio.Task[None] | None = None
        """An automatic snapshot being serialised off the loop (`_snapshot_off_loop`)."""
        self._running = False

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def node(self) -> RaftNode:
        assert self._node is not None, "start() first"
        return self._node

    @property
    def state_machine(self) -> StateMachine:
        return self.applier.state_machine

    @property
    def loop_task(self) -> asyncio.Task[None] | None:
        """The Raft loop; it ends with an exception if the loop crashed (e.g. a state machine
        that raised), which a server should treat as fatal."""
        return self._loop_task

    @property
    def running(self) -> bool:
        return self._running

    def add_leader_listener(self, fn: LeaderListener) -> None:
        """Call ``fn(leader id or None, epoch)`` whenever either changes."""
        self.listeners.add(fn)

    def start(self) -> None:
        """Restore the latest snapshot, join the transport and start the loop."""
        storage = self.storage
        sid = storage.latest_snapshot_id()
        if sid is not None:
            self.applier.restore(sid, storage.snapshot_data(sid))
        self._node = RaftNode(
            self.node_id,
            voters=frozenset(self.voters),
            config=self.config,
            log=storage,
            persisted_state=storage.load_hard_state(),
            rng=self._rng,
            now_ms=self._clock(),
            logger=self._log,
            dynamic_voters=self.dynamic_voters,
        )
        self._learn_voter_addresses()
        self._transport.register(self.group, self)
        self._running = True
        name = f"raft-loop-{self.node_id}"
        if self.group != METADATA_GROUP:
            name += f"-{self.group}"
        self._loop_task = asyncio.create_task(self._run(), name=name)
        # NB: the loop returns only once `stop` cleared ``_running`` (it finishes its Ready
        # first); it reports its own death by an exception, below.
        self.supervisor.watch(self._loop_task, may_finish=True)

    async def stop(self, *, graceful: bool = True) -> None:
        """Stop the loop, leave the transport and fail what is pending. ``graceful`` resigns
        leadership first (KIP-595 EndQuorumEpoch) so a successor is elected at once rather
        than after a timeout. The storage stays open (its owner closes it)."""
        if not self._running:
            return
        node = self._node
        if graceful and node is not None and node.is_leader and self.supervisor.death is None:
            try:
                node.resign(self._clock())
                self._wake.set()
                await asyncio.sleep(0.05)  # let the EndQuorumEpoch requests go out
            except NotLeaderError:
                pass
        self._running = False
        self._wake.set()
        if self._loop_task is not None:
            await asyncio.gather(self._loop_task, return_exceptions=True)
        self._transport.unregister(self.group)
        self.proposals.fail_all(LogClosedError("the replicated log was stopped"))

    def _on_loop_death(self) -> None:
        """A loop of this process died: fail what waits on us."""
        self.proposals.fail_all(
            LogClosedError("the Raft loop died; see the background_task_died log event")
        )

    # --- the embeddable API -------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._node is not None and self._node.is_leader

    @property
    def leader_id(self) -> int | None:
        return None if self._node is None else self._node.leader_id

    @property
    def epoch(self) -> int:
        return -1 if self._node is None else int(self._node.epoch)

    @property
    def high_watermark(self) -> int:
        return -1 if self._node is None else int(self._node.high_watermark)

    def leader_address(self) -> str:
        lid = self.leader_id
        return self.voters.get(NodeId(lid), "") if lid is not None else ""

    # --- KIP-853: voter changes ---------------------------------------------------------------

    def add_voter(self, voter_id: int, endpoint: str) -> asyncio.Future[int]:
        """Append a VotersRecord adding ``voter_id`` at ``endpoint`` (``host:port``); the
        future gives its offset once committed (`RaftNode.add_voter` says what is refused).

        Raises:
            NotControllerError: not the leader. DuplicateVoterError, RequestTimedOutError
            (retriable: not caught up, another change pending), InvalidRequestError.
        """
        return self._change_voters(lambda now: self.node.add_voter(NodeId(voter_id), endpoint, now))

    def remove_voter(self, voter_id: int) -> asyncio.Future[int]:
        """As `add_voter`, removing ``voter_id`` (VoterNotFoundError if it is not one)."""
        return self._change_voters(lambda now: self.node.remove_voter(NodeId(voter_id), now))

    def _change_voters(self, change: Callable[[int], int]) -> asyncio.Future[int]:
        if self.supervisor.death is not None or not self._running:
            raise LogClosedError("the replicated log was stopped")
        try:
            offset = change(self._clock())
        except NotLeaderError:
            raise self.not_leader_error() from None
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.proposals.add(offset, 1, int(self.node.epoch), fut)
        self._learn_voter_addresses()
        self._wake.set()
        return fut

    def _learn_voter_addresses(self) -> None:
        """KIP-853: the endpoints in the latest VotersRecord are where those voters are
        reached (the transport dials them; NOT_CONTROLLER names the leader's)."""
        history = self.node.raft_log.voter_history
        if history is None or history.latest_offset == self._voters_seen:
            return
        self._voters_seen = history.latest_offset
        set_address = getattr(self._transport, "set_address", None)
        for vid, endpoint in history.latest.items():
            if not endpoint:
                continue
            self.voters[vid] = endpoint
            if set_address is not None:
                set_address(vid, endpoint)

    def not_leader_error(self) -> NotControllerError:
        lid = self.leader_id
        return NotControllerError(
            f"node {self.node_id} is not the leader (leader: {lid}, {self.leader_address()})",
            leader_id=lid,
            leader_address=self.leader_address(),
        )

    def propose_nowait(self, records: Sequence[bytes]) -> asyncio.Future[int]:
        """Append ``records`` as consecutive entries; the future gives the first one's offset
        once all are committed.

        Raises:
            NotControllerError: this node is not the leader (carries the leader's id and
                address); also in the future, if leadership is lost before they commit.
            LogClosedError: the Raft loop died or the driver is stopped.
        """
        node = self.node
        if self.supervisor.death is not None:
            raise LogClosedError("the Raft loop died; see the background_task_died log event")
        if not self._running:
            raise LogClosedError("the replicated log was stopped")
        try:
            first = node.propose(records, self._clock())
        except NotLeaderError:
            raise self.not_leader_error() from None
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.proposals.add(first, len(records), node.epoch, fut)
        self._wake.set()
        return fut

    async def propose(self, data: bytes) -> int:
        """Replicate one entry; returns its offset once committed."""
        return await self.propose_nowait([data])

    async def resign(self) -> None:
        try:
            self.node.resign(self._clock())
        except NotLeaderError:
            raise self.not_leader_error() from None
        self._wake.set()

    async def _snapshot_off_loop(self, sid: SnapshotId, serialize: Callable[[], bytes]) -> None:
        """Serialise an automatic snapshot and write its file in a worker thread
        (`Snapshots.capture`, `Snapshots.write`), then trim the log back on the loop."""
        try:
            data = await asyncio.to_thread(self.snapshots.write, sid, serialize)
            if self._running and self._node is not None:
                self.snapshots.finish(self._node, sid, data, written=True)
                self._wake.set()
        except Exception as exc:
            self.supervisor.fail(self._loop_task.get_name() if self._loop_task else "raft", exc)
        finally:
            self._snapshot_task = None

    async def take_snapshot(self) -> SnapshotId | None:
        """Snapshot the state machine at the last applied offset, then trim the log."""
        sid = self.snapshots.take(self.node)
        if sid is not None:
            self._wake.set()
        return sid

    def describe(self) -> QuorumStatus:
        """The quorum as this node sees it (Kafka's DescribeQuorum)."""
        return describe_quorum(self.node, self.node.voters, self._clock())

    def voter_endpoints(self) -> dict[int, str]:
        """The voter set in use (KIP-853: the latest in the log) with each voter's address."""
        return {int(v): e or self.voters.get(v, "") for v, e in self.node.voter_endpoints.items()}

    # --- the loop -----------------------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    def deliver(self, msg: RaftMessage) -> None:
        """An inbound message of this group (the transport calls it)."""
        if self._running and self._node is not None and self.supervisor.death is None:
            self._node.step(msg, self._clock())
            self._wake.set()

    def peer_lost(self, peer: NodeId) -> None:
        """``peer``'s host closed our connection to it (the transport calls it)."""
        if self._running and self._node is not None and self.supervisor.death is None:
            self._node.peer_connection_lost(peer, self._clock())
            self._wake.set()

    async def _run(self) -> None:
        node = self.node
        clock = self._clock
        try:
            while self._running:
                # NB: let transport handlers that are already runnable deliver their messages
                # before the clock is checked: after a stall (a long apply, a busy machine) a
                # follower must see the fetch response waiting for it before it calls an
                # election.
                await asyncio.sleep(0)
                now = clock()
                if now >= node.next_deadline_ms():
                    node.tick(now)
                while node.has_ready():
                    await self._handle_ready()
                    await asyncio.sleep(0)  # one Ready at a time, then let the peers in
                self.listeners.observe(node.leader_id, int(node.epoch))
                self.latency.leader_observed(node.leader_id, now)
                if self.snapshots.due() and self._snapshot_task is None:
                    captured = self.snapshots.capture(node)
                    if captured is not None:
                        self._snapshot_task = asyncio.create_task(
                            self._snapshot_off_loop(*captured)
                        )
                delay_ms = node.next_deadline_ms() - clock()
                if delay_ms > 0 and not self._wake.is_set():
                    await self._wake.wait(delay_ms / 1000)
                else:
                    await asyncio.sleep(0)  # let transport handlers and proposers run
                self._wake.clear()
        except Exception as exc:
            self.supervisor.fail(self._loop_task.get_name() if self._loop_task else "raft", exc)
            raise

    async def _handle_ready(self) -> None:
        node = self.node
        storage = self.storage
        send = self._transport.send
        group = self.group
        rd = node.ready()
        for msg in rd.early_messages:
            send(group, msg)
        if rd.early_messages and rd.must_sync:
            # Let the transport hand them to the wire before the fsync below blocks this
            # loop: the followers then work while we sync.
            await asyncio.sleep(0)
        storage.persist(rd)
        for msg in rd.messages:
            send(group, msg)
        if rd.install_snapshot is not None:
            self.applier.restore(rd.install_snapshot, storage.snapshot_data(rd.install_snapshot))
        proposals = self.proposals
        apply = self.applier.apply
        for batch in rd.committed:
            applied = apply(batch)
            if applied is not None:
                proposals.committed(applied)
        if rd.delete_log_before is not None:
            storage.delete_before(rd.delete_log_before)
        node.advance(rd)
        if rd.entries or rd.install_snapshot is not None or rd.truncate_to is not None:
            self._learn_voter_addresses()
        proposals.settle(
            is_leader=node.is_leader, epoch=int(node.epoch), high_watermark=int(node.high_watermark)
        )


__all__ = ["RaftDriver"]
