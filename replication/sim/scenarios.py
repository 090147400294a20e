"""Scripted fault scenarios for ``kraft sim cluster --scenario NAME``, instead of the random
nemesis: each drives one partition into a known corner, on the same harness, checkers and
clients as a random run (the seed still draws the network delays and the clients' timing).

``last-replica-standing`` is KIP-966's motivating case, the one eligible leader replicas fix.
Partition 0, RF 3, ``min.insync.replicas`` 2, brokers that never fsync their logs (Kafka's
default: durability comes from replication, not the disk):

1. Once every replica is in sync and acks=all batches were acknowledged, follower F2 crashes
   and stays down: the ISR shrinks to {L, F1}, still at min ISR, so the high watermark moves on.
2. F1 is cut off from the leader L (both still reach the controllers): the ISR shrinks to
   {L}, below min ISR, so the high watermark stops (KIP-966's strict min ISR). Every
   acknowledged batch is on F1; acks=all produces now fail with NOT_ENOUGH_REPLICAS.
3. L loses power: its unflushed log, every acknowledged batch included, is gone. It stays down
   until it is fenced, then restarts (an unclean shutdown) while the cut heals, and F2 comes
   back.

What eligible leader replicas change, exactly: at step 2 F1 joins the ELR. When L is fenced,
**with ELR** the ISR empties into the ELR and F1, unfenced and holding every committed record,
is elected at once (a clean election); L's restart is unclean, so it leaves the ELR, follows
F1 and catches up: nothing acknowledged is lost. **Without ELR** (``--no-elr``, Kafka before
4.0) KIP-841 keeps L as the only ISR member; the partition has no leader until L is back, and
then L, with its empty log, is re-elected *cleanly*; F1 truncates to it and the acknowledged
batches are gone everywhere: the checker reports ``acked_never_lost`` (or
``committed_identical`` when the first overwritten offset it meets holds a committed acks=1
batch; 20 of 20 seeds report one or the other). (An unclean election
would lose them too; the ELR-less cluster has no safe candidate to wait for.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, final

from kraft.sim.checker import InvariantViolated
from kraft.types import TopicPartition
from replication.sim.broker import SimBroker
from replication.sim.cluster import BrokerCluster
from replication.sim.workload import NemesisStats

SCENARIOS: Final = ("last-replica-standing",)
"""``--scenario`` choices."""

_POLL_MS: Final = 10
NEVER_FLUSH_MS: Final = 1 << 40
"""The flush interval of a scenario's brokers: their logs live in the page cache only."""


@final
class LastReplicaStanding:
    """The scripted faults of ``last-replica-standing`` (see the module docstring)."""

    def __init__(self, cluster: BrokerCluster, *, start_ms: int, end_ms: int) -> None:
        self.cluster = cluster
        self.start_ms = start_ms
        self.end_ms = end_ms
        self.tp = TopicPartition(cluster.topic_partitions()[0].topic, 0)
        self.stats = NemesisStats()
        self.steps: list[str] = []
        """What happened, in order (for a report or a failing test)."""
        self.fenced_state: tuple[int, tuple[int, ...], tuple[int, ...]] | None = None
        """(leader, ISR, ELR) of the partition in the batch that fenced the old leader."""
        self.roles: tuple[int, int, int] | None = None
        """(L, F1, F2): the old leader, the follower cut off from it, the crashed follower."""
        self._leader: SimBroker | None = None
        self._follower: SimBroker | None = None
        self._gone: SimBroker | None = None

    def start(self) -> None:
        self._wait("every replica in sync and acks=all acknowledged", self._in_sync, self._step1)
        self.cluster.scheduler.at(self.end_ms, self._heal)

    # --- the steps ----------------------------------------------------------------------------

    def _in_sync(self) -> bool:
        registration = self.cluster.registration(self.tp)
        return (
            registration is not None
            and registration.leader >= 0
            and set(registration.isr) == set(registration.replicas)
            and len(self.cluster.checker.acked.get(self.tp, {})) >= 3
        )

    def _step1(self) -> None:
        registration = self.cluster.registration(self.tp)
        assert registration is not None
        brokers = self.cluster.brokers
        leader = registration.leader
        first, second = (r for r in registration.replicas if r != leader)
        self._leader, self._follower, self._gone = brokers[leader], brokers[first], brokers[second]
        self.roles = (leader, first, second)
        self._fault("crash", f"follower {second} crashes and stays down")
        self._gone.crash(power_loss=False)
        self._wait("the ISR shrank to {L, F1}", lambda: self._isr() == {leader, first}, self._step2)

    def _step2(self) -> None:
        leader, follower = self._ids()
        self._fault("cut", f"follower {follower} is cut off from leader {leader}")
        network = self.cluster.network
        network.block_one_way(leader, frozenset({follower}))
        network.block_one_way(follower, frozenset({leader}))
        self._wait("the ISR shrank to {L}", lambda: self._isr() == {leader}, self._step3)

    def _step3(self) -> None:
        leader, _ = self._ids()
        assert self._leader is not None
        self._fault("power_loss", f"leader {leader} loses power")
        self._leader.crash(power_loss=True)
        self._wait("the old leader is fenced", self._leader_fenced, self._step4)

    def _step4(self) -> None:
        assert self._leader is not None and self._gone is not None
        registration = self.cluster.registration(self.tp)
        assert registration is not None
        self.fenced_state = (registration.leader, registration.isr, registration.elr)
        self._fault("restart", "the old leader restarts, the cut heals, the crashed one returns")
        self.cluster.network.heal()
        self._leader.start()
        self._gone.start()

    def _heal(self) -> None:
        self.cluster.network.heal()
        for broker in self.cluster.brokers.values():
            if not broker.up:
                broker.start()

    # --- helpers ------------------------------------------------------------------------------

    def _ids(self) -> tuple[int, int]:
        assert self._leader is not None and self._follower is not None
        return self._leader.node_id, self._follower.node_id

    def _isr(self) -> set[int]:
        registration = self.cluster.registration(self.tp)
        return set() if registration is None else set(registration.isr)

    def _leader_fenced(self) -> bool:
        assert self._leader is not None
        broker = self.cluster.image.broker(self._leader.node_id)
        return broker is not None and broker.fenced

    def _fault(self, name: str, what: str) -> None:
        self.stats.injected[name] = self.stats.injected.get(name, 0) + 1
        self.steps.append(f"{self.cluster.clock.now_ms} ms: {what}")

    def _wait(self, what: str, condition: Callable[[], bool], then: Callable[[], None]) -> None:
        """Run ``then`` once ``condition`` holds (polled), from ``start_ms`` on; a scenario that
        cannot reach its next step before ``end_ms`` is a failure of the run."""

        def poll() -> None:
            now = self.cluster.clock.now_ms
            if condition():
                then()
            elif now >= self.end_ms:
                raise InvariantViolated("scenario", f"{what}: not reached by {self.end_ms} ms")
            else:
                self.cluster.scheduler.after(_POLL_MS, poll)

        at = max(self.start_ms, self.cluster.clock.now_ms)
        self.cluster.scheduler.at(at, poll)


__all__ = ["NEVER_FLUSH_MS", "SCENARIOS", "LastReplicaStanding"]
