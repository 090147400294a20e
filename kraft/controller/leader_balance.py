"""Automatic leader balancing: move leadership back to the preferred replicas (pure).

Theory of operation
-------------------
A partition's *preferred leader* is the first replica of its assignment; placement spreads the
first replicas evenly, so when every partition is led by its preferred replica, leadership is
balanced. A broker failure moves leadership elsewhere and nothing moves it back: the broker
rejoins as a follower. Kafka's controller checks every ``leader.imbalance.check.interval.seconds``
(default 300) and, where ``auto.leader.rebalance.enable`` (default true), runs a preferred
election for the partitions of every broker whose *imbalance ratio* exceeds
``leader.imbalance.per.broker.percentage`` (default 10)::

    imbalance(b) = |{p : preferred(p) == b and leader(p) != b}| / |{p : preferred(p) == b}|

(Kafka's ``KafkaController.checkAndTriggerAutoLeaderRebalance``; the KRaft controller keeps the
keys and the periodic task, ``QuorumController.maybeScheduleNextBalancePartitionLeaders``.)

Only partitions whose preferred replica is an unfenced member of the ISR are candidates: the
election would fail for the others (Kafka's ``PartitionChangeBuilder`` refuses it the same way).
One check elects at most `MAX_ELECTIONS_PER_CHECK` partitions (Kafka's
``maxElectionsPerImbalance``, 1,000); the rest wait for the next check, which then comes after
`FOLLOW_UP_DELAY_MS` instead of the full interval, so a large move is paced, never one huge
batch.

`LeaderBalancer` holds only the time of the next check; `ControllerCore.tick` asks it
(`maybe_balance`) and `ControllerCore.poll` reports its deadline, so the shell needs no timer of
its own. A controller that becomes active starts a fresh interval (``reset``), as Kafka's does.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Final, final

from kraft.controller.messages import ElectionType, ElectLeadersRequest
from kraft.controller.partition_control import handle_elect_leaders
from kraft.controller.quorum_partitions import is_quorum_topic
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import MetadataRecord
from kraft.types import TopicPartition

MAX_ELECTIONS_PER_CHECK: Final = 1_000
"""Kafka's ``ReplicationControlManager.maxElectionsPerImbalance``: preferred elections one check
may write; the rest follow after `FOLLOW_UP_DELAY_MS`."""

FOLLOW_UP_DELAY_MS: Final = 100
"""How soon the next check comes when the last one left imbalanced partitions behind."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderBalanceConfig:
    """[auto.leader.rebalance.enable, leader.imbalance.check.interval.seconds,
    leader.imbalance.per.broker.percentage]"""

    enabled: bool = True
    check_interval_ms: int = 300_000
    imbalance_percentage: int = 10


def broker_imbalance(image: MetadataImage) -> dict[int, tuple[int, int]]:
    """Per preferred broker: (partitions it prefers but does not lead, partitions it prefers).
    Quorum-mode partitions are left out: their Raft vote elects their leaders."""
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for topic, _index, p in image.iter_partitions():
        preferred = p.preferred_leader
        if preferred < 0 or is_quorum_topic(image, topic.name):
            continue
        entry = counts[preferred]
        entry[1] += 1
        if p.leader != preferred:
            entry[0] += 1
    return {b: (c[0], c[1]) for b, c in counts.items()}


def imbalanced_partitions(
    image: MetadataImage, imbalance_percentage: int, limit: int = MAX_ELECTIONS_PER_CHECK
) -> list[TopicPartition]:
    """Partitions to move back to their preferred leader: those of every broker whose imbalance
    ratio exceeds ``imbalance_percentage``, whose preferred replica is an unfenced ISR member
    (at most ``limit`` of them, in image order)."""
    over = {
        broker
        for broker, (not_led, preferred) in broker_imbalance(image).items()
        if preferred and not_led * 100 > imbalance_percentage * preferred
    }
    out: list[TopicPartition] = []
    if not over:
        return out
    for topic, index, p in image.iter_partitions():
        preferred = p.preferred_leader
        if (
            preferred in over
            and not is_quorum_topic(image, topic.name)
            and p.leader != preferred
            and preferred in p.isr
            and image.is_active_broker(preferred)
        ):
            out.append(TopicPartition(topic.name, index))
            if len(out) >= limit:
                break
    return out


@final
class LeaderBalancer:
    """When to check leader balance next, and the check itself (see the module docstring)."""

    def __init__(
        self,
        config: LeaderBalanceConfig,
        *,
        max_elections: int = MAX_ELECTIONS_PER_CHECK,
        elr_enabled: bool = False,
    ) -> None:
        self.config = config
        self.elr_enabled = elr_enabled
        self.max_elections = max_elections
        self._next_check_ms: int | None = None

    def reset(self, now_ms: int) -> None:
        """Start a fresh interval (on becoming the active controller)."""
        self._next_check_ms = now_ms + self.config.check_interval_ms

    def next_deadline_ms(self) -> int | None:
        """When `maybe_balance` next has work to do (None: never, balancing is off)."""
        if not self.config.enabled:
            return None
        return self._next_check_ms

    def maybe_balance(self, image: MetadataImage, now_ms: int) -> tuple[MetadataRecord, ...]:
        """The preferred-election records due at ``now_ms`` (empty when not due or balanced)."""
        if not self.config.enabled:
            return ()
        if self._next_check_ms is None:
            self.reset(now_ms)
        assert self._next_check_ms is not None
        if now_ms < self._next_check_ms:
            return ()
        targets = imbalanced_partitions(image, self.config.imbalance_percentage, self.max_elections)
        if not targets:
            self._next_check_ms = now_ms + self.config.check_interval_ms
            return ()
        result = handle_elect_leaders(
            image,
            ElectLeadersRequest(election_type=ElectionType.PREFERRED, partitions=tuple(targets)),
            elr_enabled=self.elr_enabled,
        )
        # More left than one check may move: come back soon (paced), else after the interval.
        more = len(targets) >= self.max_elections
        delay = FOLLOW_UP_DELAY_MS if more else self.config.check_interval_ms
        self._next_check_ms = now_ms + delay
        return result.records


__all__ = [
    "FOLLOW_UP_DELAY_MS",
    "MAX_ELECTIONS_PER_CHECK",
    "LeaderBalanceConfig",
    "LeaderBalancer",
    "broker_imbalance",
    "imbalanced_partitions",
]
