"""`produce_together`: a Produce's partitions whose batch can be appended at once are, in
order, with no task each; the others run through the whole produce in a task, as under
``gather``."""

from __future__ import annotations

import asyncio

from kraft.types import Offset, TopicPartition
from replication.broker.replicas.produce_together import produce_together
from replication.core import ProduceCompletion
from replication.messages import ProducePartitionResponse
from storage.errors import ErrorCode

TPS = [TopicPartition("t", p) for p in range(3)]


def test_appendable_partitions_are_appended_in_order_without_a_task_each() -> None:
    appended: list[int] = []
    tasks_seen: list[int] = []

    async def scenario() -> list[ProducePartitionResponse]:
        loop = asyncio.get_running_loop()
        futures: dict[TopicPartition, asyncio.Future[ProduceCompletion]] = {}

        def now(tp: TopicPartition) -> asyncio.Future[ProduceCompletion] | None:
            if tp.partition == 1:
                return None  # say, ahead of its producer's sequence
            appended.append(tp.partition)
            futures[tp] = loop.create_future()
            return futures[tp]

        async def one(tp: TopicPartition) -> ProducePartitionResponse:
            tasks_seen.append(len(asyncio.all_tasks()))
            return ProducePartitionResponse(index=tp.partition, base_offset=100)

        def answered(tp: TopicPartition, done: ProduceCompletion) -> ProducePartitionResponse:
            return ProducePartitionResponse(index=tp.partition, base_offset=done.base_offset)

        together = asyncio.ensure_future(produce_together(TPS, now, one, answered))
        await asyncio.sleep(0)
        assert appended == [0, 2]  # both appended before either completed
        assert len(asyncio.all_tasks()) <= 3  # this one, produce_together, partition 1's
        for offset, tp in enumerate((TPS[2], TPS[0])):  # completions in any order
            futures[tp].set_result(
                ProduceCompletion(
                    request_id=tp.partition, error_code=ErrorCode.NONE, base_offset=Offset(offset)
                )
            )
        return await asyncio.wait_for(together, 5)

    answers = asyncio.run(scenario())
    assert [(a.index, a.base_offset) for a in answers] == [(0, 1), (1, 100), (2, 0)]
    assert tasks_seen == [3]


def test_a_cancelled_produce_cancels_the_partitions_still_running_in_tasks() -> None:
    started = []

    async def scenario() -> None:
        never: asyncio.Future[ProduceCompletion] = asyncio.get_running_loop().create_future()

        async def one(tp: TopicPartition) -> ProducePartitionResponse:
            started.append(asyncio.current_task())
            await asyncio.sleep(60)
            raise AssertionError("not cancelled")

        together = asyncio.ensure_future(
            produce_together(
                TPS[:2],
                lambda tp: never if tp.partition == 0 else None,
                one,
                lambda tp, done: ProducePartitionResponse(index=tp.partition),
            )
        )
        await asyncio.sleep(0.01)
        together.cancel()
        await asyncio.gather(together, return_exceptions=True)
        await asyncio.sleep(0)
        assert started and all(t is not None and t.cancelled() for t in started)

    asyncio.run(scenario())
