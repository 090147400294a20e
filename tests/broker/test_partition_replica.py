"""`PartitionReplica` in process: two replicas over real `SegmentedLog`s, the follower's
fetches wired straight to the leader (a fake transport), the controller faked."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kraft.controller.messages import AlterPartitionPartitionResult
from kraft.metadata.image import PartitionRegistration
from replication.broker.replicas import sequence_turn as sequence_turn_module
from replication.broker.replicas.partition import PartitionReplica, follower_response
from replication.core import (
    AlterPartitionSend,
    BrokerStatus,
    FollowerFetchRequest,
    FollowerFetchResponse,
    ReplicationConfig,
)
from storage.config import LogConfig
from storage.errors import ErrorCode
from tests.replication.harness import TP, batch

BROKERS = {1: BrokerStatus(broker_epoch=10), 2: BrokerStatus(broker_epoch=20)}
CONFIG = ReplicationConfig(min_insync_replicas=2)


class Pair:
    def __init__(self, tmp_path: Path) -> None:
        self.alters: list[AlterPartitionSend] = []
        self.leader = self._replica(tmp_path / "leader", 1, 10)
        self.follower = self._replica(tmp_path / "follower", 2, 20)

    def _replica(self, directory: Path, local_id: int, epoch: int) -> PartitionReplica:
        return PartitionReplica(
            topic_partition=TP,
            topic_id="tid",
            directory=directory,
            log_config=LogConfig(),
            local_id=local_id,
            broker_epoch=epoch,
            fetch_from_leader=self._fetch,
            send_alter_partition=lambda _replica, send: self.alters.append(send),
        )

    async def _fetch(self, request: FollowerFetchRequest) -> FollowerFetchResponse:
        await asyncio.sleep(0.001)
        leader = self.leader if request.leader_id == 1 else self.follower
        answer, records = leader.handle_follower_fetch(
            request.as_follower_fetch(),
            1 << 20,
        )
        return follower_response(
            request,
            error_code=answer.error_code,
            high_watermark=answer.high_watermark,
            log_start_offset=answer.log_start_offset,
            diverging_epoch=answer.diverging_epoch,
            records=records,
        )

    def apply(self, registration: PartitionRegistration) -> None:
        self.leader.apply_registration(registration, BROKERS, CONFIG)
        self.follower.apply_registration(registration, BROKERS, CONFIG)

    def close(self) -> None:
        self.leader.stop()
        self.follower.stop()


async def _wait_for(predicate: object, timeout_s: float = 5.0) -> None:
    assert callable(predicate)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.005)


def test_acks_all_produce_completes_once_the_follower_fetched_it(tmp_path: Path) -> None:
    async def run() -> None:
        pair = Pair(tmp_path)
        pair.apply(PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=3))
        try:
            done = await asyncio.wait_for(
                pair.leader.produce(-1, 5_000, batch(b"x", count=3)), timeout=5
            )
            assert (done.error_code, done.base_offset) == (ErrorCode.NONE, 0)
            assert pair.follower.log.log_end_offset == 3
            await _wait_for(lambda: pair.follower.high_watermark == 3)
            assert pair.leader.high_watermark == 3
            assert pair.follower.log.leader_epoch_cache.entries == (
                pair.leader.log.leader_epoch_cache.entries
            )
        finally:
            pair.close()

    asyncio.run(run())


def test_a_leader_change_fails_waiting_produces_and_swaps_the_cores(tmp_path: Path) -> None:
    async def run() -> None:
        pair = Pair(tmp_path)
        # The follower is not in the ISR and min.insync.replicas=2: acks=all is refused.
        pair.apply(PartitionRegistration(replicas=(1, 2), isr=(1,), leader=1, leader_epoch=1))
        try:
            done = await pair.leader.produce(-1, 5_000, batch(b"x"))
            assert done.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
            done = await pair.leader.produce(1, 5_000, batch(b"y"))
            assert done.error_code is ErrorCode.NONE
            await _wait_for(lambda: bool(pair.alters))  # the follower caught up: expand
            assert pair.alters[0].data.new_isr == (1, 2)
            pair.leader.handle_alter_partition_result(
                pair.leader.generation,
                pair.alters[0].alter_id,
                AlterPartitionPartitionResult(
                    partition=0, leader_id=1, leader_epoch=1, isr=(1, 2), partition_epoch=1
                ),
            )
            waiting = asyncio.ensure_future(pair.leader.produce(-1, 60_000, batch(b"z")))
            await asyncio.sleep(0)
            moved = PartitionRegistration(
                replicas=(1, 2), isr=(1, 2), leader=2, leader_epoch=2, partition_epoch=2
            )
            pair.apply(moved)
            done = await asyncio.wait_for(waiting, timeout=5)
            assert done.error_code in (ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            assert pair.leader.leader is None and pair.follower.leader is not None
            done = await pair.follower.produce(1, 5_000, batch(b"w"))
            assert done.error_code is ErrorCode.NONE
            # KIP-101: the old leader truncates what the new one does not have, then catches up.
            new_end = pair.follower.log.log_end_offset
            await _wait_for(lambda: pair.leader.high_watermark == new_end)
            assert pair.leader.log.read(0, 1 << 20) == pair.follower.log.read(0, 1 << 20)
        finally:
            pair.close()

    asyncio.run(run())


def _leading_alone(tmp_path: Path) -> Pair:
    """A pair whose leader leads alone (replicas and ISR: itself), epoch 0."""
    pair = Pair(tmp_path)
    pair.leader.apply_registration(
        PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=0),
        BROKERS,
        ReplicationConfig(),
    )
    return pair


def test_an_idempotent_batch_that_overtook_its_predecessor_waits_for_it(tmp_path: Path) -> None:
    """Concurrent gRPC calls may arrive in any order: batch 5..9 of a new producer must not
    start the producer's state at sequence 5 and make batch 0..4 fail."""

    async def run() -> None:
        pair = _leading_alone(tmp_path)
        try:
            second = asyncio.ensure_future(
                pair.leader.produce(
                    1, 5_000, batch(b"b", producer_id=7, producer_epoch=0, base_sequence=5, count=5)
                )
            )
            await asyncio.sleep(0.05)
            assert not second.done()
            first = await pair.leader.produce(
                1, 5_000, batch(b"a", producer_id=7, producer_epoch=0, base_sequence=0, count=5)
            )
            assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
            done = await asyncio.wait_for(second, timeout=5)
            assert (done.error_code, done.base_offset) == (ErrorCode.NONE, 5)
        finally:
            pair.close()

    asyncio.run(run())


def test_a_new_producers_batch_whose_predecessor_never_came_is_refused_not_taken_as_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kraft nemesis` at a load of 60: a batch of a producer the leader did not know yet
    overtook its predecessors by more than the wait and was accepted (KIP-360 lets an unknown
    producer start at any sequence), so its record landed before records sent earlier. Now it
    is refused OUT_OF_ORDER_SEQUENCE_NUMBER (the producer retries it after its predecessor),
    and the predecessor, arriving late, still starts the producer at 0."""
    monkeypatch.setattr(sequence_turn_module, "SEQUENCE_REORDER_WAIT_MS", 50)

    async def run() -> None:
        pair = _leading_alone(tmp_path)
        try:
            ahead = await pair.leader.produce(
                1, 5_000, batch(b"b", producer_id=7, producer_epoch=0, base_sequence=5, count=5)
            )
            assert ahead.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            assert pair.leader.log.log_end_offset == 0  # nothing appended
            first = await pair.leader.produce(
                1, 5_000, batch(b"a", producer_id=7, producer_epoch=0, base_sequence=0, count=5)
            )
            assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
            retried = await pair.leader.produce(
                1, 5_000, batch(b"b", producer_id=7, producer_epoch=0, base_sequence=5, count=5)
            )
            assert (retried.error_code, retried.base_offset) == (ErrorCode.NONE, 5)
        finally:
            pair.close()

    asyncio.run(run())


def test_produce_now_appends_before_it_returns_unless_the_batch_is_ahead_of_its_sequence(
    tmp_path: Path,
) -> None:
    """`produce_now` lets a Produce's partitions be appended one after the other without a
    task each: the append is done when it returns; a batch ahead of its producer's sequence
    is not appended (None: `produce` holds it for its predecessor)."""

    async def run() -> None:
        pair = _leading_alone(tmp_path)
        try:
            ahead = batch(b"b", producer_id=7, producer_epoch=0, base_sequence=5, count=5)
            assert pair.leader.produce_now(1, 5_000, ahead) is None
            assert pair.leader.log.log_end_offset == 0
            first = batch(b"a", producer_id=7, producer_epoch=0, base_sequence=0, count=5)
            started = pair.leader.produce_now(1, 5_000, first)
            assert started is not None
            assert pair.leader.log.log_end_offset == 5  # appended already
            done = await asyncio.wait_for(started, timeout=5)
            assert (done.error_code, done.base_offset) == (ErrorCode.NONE, 0)
            started = pair.leader.produce_now(1, 5_000, ahead)  # its turn now
            assert started is not None
            done = await asyncio.wait_for(started, timeout=5)
            assert (done.error_code, done.base_offset) == (ErrorCode.NONE, 5)
        finally:
            pair.close()

    asyncio.run(run())
