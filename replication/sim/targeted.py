"""The targeted nemesis of the broker simulation: faults aimed at the moments that break
replication protocols, not at random times.

A random fault rarely lands in the few milliseconds where a protocol is exposed (Kafka's
pre-KIP-101 truncation was caught once in 53 seeds). This nemesis arms one trigger at a time,
waits for the cluster to reach the moment it aims at (`BrokerCluster.notify`), strikes there,
and arms the next one a little later. All of it is drawn from its own seeded generator, so a
seed still replays exactly. The triggers:

- ``kill_leader_after_fetch`` (KIP-101's scenarios): right after a follower's fetch moved a
  partition leader's high watermark (the records below it are now acknowledged, but the
  followers learn the new high watermark only with their next fetch), the leader is killed;
  the next leader that the metadata names is killed too, so the last replica of the ISR
  becomes the leader with exactly what it had fetched. A follower that truncates to its high
  watermark when the leadership moves (Kafka before KIP-101) loses acknowledged records.
- ``partition_during_isr_change``: as a partition leader sends an AlterPartition (an ISR
  shrink or expand), either the active controller is cut from the other controllers while
  every link duplicates what it carries (the request reaches it twice; its proposal cannot
  commit and its leadership is lost), or the leader is cut from the controllers, or isolated.
  A controller that answers from its uncommitted image (``unsafe_answer_uncommitted_reads``)
  answers the duplicate with the outcome of a change that is then truncated, and the
  partition waits forever.
- ``partition_during_topic_creation`` (in a third of the seeds; the one targeted fault before
  the window, since the topic is created once, at the start): as the admin client sends
  CreateTopics to the active controller, that controller is cut from the others while the
  links duplicate. A controller answering from its uncommitted image answers the duplicate
  TOPIC_ALREADY_EXISTS from a creation that is then lost: the topic never exists.
- ``correlated_power_loss`` (only when every partition is a quorum, ``--mode quorum``): every
  broker loses power at the same instant. A quorum partition fsyncs before it acknowledges,
  so it loses nothing; with ``quorum.write.caching`` it acknowledges before the fsync and does.
- ``power_loss_at_min_isr``: once a partition's ISR is down to ``min.insync.replicas``
  members (a replica is catching up after a restart) and nothing else is going on, one of
  those members loses power (its unflushed log tail). The other one still holds every
  acknowledged record. NB: a power loss on the *only* ISR member is outside what Kafka
  promises without fsync (KIP-966's unclean recovery is about it), so it is never injected;
  neither is one while any partition's ISR is below ``min.insync.replicas``.

Process crashes here never lose the log; the power loss marks the broker ``tainted`` in the
random nemesis, which then waits, like this one, until it is back in every ISR.
"""

from __future__ import annotations

import random
from typing import Final, final

from kraft.sim.network import LinkProfile
from kraft.types import TopicPartition
from replication.sim.broker import SimBroker
from replication.sim.cluster import BrokerCluster
from replication.sim.workload import Nemesis

TARGETED_KINDS: Final = (
    "kill_leader_after_fetch",
    "partition_during_isr_change",
    "power_loss_at_min_isr",
)
SHAPES: Final = ("controllers", "controllers", "controllers", "leader_from_controllers", "leader")
"""``partition_during_isr_change``'s shapes, weighted: the controllers' cut is the one that
loses a controller's uncommitted change."""
ARM_GAP_MS: Final = (20, 200)
"""How long after a trigger fired (or expired) the next one is armed."""
ARMED_FOR_MS: Final = 600
"""A trigger that has not fired this long after it was armed is dropped."""
FOLLOW_UP_ARMED_FOR_MS: Final = 2500
"""The same for the follow-up of a double leader kill: the killed brokers restart, catch up
and rejoin the ISR within this."""


@final
class TargetedNemesis:
    """Arms the triggers of the module docstring one at a time in ``base``'s window."""

    def __init__(self, cluster: BrokerCluster, rng: random.Random, *, base: Nemesis) -> None:
        self.cluster = cluster
        self.rng = rng
        self.base = base
        self.armed: str | None = None
        self.armed_until_ms = 0
        self.target: TopicPartition | None = None
        self.chase: tuple[TopicPartition, int, int] | None = None
        """``kill_leader_after_fetch``'s second step: (partition, the leader killed first, until
        when) to kill the next leader the metadata names."""
        self.at_creation = False
        """Whether ``partition_during_topic_creation`` is armed (until it fires)."""
        self.follow_up: str | None = None
        """The trigger to arm next instead of a random one."""
        cluster.on_event = self._on_event

    def start(self) -> None:
        self.at_creation = self.rng.random() < 1 / 3
        self.cluster.scheduler.at(self.base.start_ms + self.rng.randint(*ARM_GAP_MS), self._arm)

    def _arm(self) -> None:
        now = self.cluster.clock.now_ms
        if now >= self.base.end_ms:
            self.armed = None
            return
        if self.base.all_quorum() and self.rng.random() < 0.2:
            self._correlated_power_loss()
            return
        # NB: after a double leader kill, the ISR is down to one and grows back as the killed
        # brokers return: the moment of ISR changes that ``partition_during_isr_change`` aims at.
        follow_up = self.follow_up
        self.follow_up = None
        self.armed = follow_up or self.rng.choice(TARGETED_KINDS)
        self.armed_until_ms = now + (FOLLOW_UP_ARMED_FOR_MS if follow_up else ARMED_FOR_MS)
        isr_partitions = [tp for tp in self.cluster.topic_partitions() if not self._quorum(tp)]
        self.target = self.rng.choice(isr_partitions) if isr_partitions else None
        if self.target is None and self.armed == "kill_leader_after_fetch":
            self.armed = "partition_during_isr_change"
        until = self.armed_until_ms
        self.cluster.scheduler.at(until, lambda: self._expire(until))

    def _expire(self, until: int) -> None:
        if self.armed is not None and self.armed_until_ms == until:
            self._fired(None)

    def _fired(self, name: str | None) -> None:
        """The armed trigger struck (``name``) or expired (None): arm the next one later."""
        if name is not None:
            injected = self.base.stats.injected
            injected[name] = injected.get(name, 0) + 1
        self.armed = None
        self.cluster.scheduler.after(self.rng.randint(*ARM_GAP_MS), self._arm)

    def _quorum(self, tp: TopicPartition) -> bool:
        return self.cluster.is_quorum(tp)

    # --- triggers -----------------------------------------------------------------------------

    def _on_event(self, kind: str, node: int, tp: TopicPartition | None) -> None:
        if self.cluster.clock.now_ms >= self.base.end_ms:
            return
        if kind == "create_topics_sent" and self.at_creation:
            active = self.cluster.active_controller()
            if active is not None and active.node_id == node:
                self.at_creation = False
                self._cut_active_controller(active.node_id)
                injected = self.base.stats.injected
                name = "partition_during_topic_creation"
                injected[name] = injected.get(name, 0) + 1
            return
        if kind == "metadata" and self.chase is not None:
            self._chase_leader()
        armed = self.armed
        if armed is None or self.base.tainted is not None:
            return
        if (
            armed == "kill_leader_after_fetch"
            and kind == "high_watermark_advanced"
            and tp is not None
            and tp == self.target
        ):
            self._kill_leader_after_fetch(node, tp)
        elif armed == "partition_during_isr_change" and kind == "alter_sent":
            self._partition_during_isr_change(node)
        elif armed == "power_loss_at_min_isr" and kind == "metadata":
            self._power_loss_at_min_isr()

    def _crash(self, broker: SimBroker, *, power_loss: bool = False) -> None:
        broker.crash(power_loss=power_loss)

        def restart() -> None:
            if not broker.up:
                broker.start()

        self.base.later(300, 900, restart, rng=self.rng)

    def _kill_leader_after_fetch(self, leader_id: int, tp: TopicPartition) -> None:
        leader = self.cluster.brokers[leader_id]
        self._crash(leader)
        self.chase = (tp, leader_id, self.cluster.clock.now_ms + 1500)
        self.follow_up = "partition_during_isr_change"
        self._fired("kill_leader_after_fetch")

    def _chase_leader(self) -> None:
        assert self.chase is not None
        tp, first, until_ms = self.chase
        if self.cluster.clock.now_ms > until_ms:
            self.chase = None
            return
        leader = self.cluster.brokers.get(self.cluster.leader_of(tp))
        if leader is None or leader.node_id == first:
            return
        self.chase = None
        if leader.up:
            self._crash(leader)

    def _partition_during_isr_change(self, broker: int) -> None:
        cluster = self.cluster
        network = cluster.network
        active = cluster.active_controller()
        shape = self.rng.choice(SHAPES)
        if shape == "controllers" and active is not None:
            self._cut_active_controller(active.node_id)
            self._fired("partition_during_isr_change")
            return
        elif shape == "leader_from_controllers":
            network.partition(frozenset({broker}), frozenset(cluster.controller_ids))
        else:
            network.isolate(broker)
        self.base.later(100, 1200, network.heal, rng=self.rng)
        self._fired("partition_during_isr_change")

    def _cut_active_controller(self, active: int) -> None:
        """Cut ``active`` from the other controllers (not from brokers or clients), and let
        every link duplicate for a moment: what is being sent now arrives twice."""
        network = self.cluster.network
        others = frozenset(c for c in self.cluster.controller_ids if c != active)
        network.partition(frozenset({active}), others)
        base = self.base.base_profile
        network.profile = LinkProfile(
            delay_min_ms=base.delay_min_ms, delay_max_ms=max(base.delay_max_ms, 5), duplicate=1.0
        )
        self.base.later(20, 200, self._restore_links, rng=self.rng)
        # NB: long enough for the others to elect a leader without the proposal
        # (fetch_timeout_ms + an election), so that it is lost.
        self.base.later(400, 1200, network.heal, rng=self.rng)

    def _restore_links(self) -> None:
        self.cluster.network.profile = self.base.base_profile

    def _correlated_power_loss(self) -> None:
        """Every broker loses power at once: only a topic whose every partition is a quorum
        (which fsyncs before it acknowledges) promises to survive it."""
        for broker in self.cluster.brokers.values():
            if broker.up:
                self._crash(broker, power_loss=True)
        self._fired("correlated_power_loss")

    def _power_loss_at_min_isr(self) -> None:
        cluster = self.cluster
        if not self.base.quiet(full_isr=False):
            return
        need = cluster.config.min_insync_replicas
        at_min: list[frozenset[int]] = []
        for tp in cluster.topic_partitions():
            in_sync = cluster.in_sync(tp)
            registration = cluster.registration(tp)
            if in_sync is None or registration is None or len(in_sync) < need:
                return  # a partition below min.insync.replicas: no power loss anywhere
            if not self._quorum(tp) and len(in_sync) == need < len(registration.replicas):
                at_min.append(in_sync)
        if not at_min:
            return
        victim = cluster.brokers[self.rng.choice(sorted(self.rng.choice(at_min)))]
        self._crash(victim, power_loss=True)
        self.base.tainted = victim
        self._fired("power_loss_at_min_isr")


__all__ = ["TARGETED_KINDS", "TargetedNemesis"]
