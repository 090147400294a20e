"""A follower's Fetch response stays within its ``max_bytes``
(``replica.fetch.response.max.bytes``) as in Kafka's ``ReplicaManager.readFromLog`` (KIP-74):
partitions are filled in request order, each up to its ``partition_max_bytes`` and what is left
of the response's; only the first partition with records may go past the limits with its first
batch (minOneMessage), so a response always carries at least one batch. The follower
(`LeaderFetcher`) puts the partitions that got records at the end of its next request, so the
ones left out are served first. (A consumer's partitions each still get their first batch:
kraft's Consumer does not rotate its partitions.)"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kraft.types import Epoch, NodeId, Offset, TopicPartition
from replication.broker.replicas.change_event import ChangeEvent
from replication.broker.replicas.fetcher import LeaderFetcher
from replication.broker.replicas.throttle import ThrottleBucket
from replication.broker.service import BrokerService
from replication.core import FollowerFetch, FollowerFetchRequest, LeaderFetchAnswer
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
    FetchPartition,
    FetchPartitionData,
    FetchTopic,
    FetchTopicResponse,
)
from tests.broker.test_follower_fetch_wait import _Driver, _Log

BATCH = 400
"""Every batch of the fake logs is this long."""


@dataclass
class _Replica:
    """A leader's replica holding ``batches`` batches of `BATCH` bytes past any fetch offset;
    a read returns whole batches up to ``max_bytes``, the first one whole even if larger (as
    `SegmentedLog.read` does)."""

    batches: int
    driver: _Driver = field(default_factory=_Driver)
    log: _Log = field(default_factory=_Log)
    high_watermark: int = 5
    changed: ChangeEvent = field(default_factory=ChangeEvent)
    positions: list[int] = field(default_factory=list)

    def handle_follower_fetch(
        self, fetch: FollowerFetch, max_bytes: int, *, read: bool = True, min_one: bool = True
    ) -> tuple[LeaderFetchAnswer, bytes]:
        self.positions.append(fetch.fetch_offset)  # the follower's position counts either way
        answer = LeaderFetchAnswer(
            high_watermark=Offset(self.high_watermark),
            log_start_offset=Offset(0),
            log_end_offset=Offset(10),
        )
        whole = min(self.batches, max(1 if min_one else 0, max_bytes // BATCH))  # as the log
        return answer, b"r" * (BATCH * whole) if read and self.batches else b""


@dataclass
class _Host:
    logs: dict[TopicPartition, _Replica]
    stopping: bool = False
    leader_throttle: ThrottleBucket = field(default_factory=ThrottleBucket)

    @property
    def replicas(self) -> dict[TopicPartition, _Replica]:
        return self.logs

    def is_adding_replica(self, tp: TopicPartition, replica_id: int) -> bool:
        return False


def _fetch(host: _Host, max_bytes: int, partition_max_bytes: int) -> list[int]:
    """A follower's fetch of every partition of ``host`` at once: each partition's bytes."""
    request = BrokerFetchRequest(
        replica_id=2,
        replica_epoch=1,
        max_wait_ms=0,
        max_bytes=max_bytes,
        topics=(
            FetchTopic(
                topic="t",
                partitions=tuple(
                    FetchPartition(
                        partition=tp.partition,
                        fetch_offset=4,
                        current_leader_epoch=3,
                        partition_max_bytes=partition_max_bytes,
                    )
                    for tp in host.logs
                ),
            ),
        ),
    )
    response = asyncio.run(BrokerService(host).fetch(request))  # type: ignore[arg-type]
    return [len(p.records) for t in response.responses for p in t.partitions]


def _host(*batches: int) -> _Host:
    return _Host({TopicPartition("t", i): _Replica(n) for i, n in enumerate(batches)})


def test_a_follower_fetch_stops_adding_records_once_the_response_max_bytes_is_reached() -> None:
    host = _host(3, 3, 3, 3, 3)
    sizes = _fetch(host, max_bytes=2000, partition_max_bytes=1000)
    # 800 + 800 fill 1600 of 2000; one more batch fits; the rest wait for the next fetch
    assert sizes == [800, 800, 400, 0, 0]
    assert sum(sizes) <= 2000
    # every partition was answered, and its follower's position counted
    assert all(replica.positions == [4] for replica in host.logs.values())


def test_a_batch_larger_than_what_is_left_waits_for_the_next_fetch() -> None:
    sizes = _fetch(_host(3, 3, 3), max_bytes=1000, partition_max_bytes=1000)
    assert sizes == [800, 0, 0]  # 200 left: the next partition's first batch does not fit


def test_the_first_partition_with_records_gets_its_first_batch_even_past_the_limits() -> None:
    # the first partition has nothing; the second's first batch is larger than both limits
    assert _fetch(_host(0, 3, 3), max_bytes=100, partition_max_bytes=100) == [0, 400, 0]


def follower_request(partition: int, fetch_id: int) -> FollowerFetchRequest:
    return FollowerFetchRequest(
        fetch_id=fetch_id,
        topic_partition=TopicPartition("t", partition),
        leader_id=NodeId(1),
        replica_id=NodeId(2),
        broker_epoch=7,
        fetch_offset=Offset(0),
        last_fetched_epoch=Epoch(0),
        current_leader_epoch=Epoch(0),
        log_start_offset=Offset(0),
    )


def test_the_follower_asks_first_for_the_partitions_the_last_response_left_out() -> None:
    orders: list[list[int]] = []

    async def send(leader_id: int, wire: BrokerFetchRequest) -> BrokerFetchResponse:
        order = [p.partition for t in wire.topics for p in t.partitions]
        orders.append(order)
        parts = tuple(  # the response's room holds the first two partitions' records
            FetchPartitionData(partition_index=p, records=b"r" if i < 2 else b"")
            for i, p in enumerate(order)
        )
        return BrokerFetchResponse(responses=(FetchTopicResponse(topic="t", partitions=parts),))

    async def scenario() -> None:
        fetcher = LeaderFetcher(1, replica_id=2, send=send, max_wait_ms=500, max_bytes=1 << 20)
        for fetch_id in range(3):
            await asyncio.gather(*(fetcher.fetch(follower_request(p, fetch_id)) for p in range(5)))
        await fetcher.close()

    asyncio.run(scenario())
    assert orders == [[0, 1, 2, 3, 4], [2, 3, 4, 0, 1], [4, 0, 1, 2, 3]]
