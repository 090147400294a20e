"""The broker's passes over many replicas (retention, producer-id expiration, the log cleaner's
plans, a fetch of many partitions, a follower's application of a many-partition answer, the
high-watermark checkpoints) yield the event loop between slices
(`replication.broker.loop_slice`): a pass over 1,000 replicas takes many loop callbacks, each
visiting at most `PASS_SLICE_STEPS` replicas, so follower fetches and produces are served
through it."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import structlog

from kraft.types import TopicPartition
from replication.broker.loop_slice import PASS_SLICE_STEPS, LoopSlice, sum_in_slices
from replication.broker.replicas.cleaner import LogCleaner
from replication.broker.replicas.fetcher import (
    APPLY_SLICE_BYTES,
    APPLY_SLICE_PARTITIONS,
    LeaderFetcher,
)
from replication.broker.replicas.retention import expiration_pass, retention_pass
from replication.broker.replicas.tick import CHECKPOINT_SLICE, checkpoint_pass, run_tick_loop
from replication.broker.service import BrokerService
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
    FetchPartition,
    FetchPartitionData,
    FetchTopic,
    FetchTopicResponse,
)
from storage.checkpoint import read_offset, write_offset
from tests.broker.test_fetch_response_limit import follower_request

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


@pytest.mark.parametrize(
    ("partitions", "record_bytes", "most_per_turn"),
    [(REPLICAS, 1, APPLY_SLICE_PARTITIONS), (16, APPLY_SLICE_BYTES // 2, 2)],
)
def test_a_follower_applies_a_many_partition_answer_over_many_loop_turns(
    partitions: int, record_bytes: int, most_per_turn: int
) -> None:
    """Each partition's fetch loop applies its answer in the turn its future completes; the
    fetcher hands the answers out in slices (by partitions, or by bytes of records), so other
    tasks run between them."""
    applied: list[tuple[int, int]] = []

    async def send(leader_id: int, wire: BrokerFetchRequest) -> BrokerFetchResponse:
        parts = tuple(
            FetchPartitionData(partition_index=p.partition, records=b"r" * record_bytes)
            for t in wire.topics
            for p in t.partitions
        )
        return BrokerFetchResponse(responses=(FetchTopicResponse(topic="t", partitions=parts),))

    async def main() -> None:
        fetcher = LeaderFetcher(1, replica_id=2, send=send, max_wait_ms=500, max_bytes=1 << 20)
        with _Turns() as turns:

            async def follow(partition: int) -> None:
                answer = await fetcher.fetch(follower_request(partition, fetch_id=1))
                assert len(answer.records) == record_bytes
                applied.append((partition, turns.now))

            await asyncio.gather(*(follow(p) for p in range(partitions)))
        await fetcher.close()

    asyncio.run(main())
    assert sorted(p for p, _ in applied) == list(range(partitions))  # each once
    per_turn = collections.Counter(turn for _, turn in applied)
    assert max(per_turn.values()) <= most_per_turn
    assert len(per_turn) >= partitions // most_per_turn


@dataclass
class _Checkpointed:
    """A replica whose high watermark moved: its checkpoint goes to ``directory``."""

    directory: Path
    turns: _Turns
    visits: list[int]
    offline: list[OSError] = field(default_factory=list)
    topic_partition: str = "t-0"

    def checkpoint_high_watermark(self) -> None:
        self.visits.append(self.turns.now)
        write_offset(self.directory / "high-watermark-checkpoint", 42)

    def go_offline(self, error: OSError) -> None:
        self.offline.append(error)


def test_the_high_watermark_checkpoint_pass_writes_in_slices_and_fails_only_its_replica(
    tmp_path: Path,
) -> None:
    visits: list[int] = []

    async def main() -> tuple[int, list[_Checkpointed]]:
        with _Turns() as turns:
            replicas = []
            for i in range(200):
                directory = tmp_path / f"t-{i}"
                if i != 7:  # replica 7's directory is gone: its write fails
                    directory.mkdir()
                replicas.append(_Checkpointed(directory, turns, visits))
            written = await checkpoint_pass(cast(Any, replicas), structlog.get_logger())
            return written, replicas

    written, replicas = asyncio.run(main())
    assert written == 200
    assert all(
        read_offset(r.directory / "high-watermark-checkpoint") == 42
        for r in replicas
        if r.directory.exists()
    )
    assert [bool(r.offline) for r in replicas] == [i == 7 for i in range(200)]
    per_turn = collections.Counter(visits)
    assert max(per_turn.values()) <= CHECKPOINT_SLICE
    assert len(per_turn) >= 200 // CHECKPOINT_SLICE


class _Due:
    """A replica of the tick loop's that is always due and whose tick takes about a millisecond
    of the loop (a pass after a stall finds all of them due)."""

    def __init__(self, i: int, turns: _Turns, ticks: list[tuple[int, int]]) -> None:
        self.topic_partition = TopicPartition("t", i)
        self.i, self.turns, self.ticks = i, turns, ticks

    def next_deadline_ms(self) -> int:
        return 0

    def tick(self) -> None:
        self.ticks.append((self.i, self.turns.now))
        until = time.monotonic() + 0.001
        while time.monotonic() < until:
            pass


def test_a_tick_pass_over_many_due_replicas_yields_the_loop_between_slices() -> None:
    """A pass after a stall ticks every replica (here 100 of about 1 ms each): it must not hold
    the loop for all of them in one callback. A replica retired during a yield is not ticked."""

    async def main() -> list[tuple[int, int]]:
        ticks: list[tuple[int, int]] = []
        with _Turns() as turns:
            due = [_Due(i, turns, ticks) for i in range(100)]
            manager = SimpleNamespace(
                replicas={r.topic_partition: r for r in due},
                tick_wake=asyncio.Event(),
                take_touched=set,
            )
            retired = due[-1]
            loop_task = asyncio.create_task(
                run_tick_loop(cast(Any, manager), structlog.get_logger())
            )
            await asyncio.sleep(0)
            del manager.replicas[retired.topic_partition]  # retired while the pass runs
            deadline = time.monotonic() + 10
            while len(ticks) < 99 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop_task
        return ticks[:99]

    first_pass = asyncio.run(main())
    assert [i for i, _ in first_pass] == list(range(99))  # the retired one was skipped
    turns_spanned = len({turn for _, turn in first_pass})
    assert turns_spanned >= 5, f"one pass of 100 ms of ticks held the loop for {turns_spanned}"
