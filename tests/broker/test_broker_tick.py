"""The broker's tick task has no fixed period: it sleeps until the earliest deadline of its
replicas (`PartitionReplica.next_deadline_ms`) or until an input wakes it.

The broker is a real `BrokerServer` that is never started: the test sets its metadata image
and broker epoch, calls the reconcile step the observer would schedule, and runs only the tick
task. The sleep cap (`MAX_TICK_SLEEP_MS`) is raised to a minute, so a test fails if the
deadline or the wake it relies on is missing (the work would wait for the cap)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import pytest

import replication.broker.replicas.tick as broker_tick
from kraft.metadata.image import MetadataImage, PartitionRegistration
from kraft.raft_shell.clock import clock_ms
from kraft.types import TopicPartition
from replication.broker.config import BrokerNodeConfig
from replication.broker.replicas.partition import PartitionReplica
from replication.broker.replicas.tick import run_tick_loop
from replication.broker.server import BrokerServer
from replication.core import (
    BrokerStatus,
    FollowerFetchRequest,
    FollowerFetchResponse,
    ReplicationConfig,
)
from storage.config import LogConfig
from storage.errors import ErrorCode
from tests.metadata.builders import ImageBuilder
from tests.replication.harness import TP, batch

pytestmark = pytest.mark.timeout(60)

TOPIC = TopicPartition("t", 0)
LEADER = 101
CAP_MS = 60_000


@pytest.fixture(autouse=True)
def _long_sleep_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_tick, "MAX_TICK_SLEEP_MS", CAP_MS)


def _image(**configs: str) -> MetadataImage:
    """t-0 led here with a follower in the ISR that never fetches (min.insync.replicas=2)."""
    return (
        ImageBuilder()
        .with_brokers(101, 102)
        .with_topic("t", assignments=[(101, 102)], configs={"min.insync.replicas": "2", **configs})
        .with_partition("t", 0, isr=(101, 102), leader=LEADER)
        .build()
    )


@asynccontextmanager
async def _ticking_broker(tmp_path: Path, **configs: str) -> AsyncIterator[BrokerServer]:
    config = BrokerNodeConfig.from_properties(
        {
            "node.id": str(LEADER),
            "controller.quorum.voters": "1@127.0.0.1:1",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / "broker"),
        }
    )
    server = BrokerServer(config)
    image = _image(**configs)
    server.broker_epoch = image.last_offset  # the image holds our registration
    task = asyncio.create_task(run_tick_loop(server.replica_manager, server._log))
    await asyncio.sleep(0.05)  # the task sleeps now: nothing is hosted yet
    server.image = image
    server.replica_manager.reconcile()
    try:
        yield server
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        await server.close_unstarted()


def _count_ticks(replica: PartitionReplica) -> list[int]:
    ticks: list[int] = []
    tick = replica.tick

    def counted() -> None:
        ticks.append(clock_ms())
        tick()

    replica.tick = counted  # type: ignore[method-assign]
    return ticks


def test_an_acks_all_produce_times_out_at_its_deadline_not_at_the_sleep_cap(
    tmp_path: Path,
) -> None:
    """The produce is an input: it wakes the tick task, which then sleeps until the
    produce's deadline and answers REQUEST_TIMED_OUT (the follower never fetches)."""

    async def run() -> None:
        async with _ticking_broker(tmp_path) as b:
            replica = b.replicas[TOPIC]
            await asyncio.sleep(0.2)  # the tick a new leader asks for has run
            started = time.monotonic()
            done = await asyncio.wait_for(replica.produce(-1, 300, batch(b"x")), timeout=30)
            took = time.monotonic() - started
            assert done.error_code is ErrorCode.REQUEST_TIMED_OUT
            assert 0.29 <= took < 10

    asyncio.run(run())


async def _until_ticked_as_new_leader(replica: PartitionReplica) -> None:
    """Wait until the tick a new leader asks for has run: its next deadline is far away."""

    def far() -> bool:
        deadline = replica.next_deadline_ms()
        return deadline is not None and deadline > clock_ms() + 10_000

    await _until(far, timeout_s=20)


def test_an_idle_broker_does_not_tick_its_replicas_periodically(tmp_path: Path) -> None:
    """The 50 ms tick ticked every replica 20 times a second; now an idle leader whose next
    deadline is the follower's caught-up window (``replica.lag.time.max.ms``, 30 s) is not
    ticked at all in a second."""

    async def run() -> None:
        async with _ticking_broker(tmp_path) as b:
            replica = b.replicas[TOPIC]
            await _until_ticked_as_new_leader(replica)
            ticks = _count_ticks(replica)
            await asyncio.sleep(1.0)
            assert ticks == []

    asyncio.run(run())


def test_a_sleeping_tick_task_waits_without_a_task_of_its_own(tmp_path: Path) -> None:
    """Inputs wake the tick task up to every ``MIN_TICK_INTERVAL_MS`` while records flow; its
    wait is a future and a timer (`wait_any`), not ``wait_for(event.wait())``, which started a
    task per pass (a loop callback more each). A produce still wakes it at once."""

    async def run() -> None:
        async with _ticking_broker(tmp_path) as b:
            replica = b.replicas[TOPIC]
            await _until_ticked_as_new_leader(replica)
            waits = [
                t for t in asyncio.all_tasks() if t.get_coro().__qualname__.endswith("Event.wait")
            ]
            assert waits == []
            done = await asyncio.wait_for(replica.produce(-1, 300, batch(b"x")), timeout=30)
            assert done.error_code is ErrorCode.REQUEST_TIMED_OUT

    asyncio.run(run())


def test_an_idle_log_is_flushed_by_the_tick_at_its_flush_ms_deadline(tmp_path: Path) -> None:
    async def run() -> None:
        async with _ticking_broker(tmp_path, **{"flush.ms": "300"}) as b:
            replica = b.replicas[TOPIC]
            log = replica.log
            await asyncio.sleep(0.4)  # the open counts as a flush: let flush.ms pass once
            done = await replica.produce(1, 1_000, batch(b"x", count=3))
            assert done.error_code is ErrorCode.NONE
            if log.recovery_point == log.log_end_offset:
                # flush.ms had passed: the append flushed; the next one waits for the tick.
                done = await replica.produce(1, 1_000, batch(b"y", count=3))
            appended = time.monotonic()
            assert log.recovery_point < log.log_end_offset
            await _until(lambda: log.recovery_point == log.log_end_offset, timeout_s=10)
            assert 0.25 <= time.monotonic() - appended < 10

    asyncio.run(run())


def test_a_replica_reports_every_input_and_its_produce_deadline(tmp_path: Path) -> None:
    inputs: list[PartitionReplica] = []

    async def no_fetch(request: FollowerFetchRequest) -> FollowerFetchResponse:
        raise AssertionError("a leader does not fetch")  # pragma: no cover

    async def run() -> None:
        replica = PartitionReplica(
            topic_partition=TP,
            topic_id="tid",
            directory=tmp_path / "p",
            log_config=LogConfig(),
            local_id=1,
            broker_epoch=10,
            fetch_from_leader=no_fetch,
            send_alter_partition=lambda _replica, _send: None,
            on_input=inputs.append,
        )
        try:
            brokers = {1: BrokerStatus(broker_epoch=10), 2: BrokerStatus(broker_epoch=20)}
            registration = PartitionRegistration(
                replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=0
            )
            replica.apply_registration(
                registration, brokers, ReplicationConfig(min_insync_replicas=2)
            )
            assert inputs == [replica]
            replica.tick()  # the tick the new leader asked for
            waiting = asyncio.ensure_future(replica.produce(-1, 5_000, batch(b"x")))
            await _until(lambda: len(inputs) >= 2)
            deadline = replica.next_deadline_ms()
            assert deadline is not None and 0 < deadline - clock_ms() <= 5_000
            replica.update_brokers(brokers)
            assert len(inputs) >= 3
            waiting.cancel()
        finally:
            replica.stop()

    asyncio.run(run())


async def _until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.005)
