"""The broker's passes over many replicas (retention, producer-id expiration, the log cleaner's
plans, a fetch of many partitions) yield the event loop between slices
(`replication.broker.loop_slice`): a pass over 1,000 replicas takes many loop callbacks, each
visiting at most `PASS_SLICE_STEPS` replicas, so follower fetches and produces are served
through it."""

from __future__ import annotations

import asyncio
import collections
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest

from kraft.types import TopicPartition
from replication.broker.loop_slice import PASS_SLICE_STEPS, LoopSlice, sum_in_slices
from replication.broker.replicas.cleaner import LogCleaner
from replication.broker.replicas.retention import expiration_pass, retention_pass
from replication.broker.service import BrokerService
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
    FetchPartition,
    FetchPartitionData,
    FetchTopic,
)

REPLICAS = 1000


class _Turns:
    """Counts the event loop's turns: a task that steps once per turn while a pass runs."""

    def __init__(self) -> None:
        self.now = 0
        self._task: asyncio.Task[None] | None = None

    async def _count(self) -> None:
        while True:
            self.now += 1
            await asyncio.sleep(0)

    def __enter__(self) -> _Turns:
        self._task = asyncio.create_task(self._count())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()


class _Replica:
    """A replica that records the loop turn of each visit; every 7th has work."""

    def __init__(self, i: int, turns: _Turns, visits: list[tuple[int, int]]) -> None:
        self.i, self.turns, self.visits = i, turns, visits
        self.topic_partition = f"t-{i}"
        self.producer_state = self

    def _visit(self) -> int:
        self.visits.append((self.i, self.turns.now))
        return 1 if self.i % 7 == 0 else 0

    def apply_retention(self, now_ms: int) -> int:
        return self._visit()

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        return self._visit()

    def prepare_compaction(self, now_ms: int, offset_map_bytes: int | None) -> Any:
        return self if self._visit() else None

    def finish_compaction(self, job: Any, output: Any) -> int:
        assert job is self and output == ("cleaned", self.i)
        return 3


def _assert_sliced(visits: list[tuple[int, int]]) -> None:
    assert [i for i, _ in visits] == list(range(REPLICAS))  # each once, in order
    per_turn = collections.Counter(turn for _, turn in visits)
    assert len(per_turn) >= REPLICAS // PASS_SLICE_STEPS  # the pass yielded between slices
    assert max(per_turn.values()) <= PASS_SLICE_STEPS


@pytest.mark.parametrize("kind", ["retention", "expiration"])
def test_a_pass_over_1000_replicas_yields_the_loop_between_slices(kind: str) -> None:
    visits: list[tuple[int, int]] = []

    async def main() -> int:
        with _Turns() as turns:
            replicas = cast(Any, [_Replica(i, turns, visits) for i in range(REPLICAS)])
            if kind == "retention":
                return await retention_pass(replicas, now_ms=0)
            return await expiration_pass(replicas, now_ms=0, expiration_ms=1)

    total = asyncio.run(main())
    assert total == len(range(0, REPLICAS, 7))
    _assert_sliced(visits)


def test_the_log_cleaner_plans_in_slices_and_runs_at_most_threads_jobs_at_once() -> None:
    visits: list[tuple[int, int]] = []
    running, most_running, tasks_before, tasks_during = 0, 0, 0, 0

    def run(job: Any) -> Any:
        nonlocal running, most_running
        running += 1
        most_running = max(most_running, running)
        time.sleep(0.001)
        running -= 1
        return ("cleaned", job.i)

    async def main() -> int:
        nonlocal tasks_before, tasks_during
        cleaner = LogCleaner(threads=2, run=run)
        try:
            with _Turns() as turns:
                replicas = [_Replica(i, turns, visits) for i in range(REPLICAS)]
                tasks_before = len(asyncio.all_tasks())
                pass_ = asyncio.create_task(cleaner.clean_once(cast(Any, replicas), now_ms=0))
                while not pass_.done():
                    tasks_during = max(tasks_during, len(asyncio.all_tasks()))
                    await asyncio.sleep(0)
                return await pass_
        finally:
            cleaner.close()

    removed = asyncio.run(main())
    assert removed == 3 * len(range(0, REPLICAS, 7))
    _assert_sliced(visits)
    assert most_running <= 2
    # a replica with nothing to clean costs its plan and no task: the pass itself, and one
    # task per job in the workers (at most ``threads``)
    assert tasks_during <= tasks_before + 1 + 2


def test_a_slice_ends_at_its_steps_or_its_time() -> None:
    now = [0.0]
    cut = LoopSlice(seconds=1.0, most=3, clock=lambda: now[0])
    for _ in range(3):
        assert not cut.over()
        cut.took()
    assert cut.over()
    cut.renew()
    assert not cut.over()
    now[0] = 1.5
    assert cut.over()
    assert asyncio.run(sum_in_slices([1, 2, 3], lambda x: x * 2, LoopSlice(most=1))) == 12


def test_a_fetch_of_1000_partitions_yields_the_loop_between_slices_of_them() -> None:
    visits: list[tuple[int, int]] = []

    async def main() -> tuple[BrokerFetchResponse, int]:
        with _Turns() as turns:
            service = BrokerService(cast(Any, SimpleNamespace(replicas={}, stopping=False)))

            def read(tp: TopicPartition, p: FetchPartition, *_: object) -> FetchPartitionData:
                visits.append((p.partition, turns.now))
                return FetchPartitionData(partition_index=p.partition, records=b"x")

            service._consumer_fetch = read  # type: ignore[method-assign,assignment]
            partitions = tuple(FetchPartition(partition=i, fetch_offset=0) for i in range(REPLICAS))
            request = BrokerFetchRequest(topics=(FetchTopic(topic="t", partitions=partitions),))
            response = await service.fetch(request)
            # the simulator's pass, without a loop, is the same pass in one go
            return response, len(service.fetch_once(request)[0].responses[0].partitions)

    response, in_one_go = asyncio.run(main())
    assert [p.partition_index for p in response.responses[0].partitions] == list(range(REPLICAS))
    assert in_one_go == REPLICAS
    _assert_sliced(visits[:REPLICAS])
