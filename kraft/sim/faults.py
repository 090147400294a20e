"""The workload that proposes and watches commits, and the nemesis that injects faults.

The nemesis (after Jepsen's and TigerBeetle's VOPR) picks a random fault every few hundred
simulated milliseconds during its window, each healing itself after a random time, and
heals everything at the end of the window: crashed nodes restart, paused nodes resume,
partitions and packet loss go away. The ``outsider`` fault forges messages from ids outside
the voter set with huge epochs (`kraft.sim.outsider`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import final

from kraft.raft import NotLeaderError
from kraft.sim.cluster import SimCluster, SimNode
from kraft.sim.outsider import OUTSIDER_ID, forge_message
from kraft.types import NodeId


@final
class Workload:
    """Proposes unique values to whoever leads and records when each first commits."""

    def __init__(
        self, cluster: SimCluster, rng: random.Random, *, interval_ms: tuple[int, int]
    ) -> None:
        self.cluster = cluster
        self.rng = rng
        self.interval_ms = interval_ms
        self.proposed: dict[bytes, int] = {}
        self.committed: dict[bytes, int] = {}
        self.offsets: dict[bytes, int] = {}
        self.rejected = 0
        self.stop_ms = 1 << 62
        self._next = 0
        cluster.on_commit = self._on_commit

    def start(self, at_ms: int, stop_ms: int) -> None:
        self.stop_ms = stop_ms
        self.cluster.scheduler.at(at_ms, self._tick)

    def _tick(self) -> None:
        now = self.cluster.clock.now_ms
        if now >= self.stop_ms:
            return
        n = self.cluster.leader()
        if n is not None and n.node is not None:
            count = 1 if self.rng.random() < 0.8 else self.rng.randint(2, 8)
            values = []
            for _ in range(count):
                self._next += 1
                value = b"%08x:%06d:" % (self.cluster.seed & 0xFFFFFFFF, self._next)
                values.append(value.ljust(32, b"."))
            try:
                n.node.propose(values, now)
            except NotLeaderError:  # pragma: no cover - leader() picked a live leader
                self.rejected += 1
            else:
                for v in values:
                    self.proposed[v] = now
                self.cluster._after_activity(n)
        self.cluster.scheduler.after(self.rng.randint(*self.interval_ms), self._tick)

    def _on_commit(self, node_id: NodeId, value: bytes, offset: int) -> None:
        self.committed.setdefault(value, self.cluster.clock.now_ms)
        self.offsets.setdefault(value, offset)

    def first_commit_proposed_after(self, since_ms: int) -> bytes | None:
        for value in self.committed:
            if self.proposed.get(value, -1) >= since_ms:
                return value
        return None


@final
class Nemesis:
    """Random faults between ``start_ms`` and ``end_ms``, then a full heal."""

    def __init__(
        self, cluster: SimCluster, rng: random.Random, *, start_ms: int, end_ms: int
    ) -> None:
        self.cluster = cluster
        self.rng = rng
        self.start_ms = start_ms
        self.end_ms = end_ms
        self.base_profile = cluster.network.profile
        self.injected: dict[str, int] = {}
        self._faults: list[tuple[str, Callable[[], None]]] = [
            ("crash_restart", self._crash_restart),
            ("partition", self._partition),
            ("isolate_leader", self._isolate_leader),
            ("one_way_partition", self._one_way),
            ("packet_loss", self._packet_loss),
            ("pause", self._pause),
            ("resign_leader", self._resign_leader),
            ("wipe_observer", self._wipe_observer),
            ("outsider", self._outsider),
        ]

    def start(self) -> None:
        self.cluster.scheduler.at(self.start_ms, self._next)
        self.cluster.scheduler.at(self.end_ms, self.heal_all)

    @property
    def total(self) -> int:
        return sum(self.injected.values())

    def _next(self) -> None:
        now = self.cluster.clock.now_ms
        if now >= self.end_ms:
            return
        name, fault = self.rng.choice(self._faults)
        fault()
        self.injected[name] = self.injected.get(name, 0) + 1
        self.cluster.scheduler.after(self.rng.randint(100, 600), self._next)

    def _later(self, low: int, high: int, action: Callable[[], None]) -> None:
        at = min(self.cluster.clock.now_ms + self.rng.randint(low, high), self.end_ms)
        self.cluster.scheduler.at(at, action)

    def _pick(self, *, voters_only: bool = False) -> SimNode:
        nodes = [n for n in self.cluster.nodes.values() if n.is_voter or not voters_only]
        return self.rng.choice(nodes)

    def _crash_restart(self) -> None:
        n = self._pick()
        self.cluster.crash(n)
        self._later(20, 800, lambda: self._restart(n))

    def _restart(self, n: SimNode) -> None:
        if n.node is None:
            self.cluster.start(n)

    def _partition(self) -> None:
        ids = list(self.cluster.nodes)
        self.rng.shuffle(ids)
        cut = self.rng.randint(1, len(ids) - 1)
        self.cluster.network.partition(frozenset(ids[:cut]), frozenset(ids[cut:]))
        self._later(100, 1500, self.cluster.network.heal)

    def _isolate_leader(self) -> None:
        n = self.cluster.leader() or self._pick()
        self.cluster.network.isolate(n.node_id)
        self._later(100, 1500, self.cluster.network.heal)

    def _one_way(self) -> None:
        src = self._pick()
        others = [i for i in self.cluster.nodes if i != src.node_id]
        dests = frozenset(self.rng.sample(others, self.rng.randint(1, len(others))))
        self.cluster.network.block_one_way(src.node_id, dests)
        self._later(100, 1500, self.cluster.network.heal)

    def _packet_loss(self) -> None:
        loss = self.rng.uniform(0.1, 0.4)
        self.cluster.network.profile = self.base_profile.lossy(loss, delay_factor=4)
        self._later(100, 1000, self._restore_links)

    def _restore_links(self) -> None:
        self.cluster.network.profile = self.base_profile

    def _pause(self) -> None:
        n = self._pick()
        self.cluster.pause(n)
        self._later(20, 800, lambda: self.cluster.resume(n))

    def _resign_leader(self) -> None:
        n = self.cluster.leader()
        if n is not None and n.node is not None:
            n.node.resign(self.cluster.clock.now_ms)
            self.cluster._after_activity(n)

    def _wipe_observer(self) -> None:
        if self.cluster.dynamic_voters:
            # NB: a node whose disk is lost must not become a voter on the leader's memory of
            # its old fetch offset; Kafka tells the two apart by the replica's directory id
            # (KIP-853), which kraft does not have yet, so these runs lose no disks.
            self._crash_restart()
            return
        observers = [n for n in self.cluster.nodes.values() if not n.is_voter]
        if not observers:
            self._crash_restart()
            return
        n = self.rng.choice(observers)
        self.cluster.wipe(n)
        self._later(20, 500, lambda: self._restart(n))

    def _outsider(self) -> None:
        """A burst of forged messages from the outsider or an observer's id."""
        cluster = self.cluster
        if cluster.dynamic_voters:
            # NB: with the voter set in the log (KIP-853) a Vote from any id is processed
            # (Raft thesis §4.1); only authenticated transport keeps forgers out.
            self._crash_restart()
            return
        voters = sorted(cluster.voter_ids)
        sources = [OUTSIDER_ID, *(i for i in cluster.nodes if i not in cluster.voter_ids)]
        for _ in range(self.rng.randint(1, 5)):
            msg = forge_message(
                self.rng,
                source=self.rng.choice(sources),
                destination=self.rng.choice(list(cluster.nodes)),
                voters=voters,
            )
            cluster.network.send(msg)

    def heal_all(self) -> None:
        cluster = self.cluster
        cluster.network.heal()
        cluster.network.profile = self.base_profile
        for n in cluster.nodes.values():
            if n.node is None:
                cluster.start(n)
            elif n.paused:
                cluster.resume(n)


__all__ = ["Nemesis", "Workload"]
