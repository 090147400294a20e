"""What a consumer's next Fetch to one broker carries (Kafka's ``AbstractFetch``'s
``prepareFetchRequests``): its partitions at their positions, fenced by the leader epoch the
metadata names (KIP-320), each a long poll of ``fetch.max.wait.ms``.

Pure: the consumer's shell decides which partitions to fetch from which broker and sends the
requests (`replication.clients.consumer`, `replication.clients.fetches_in_flight`).
"""

from __future__ import annotations

from collections.abc import Mapping

from kraft.types import TopicPartition
from replication.clients.config import ConsumerConfig
from replication.clients.metadata import ClusterSnapshot
from replication.messages import BrokerFetchRequest, FetchPartition, FetchTopic


def build_fetch_request(
    positions: Mapping[TopicPartition, int],
    snapshot: ClusterSnapshot,
    config: ConsumerConfig,
    isolation_level: int,
) -> BrokerFetchRequest:
    """One Fetch of ``positions`` (partition -> the offset to fetch from)."""
    topics: dict[str, list[FetchPartition]] = {}
    for tp, position in positions.items():
        info = snapshot.partition(tp)
        topics.setdefault(tp.topic, []).append(
            FetchPartition(
                partition=tp.partition,
                current_leader_epoch=info.leader_epoch if info else -1,
                fetch_offset=position,
                partition_max_bytes=config.max_partition_fetch_bytes,
            )
        )
    return BrokerFetchRequest(
        max_wait_ms=config.fetch_max_wait_ms,
        min_bytes=config.fetch_min_bytes,
        max_bytes=config.fetch_max_bytes,
        isolation_level=isolation_level,
        topics=tuple(FetchTopic(topic=t, partitions=tuple(p)) for t, p in topics.items()),
        rack_id=config.client_rack,
    )


def all_caught_up(
    positions: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]
) -> bool:
    """Every partition's position is at the end its last fetch reported (``ends``: the high
    watermark, or the last stable offset for read_committed), so a Fetch of them waits for new
    records; False when a partition's end is not known yet."""
    return all(tp in ends and position >= ends[tp] for tp, position in positions.items())


__all__ = ["all_caught_up", "build_fetch_request"]
