"""`MembershipChanger`: KIP-853 voter changes, asked of whoever leads, under the nemesis.

Every few hundred simulated milliseconds it asks the leader to add a node that is not a voter
(an observer: it must be caught up, or the leader refuses with a retriable error) or to
remove a voter (the leader itself too), keeping between ``min_voters`` and ``max_voters``.
Refusals (another change uncommitted, a new leader that has not committed yet, a node not
caught up, no leader) are counted, not errors: the point is to race the changes against
crashes, partitions and elections, while `RaftChecker` checks after every event that no two
leaders share an epoch, nothing committed is lost, and consecutive voter sets overlap.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import final

from kraft.sim.cluster import SimCluster
from kraft.types import NodeId
from storage.errors import KraftError


@dataclass(slots=True)
class MembershipStats:
    appended: int = 0
    """VotersRecords a leader appended (committed or later truncated)."""
    refused: int = 0
    added: int = 0
    removed: int = 0


@final
class MembershipChanger:
    """Random add/remove voter requests between ``start_ms`` and ``end_ms``."""

    def __init__(
        self,
        cluster: SimCluster,
        rng: random.Random,
        *,
        start_ms: int,
        end_ms: int,
        min_voters: int = 1,
        max_voters: int = 5,
        interval_ms: tuple[int, int] = (80, 400),
    ) -> None:
        assert cluster.dynamic_voters, "voter changes need SimCluster(dynamic_voters=True)"
        self.cluster = cluster
        self.rng = rng
        self.start_ms = start_ms
        self.end_ms = end_ms
        self.min_voters = min_voters
        self.max_voters = max_voters
        self.interval_ms = interval_ms
        self.stats = MembershipStats()

    def start(self) -> None:
        self.cluster.scheduler.at(self.start_ms, self._tick)

    def _tick(self) -> None:
        cluster = self.cluster
        now = cluster.clock.now_ms
        if now >= self.end_ms:
            return
        self.change_once()
        cluster.scheduler.after(self.rng.randint(*self.interval_ms), self._tick)

    def change_once(self) -> bool:
        """Ask the leader for one random change; True if it appended a VotersRecord."""
        cluster = self.cluster
        n = cluster.leader()
        if n is None or n.node is None:
            self.stats.refused += 1
            return False
        node = n.node
        voters = node.voters
        outside = sorted(NodeId(i) for i in cluster.nodes if i not in voters)
        add = bool(outside) and (
            len(voters) <= self.min_voters
            or (len(voters) < self.max_voters and self.rng.random() < 0.5)
        )
        if not add and len(voters) <= self.min_voters:
            self.stats.refused += 1
            return False
        now = cluster.clock.now_ms
        try:
            if add:
                target = self.rng.choice(outside)
                node.add_voter(target, f"sim-{target}:9093", now)
                self.stats.added += 1
            else:
                target = self.rng.choice(sorted(voters))
                node.remove_voter(target, now)
                self.stats.removed += 1
        except KraftError:
            self.stats.refused += 1
            return False
        finally:
            cluster._after_activity(n)
        self.stats.appended += 1
        return True


__all__ = ["MembershipChanger", "MembershipStats"]
