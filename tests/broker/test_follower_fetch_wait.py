"""A follower's long-poll Fetch at the leader (`BrokerService.fetch`): it waits on its
partitions' change events (`replication.broker.replicas.change_event`), runs a pass only when one of
them may have records for it, and answers at its deadline with the high watermark of then."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kraft.types import Offset, TopicPartition
from replication.broker.replicas.change_event import ChangeEvent, wait_any
from replication.broker.replicas.throttle import ThrottleBucket
from replication.broker.service import BrokerService
from replication.core import FollowerFetch, LeaderFetchAnswer
from replication.messages import BrokerFetchRequest, FetchPartition, FetchTopic

TP = TopicPartition("t", 0)


@dataclass
class _Driver:
    generation: int = 1
    leader_epoch: int = 3
    offline: object = None
    is_leader: bool = True


@dataclass
class _Log:
    log_start_offset: int = 0
    log_end_offset: int = 10


@dataclass
class _Replica:
    """The leader's replica of TP: `handle_follower_fetch` reads [fetch offset, log end)."""

    driver: _Driver = field(default_factory=_Driver)
    log: _Log = field(default_factory=_Log)
    high_watermark: int = 5
    changed: ChangeEvent = field(default_factory=ChangeEvent)
    passes: int = 0

    def notify(self) -> None:
        self.changed.set()
        self.changed = ChangeEvent()

    def handle_follower_fetch(
        self, fetch: FollowerFetch, max_bytes: int, *, read: bool = True, min_one: bool = True
    ) -> tuple[LeaderFetchAnswer, bytes]:
        self.passes += 1
        answer = LeaderFetchAnswer(
            high_watermark=Offset(self.high_watermark),
            log_start_offset=Offset(self.log.log_start_offset),
            log_end_offset=Offset(self.log.log_end_offset),
        )
        return answer, b"r" * (self.log.log_end_offset - fetch.fetch_offset)


@dataclass
class _Host:
    replica: _Replica
    stopping: bool = False
    leader_throttle: ThrottleBucket = field(default_factory=ThrottleBucket)

    @property
    def replicas(self) -> dict[TopicPartition, _Replica]:
        return {TP: self.replica}

    def is_adding_replica(self, tp: TopicPartition, replica_id: int) -> bool:
        return False


def _follower_fetch(max_wait_ms: int) -> BrokerFetchRequest:
    return BrokerFetchRequest(
        replica_id=2,
        replica_epoch=1,
        max_wait_ms=max_wait_ms,
        topics=(
            FetchTopic(
                topic=TP.topic,
                partitions=(FetchPartition(partition=0, fetch_offset=10, current_leader_epoch=3),),
            ),
        ),
    )


def test_a_parked_follower_fetch_skips_high_watermark_wakes_and_answers_new_records() -> None:
    async def run() -> None:
        replica = _Replica()
        service = BrokerService(_Host(replica))  # type: ignore[arg-type]
        fetch = asyncio.create_task(service.fetch(_follower_fetch(5_000)))
        await asyncio.sleep(0.01)
        assert replica.passes == 1  # caught up: parked
        replica.high_watermark = 8  # another follower's acknowledgement
        replica.notify()
        await asyncio.sleep(0.01)
        assert replica.passes == 1 and not fetch.done()  # nothing it could read: no pass
        replica.log.log_end_offset = 12  # an append
        replica.notify()
        response = await asyncio.wait_for(fetch, 1)
        assert replica.passes == 2
        data = response.responses[0].partitions[0]
        assert (data.records, data.high_watermark) == (b"rr", 8)

    asyncio.run(run())


def test_a_follower_fetch_that_times_out_carries_the_high_watermark_of_its_deadline() -> None:
    async def run() -> None:
        replica = _Replica()
        service = BrokerService(_Host(replica))  # type: ignore[arg-type]
        fetch = asyncio.create_task(service.fetch(_follower_fetch(200)))
        await asyncio.sleep(0.01)
        replica.high_watermark = 10
        replica.notify()
        response = await asyncio.wait_for(fetch, 2)
        data = response.responses[0].partitions[0]
        assert (data.records, data.high_watermark) == (b"", 10)

    asyncio.run(run())


def test_wait_any_returns_on_the_first_event_set_or_at_the_timeout() -> None:
    async def run() -> None:
        plain, change = asyncio.Event(), ChangeEvent()
        asyncio.get_running_loop().call_later(0.01, change.set)
        await asyncio.wait_for(wait_any([plain, change], 5), 1)
        plain2, change2 = asyncio.Event(), ChangeEvent()
        asyncio.get_running_loop().call_later(0.01, plain2.set)
        await asyncio.wait_for(wait_any([plain2, change2], 5), 1)
        await asyncio.wait_for(wait_any([asyncio.Event(), ChangeEvent()], 0.02), 1)  # timeout
        already = ChangeEvent()
        already.set()
        await asyncio.wait_for(wait_any([already], 5), 1)

    asyncio.run(run())
