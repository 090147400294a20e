"""Fetch from the closest replica (KIP-392): the replica a partition leader names to a consumer.

A consumer that sends its rack (``client.rack``, Fetch v11+) may read from a follower. The
leader decides which one, with the broker's ``replica.selector.class`` (Kafka's
``ReplicaSelector`` plug-in), and answers that consumer's fetch with no records and
``preferred_read_replica`` set; the consumer then fetches from that replica, which serves it up
to its own high watermark (`replication.broker.service`). Pure functions, after Kafka's
``ReplicaManager.findPreferredReadReplica`` and ``RackAwareReplicaSelector``:

- `read_replica_candidates`: the leader, plus every follower that is in the ISR and holds the
  fetch offset (log start offset <= fetch offset <= its log end offset) and that the client can
  reach (an endpoint on the client's listener). A lagging follower is left out: were it
  picked, the consumer could keep falling behind the producer with it.
- `select`: ``LeaderSelector`` picks the leader; ``RackAwareReplicaSelector`` picks the leader
  when the client names no rack, when no candidate is in its rack or when the leader is; else
  the most caught-up candidate in the rack (highest log end offset, then the most recent catch
  up; kraft breaks a last tie by the lowest broker id, so the answer is deterministic).
- `preferred_read_replica`: the selected replica's id, or None when it is the leader (Kafka
  never sends the leader back as a preferred read replica).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from replication.core.high_watermark import ReplicaState

LEADER_SELECTOR: Final = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR: Final = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS: Final = (LEADER_SELECTOR, RACK_AWARE_SELECTOR)
"""The ``replica.selector.class`` values kraft has (Kafka's two built-in selectors)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaView:
    """One replica a consumer could read from (Kafka's ``ReplicaView``)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int
    """0 for the leader."""


def read_replica_candidates(
    *,
    leader: ReplicaView,
    followers: Mapping[int, ReplicaState],
    in_sync_replicas: Collection[int],
    racks: Mapping[int, str | None],
    fetch_offset: int,
    now_ms: int,
) -> tuple[ReplicaView, ...]:
    """The leader and the followers a consumer at ``fetch_offset`` may be sent to.

    Args:
        leader: the leader's own view (its log end offset).
        followers: the leader's tracking of each follower (`PartitionLeader.follower_state`).
        in_sync_replicas: the partition's ISR.
        racks: the rack of every broker reachable on the client's listener (unfenced, with an
            endpoint there); a follower missing from it is left out.
        fetch_offset: the consumer's fetch offset.
        now_ms: the time of the fetch.
    """
    views = [leader]
    for broker_id, state in sorted(followers.items()):
        if broker_id == leader.broker_id or broker_id not in in_sync_replicas:
            continue
        if broker_id not in racks:
            continue
        if not state.log_start_offset <= fetch_offset <= state.log_end_offset:
            continue
        views.append(
            ReplicaView(
                broker_id=broker_id,
                rack=racks[broker_id],
                log_end_offset=state.log_end_offset,
                time_since_last_caught_up_ms=now_ms - state.last_caught_up_time_ms,
            )
        )
    return tuple(views)


def select(
    selector: str, client_rack: str, leader: ReplicaView, candidates: Iterable[ReplicaView]
) -> ReplicaView:
    """The replica ``selector`` (a `SELECTORS` name) names for a client in ``client_rack``."""
    if selector == LEADER_SELECTOR or not client_rack:
        return leader
    assert selector == RACK_AWARE_SELECTOR, selector
    same_rack = [c for c in candidates if c.rack == client_rack]
    if not same_rack or any(c.broker_id == leader.broker_id for c in same_rack):
        return leader
    return max(
        same_rack,
        key=lambda c: (c.log_end_offset, -c.time_since_last_caught_up_ms, -c.broker_id),
    )


def preferred_read_replica(
    selector: str | None, client_rack: str, leader: ReplicaView, candidates: Iterable[ReplicaView]
) -> int | None:
    """The broker id to answer in ``preferred_read_replica``; None: read from the leader
    (no selector configured, or it picked the leader)."""
    if selector is None:
        return None
    chosen = select(selector, client_rack, leader, candidates)
    return None if chosen.broker_id == leader.broker_id else chosen.broker_id


__all__ = [
    "LEADER_SELECTOR",
    "RACK_AWARE_SELECTOR",
    "SELECTORS",
    "ReplicaView",
    "preferred_read_replica",
    "read_replica_candidates",
    "select",
]
