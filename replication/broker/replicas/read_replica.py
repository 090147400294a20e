"""Fetch from the closest replica (KIP-392) in the broker: which replica serves a consumer.

`BrokerService`'s consumer fetch asks two things here:

- `consumer_readable`: the replica of this broker that may answer a consumer's fetch. Kafka's
  ``FetchParams.fetchOnlyLeader``: a consumer that sent client metadata (Fetch v11+, and every
  gRPC fetch: kraft's clients are newer) may read from a follower, which serves it up to its
  own high watermark (learned from its leader's fetch responses); an older one only from the
  leader. A quorum-mode (Raft) follower serves it the same way, up to the commit offset its
  Raft leader told it.
- `preferred_read_replica`: on the leader, the follower to send this consumer to (answered
  with no records and ``preferred_read_replica``, as Kafka does), from the pure selector
  `replication.core.replica_selector` over the leader's view of its followers (an ISR
  leader's follower states, or a Raft leader's progress of its voters).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kraft.types import TopicPartition
from replication.core.replica_selector import (
    ReplicaView,
    read_replica_candidates,
)
from replication.core.replica_selector import (
    preferred_read_replica as select_preferred,
)
from replication.driver.select import follower_views, reads_as_follower

if TYPE_CHECKING:
    from replication.broker.host import ReplicaHost, ServedReplica


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientMetadata:
    """What a consumer's fetch says of its client (Kafka's ``ClientMetadata``, Fetch v11+)."""

    rack_id: str = ""
    """``client.rack``; empty: none."""
    listener: str = ""
    """The listener the fetch came in on: the preferred replica must be reachable there."""


def client_metadata(rack_id: str, listener: str, api_version: int) -> ClientMetadata | None:
    """The client metadata of a consumer fetch; None for Fetch below v11 (no ``rack_id``:
    Kafka serves those from the leader only). ``api_version`` -1: gRPC, always present."""
    if 0 <= api_version < 11:
        return None
    return ClientMetadata(rack_id=rack_id, listener=listener)


def consumer_readable(
    replicas: Mapping[TopicPartition, ServedReplica],
    tp: TopicPartition,
    client: ClientMetadata | None,
) -> ServedReplica | None:
    """This broker's replica of ``tp`` that may serve the consumer, or None
    (NOT_LEADER_OR_FOLLOWER, or UNKNOWN_TOPIC_OR_PARTITION for an unknown partition)."""
    replica = replicas.get(tp)
    if replica is None:
        return None
    driver = replica.driver
    if driver.is_leader or (client is not None and reads_as_follower(driver)):
        return replica
    return None


def preferred_read_replica(
    host: ReplicaHost,
    replica: ServedReplica,
    client: ClientMetadata | None,
    fetch_offset: int,
    *,
    selector: str | None,
    now_ms: int,
) -> int | None:
    """The follower this broker's leading ``replica`` sends the consumer to, or None (read
    here), by ``selector`` (the broker's ``replica.selector.class``)."""
    if client is None or not client.rack_id:
        return None
    if selector is None or not replica.driver.is_leader:
        return None
    followers, in_sync = follower_views(replica.driver)
    local_id = host.node_id
    racks = {
        broker_id: registration.rack
        for broker_id, registration in host.image.brokers.items()
        if not registration.fenced and registration.endpoint(client.listener) is not None
    }
    own = ReplicaView(
        broker_id=local_id,
        rack=racks.get(local_id),
        log_end_offset=replica.log.log_end_offset,
        time_since_last_caught_up_ms=0,
    )
    candidates = read_replica_candidates(
        leader=own,
        followers=followers,
        in_sync_replicas=in_sync,
        racks=racks,
        fetch_offset=fetch_offset,
        now_ms=now_ms,
    )
    return select_preferred(selector, client.rack_id, own, candidates)


__all__ = ["ClientMetadata", "client_metadata", "consumer_readable", "preferred_read_replica"]
