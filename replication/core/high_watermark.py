"""Follower progress as the leader sees it, and the high-watermark rule: small, math-only.

`ReplicaState` is Kafka's ``ReplicaState`` (``kafka.cluster.Replica``): each follower's log end
offset (LEO, the offset of its latest fetch) and the two times the ISR rules need:

- ``last_caught_up_time_ms``: the latest time ``t`` such that the follower's most recent fetch
  offset was at or past the leader's LEO as of ``t``. `update_fetch_state` computes it the way
  ``Replica.updateFetchState`` does: the time of this fetch if it reached the leader's LEO now,
  else the time of the previous fetch if it reached the LEO as of that previous fetch.
- a follower is *caught up* (`is_caught_up`) when its LEO equals the leader's or it caught up
  within ``replica.lag.time.max.ms``; an ISR member that is not gets shrunk out.

`high_watermark_candidate` is ``Partition.maybeIncrementLeaderHW``: the minimum LEO over the
leader and every follower of the *maximal* ISR (KIP-497), plus any follower that is caught up
and eligible to join the ISR (so a follower about to join is not left behind the HW forever),
and nothing at all while the committed ISR is below ``min.insync.replicas`` (KIP-966, Kafka
3.7+: "The HW can only advance if the ISR size is equal or larger than the min ISR"). The
leader then moves its HW to the candidate only if that is an increase: a leader's HW never
moves back.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace

from kraft.metadata.configs import effective_min_isr
from replication.core.log_view import NO_OFFSET

NEVER_MS = -(1 << 62)
"""A time before any ``now_ms``: "never fetched / never caught up". (Kafka uses 0, which is
the distant past of a wall clock but not of a simulated one.)"""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaState:
    """A follower's replication progress, as tracked by the leader (Kafka's ``ReplicaState``)."""

    log_end_offset: int = NO_OFFSET
    """The follower's LEO: the offset of its latest valid fetch (-1: unknown)."""
    log_start_offset: int = NO_OFFSET
    last_fetch_leader_log_end_offset: int = 0
    """The leader's LEO when the previous fetch arrived."""
    last_fetch_time_ms: int = NEVER_MS
    last_caught_up_time_ms: int = NEVER_MS
    broker_epoch: int | None = None
    """The broker epoch of the latest fetch (KIP-380/841); None until the first fetch."""

    def is_caught_up(
        self, leader_log_end_offset: int, now_ms: int, replica_lag_time_ms_max: int
    ) -> bool:
        """Kafka's ``ReplicaState.isCaughtUp``."""
        return (
            leader_log_end_offset == self.log_end_offset
            or now_ms - self.last_caught_up_time_ms <= replica_lag_time_ms_max
        )

    def update_fetch_state(
        self,
        *,
        fetch_offset: int,
        log_start_offset: int,
        fetch_time_ms: int,
        leader_log_end_offset: int,
        broker_epoch: int,
    ) -> ReplicaState:
        """The state after a valid fetch at ``fetch_offset`` (Kafka's
        ``Replica.updateFetchStateOrThrow``); ``leader_log_end_offset`` is the leader's LEO
        when the fetch arrived."""
        if fetch_offset >= leader_log_end_offset:
            caught_up = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            caught_up = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        else:
            caught_up = self.last_caught_up_time_ms
        return ReplicaState(
            log_end_offset=fetch_offset,
            log_start_offset=log_start_offset,
            last_fetch_leader_log_end_offset=leader_log_end_offset,
            last_fetch_time_ms=fetch_time_ms,
            last_caught_up_time_ms=caught_up,
            broker_epoch=broker_epoch,
        )

    def reset(
        self, *, now_ms: int, leader_log_end_offset: int, is_new_leader: bool, in_sync: bool
    ) -> ReplicaState:
        """The state when this broker becomes (or is re-elected) leader (Kafka's
        ``Replica.resetReplicaState``): an ISR member gets a full lag window from now; the
        rest start at `NEVER_MS` so that they neither hold the HW back nor rejoin before a
        fetch. A new leader knows nothing of the follower's log yet."""
        caught_up = now_ms if in_sync else NEVER_MS
        if is_new_leader:
            return ReplicaState(
                last_fetch_leader_log_end_offset=NO_OFFSET, last_caught_up_time_ms=caught_up
            )
        return replace(
            self,
            last_fetch_leader_log_end_offset=leader_log_end_offset,
            last_fetch_time_ms=now_ms if in_sync else NEVER_MS,
            last_caught_up_time_ms=caught_up,
        )


def high_watermark_candidate(
    *,
    leader_log_end_offset: int,
    followers: Mapping[int, ReplicaState],
    maximal_isr: Collection[int],
    isr_size: int,
    min_isr: int,
    now_ms: int,
    replica_lag_time_ms_max: int,
    is_isr_eligible: Callable[[int], bool],
) -> int | None:
    """The offset the leader's HW may rise to, or None while under min ISR (KIP-966).

    Args:
        followers: every follower replica (not the leader) and its state.
        maximal_isr: the maximal ISR (KIP-497); the leader may be in it.
        isr_size: the size of the *committed* ISR.
        min_isr: the effective min.insync.replicas.
        is_isr_eligible: KIP-841 eligibility of a follower to join the ISR.
    """
    if isr_size < min_isr:
        return None
    candidate = leader_log_end_offset
    for replica_id, state in followers.items():
        if state.log_end_offset >= candidate:
            continue
        if replica_id in maximal_isr or (
            state.is_caught_up(leader_log_end_offset, now_ms, replica_lag_time_ms_max)
            and is_isr_eligible(replica_id)
        ):
            candidate = state.log_end_offset
    return candidate


def out_of_sync_replicas(
    *,
    isr: Collection[int],
    leader_id: int,
    followers: Mapping[int, ReplicaState],
    leader_log_end_offset: int,
    now_ms: int,
    replica_lag_time_ms_max: int,
) -> frozenset[int]:
    """The ISR followers to shrink out (Kafka's ``Partition.getOutOfSyncReplicas``): those not
    caught up within ``replica.lag.time.max.ms`` (and any the leader has no state for)."""
    return frozenset(
        r
        for r in isr
        if r != leader_id
        and (
            r not in followers
            or not followers[r].is_caught_up(leader_log_end_offset, now_ms, replica_lag_time_ms_max)
        )
    )


__all__ = [
    "NEVER_MS",
    "ReplicaState",
    "effective_min_isr",
    "high_watermark_candidate",
    "out_of_sync_replicas",
]
