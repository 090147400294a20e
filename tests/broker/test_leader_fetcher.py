"""`LeaderFetcher`: the follower fetches parked for one leader go out as ONE Fetch that asks for
every partition's available data (no one-batch limit)."""

from __future__ import annotations

import asyncio

from kraft.types import TopicPartition
from replication.broker.replicas.fetcher import LeaderFetcher
from replication.core import FollowerFetchRequest
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
    FetchPartitionData,
    FetchTopicResponse,
)
from storage.errors import ErrorCode


def request(partition: int, fetch_id: int) -> FollowerFetchRequest:
    return FollowerFetchRequest(
        fetch_id=fetch_id,
        topic_partition=TopicPartition("t", partition),
        leader_id=1,
        replica_id=2,
        broker_epoch=7,
        fetch_offset=10 * partition,
        last_fetched_epoch=0,
        current_leader_epoch=0,
        log_start_offset=0,
    )


def test_parked_partitions_share_one_fetch_sized_by_the_replica_fetch_settings() -> None:
    sent: list[BrokerFetchRequest] = []

    async def send(leader_id: int, wire: BrokerFetchRequest) -> BrokerFetchResponse:
        sent.append(wire)
        parts = tuple(
            FetchPartitionData(partition_index=p.partition, high_watermark=5, records=b"r" * 3)
            for t in wire.topics
            for p in t.partitions
        )
        return BrokerFetchResponse(responses=(FetchTopicResponse(topic="t", partitions=parts),))

    async def scenario() -> None:
        fetcher = LeaderFetcher(
            1,
            replica_id=2,
            send=send,
            max_wait_ms=500,
            max_bytes=1 << 20,
            min_bytes=1,
            response_max_bytes=10 << 20,
        )
        answers = await asyncio.gather(*(fetcher.fetch(request(p, p)) for p in range(3)))
        await fetcher.close()
        assert [a.error_code for a in answers] == [ErrorCode.NONE] * 3
        assert [a.records for a in answers] == [b"rrr"] * 3

    asyncio.run(scenario())
    (wire,) = sent
    assert (wire.min_bytes, wire.max_wait_ms, wire.max_bytes) == (1, 500, 10 << 20)
    assert [p.partition_max_bytes for t in wire.topics for p in t.partitions] == [1 << 20] * 3
