"""A broker that learns of a topic with many partitions opens their replicas in slices, one
slice per event-loop turn, so its heartbeats and fetches go on meanwhile (before, one pass
opened them all: ~10 s for 1,000 replicas, and the controller fenced the silent broker)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from kraft.metadata import BrokerRegistrationChangeRecord, MetadataImage, PartitionChangeRecord
from kraft.metadata.image import TopicImage
from kraft.types import TopicPartition
from replication.broker.replicas.partition import FileCheckpoint, PartitionReplica
from replication.broker.replicas.replica_manager import (
    CHECKPOINT_BATCH,
    MAX_REPLICA_OPENS_PER_RECONCILE,
    RECONCILE_APPLY_BUDGET_S,
    RECONCILE_OPEN_BUDGET_S,
    ReplicaManager,
)
from storage import checkpoint
from storage.checkpoint import CheckpointBatch
from storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from tests.broker.test_dynamic_topic_config import _broker, _broker_config
from tests.metadata.builders import ImageBuilder, topic_id_for

PARTITIONS = MAX_REPLICA_OPENS_PER_RECONCILE * 2 + 5


def _wide_image() -> MetadataImage:
    """One topic of `PARTITIONS` partitions over three brokers."""
    return (
        ImageBuilder()
        .with_brokers(101, 102, 103)
        .with_topic("wide", partitions=PARTITIONS, rf=3)
        .build()
    )


async def _settled(b: Any) -> None:
    """Let the broker's passes run until every replica is open and none is scheduled."""
    for _ in range(500):
        if len(b.replicas) == PARTITIONS and not b.replica_manager.reconcile_scheduled:
            return
        await asyncio.sleep(0)


def test_a_large_topic_is_opened_over_several_loop_turns_and_completely(tmp_path: Path) -> None:
    image = _wide_image()

    async def run() -> None:
        async with _broker(_broker_config(tmp_path), image) as b:
            assert 0 < len(b.replicas) <= MAX_REPLICA_OPENS_PER_RECONCILE, "one slice per pass"
            assert b.replica_manager.reconcile_scheduled, "the rest is scheduled, not dropped"
            for _ in range(500):
                if len(b.replicas) == PARTITIONS:
                    break
                await asyncio.sleep(0)
            assert len(b.replicas) == PARTITIONS

    asyncio.run(run())


def test_a_batch_that_changes_one_partition_revisits_that_partition_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's ``localChanges``: before, every applied batch (an ISR change of one partition)
    re-applied the registration of every replica the broker holds, O(partitions) per batch and
    O(partitions^2) while a large topic settles."""
    image = _wide_image()

    async def run() -> None:
        async with _broker(_broker_config(tmp_path), image) as b:
            await _settled(b)
            assert len(b.replicas) == PARTITIONS
            applied: list[TopicPartition] = []
            original = PartitionReplica.apply_registration

            def counting(replica: PartitionReplica, *args: Any, **kwargs: Any) -> None:
                applied.append(replica.topic_partition)
                original(replica, *args, **kwargs)

            monkeypatch.setattr(PartitionReplica, "apply_registration", counting)
            current = b.image.partition(topic_id_for("wide"), 4)
            assert current is not None
            change = PartitionChangeRecord(
                topic_id=topic_id_for("wide"),
                partition=4,
                isr=tuple(r for r in current.isr if r != current.replicas[-1]),
            )
            b.image = b.image.apply(change, b.image.last_offset + 1)
            b.replica_manager.reconcile()
            assert applied == [TopicPartition("wide", 4)]

    asyncio.run(run())


def test_a_pass_stops_opening_replicas_once_its_time_budget_is_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load an open took ~30 ms (fsyncs): 32 per pass held the loop for a second."""
    image = _wide_image()
    original = ReplicaManager._open_replica

    def slow(manager: ReplicaManager, *args: Any, **kwargs: Any) -> PartitionReplica:
        time.sleep(RECONCILE_OPEN_BUDGET_S / 2)
        return original(manager, *args, **kwargs)

    monkeypatch.setattr(ReplicaManager, "_open_replica", slow)

    async def run() -> None:
        async with _broker(_broker_config(tmp_path), image) as b:
            assert 0 < len(b.replicas) <= 3
            assert b.replica_manager.reconcile_scheduled, "the rest is scheduled, not dropped"

    asyncio.run(run())


def test_a_pass_stops_applying_changed_registrations_once_its_time_budget_is_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The soak's first stall: a fencing moved every partition; each leadership change fsyncs
    an epoch checkpoint, so one pass over them all held a loaded broker's loop (and its
    heartbeats) for seconds, and the controller fenced that broker in turn, again and again."""
    image = _wide_image()

    async def run() -> None:
        async with _broker(_broker_config(tmp_path), image) as b:
            await _settled(b)
            assert len(b.replicas) == PARTITIONS
            applied: list[TopicPartition] = []
            delay_s = [RECONCILE_APPLY_BUDGET_S / 2]
            original = PartitionReplica.apply_registration

            def slow(replica: PartitionReplica, *args: Any, **kwargs: Any) -> None:
                time.sleep(delay_s[0])
                applied.append(replica.topic_partition)
                original(replica, *args, **kwargs)

            monkeypatch.setattr(PartitionReplica, "apply_registration", slow)
            for index in range(PARTITIONS):
                current = b.image.partition(topic_id_for("wide"), index)
                assert current is not None
                change = PartitionChangeRecord(
                    topic_id=topic_id_for("wide"),
                    partition=index,
                    isr=tuple(r for r in current.isr if r != current.replicas[-1]),
                )
                b.image = b.image.apply(change, b.image.last_offset + 1)
            b.replica_manager.reconcile()
            assert 0 < len(applied) <= 3, "one time budget per pass"
            assert b.replica_manager.reconcile_scheduled, "the rest is scheduled, not dropped"
            delay_s[0] = 0.0
            for _ in range(500):
                if len(set(applied)) == PARTITIONS:
                    break
                await asyncio.sleep(0)
            assert set(applied) == set(b.replicas)

    asyncio.run(run())


def test_a_broker_fenced_updates_the_leaders_view_without_a_pass_over_every_partition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 20,000 partitions a full pass at each fencing held a broker's loop long enough to
    get it fenced in turn, over and over. Only the replicas it leads use the brokers' states."""
    image = _wide_image()

    async def run() -> None:
        async with _broker(_broker_config(tmp_path), image) as b:
            await _settled(b)
            applied: list[TopicPartition] = []
            updated: list[TopicPartition] = []
            monkeypatch.setattr(
                PartitionReplica,
                "apply_registration",
                lambda r, *a, **k: applied.append(r.topic_partition),
            )
            monkeypatch.setattr(
                PartitionReplica,
                "update_brokers",
                lambda r, *a, **k: updated.append(r.topic_partition),
            )
            epoch = b.image.brokers[103].broker_epoch
            fence = BrokerRegistrationChangeRecord(broker_id=103, broker_epoch=epoch, fenced=True)
            b.image = b.image.apply(fence, b.image.last_offset + 1)
            b.replica_manager.reconcile()
            assert applied == []
            leaders = {tp for tp, r in b.replicas.items() if r.driver.is_leader}
            assert leaders and set(updated) == leaders and len(updated) == len(leaders)

    asyncio.run(run())


def test_a_pass_walks_one_slice_of_the_unopened_replicas_not_all_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: every pass walked every replica still to open (thousands at 10,000 partitions)
    to open one slice of them: O(n^2 / slice) for a large topic."""
    partitions = MAX_REPLICA_OPENS_PER_RECONCILE * 6
    image = (
        ImageBuilder()
        .with_brokers(101, 102, 103)
        .with_topic("wide", partitions=partitions, rf=3)
        .build()
    )

    async def run() -> None:
        async with _broker(_broker_config(tmp_path), image) as b:
            pending = len(b.replica_manager.revisit)
            assert pending >= 4 * MAX_REPLICA_OPENS_PER_RECONCILE
            looked_up: list[str] = []
            original = MetadataImage.topic

            def counting(self: MetadataImage, name: str) -> TopicImage | None:
                looked_up.append(name)
                return original(self, name)

            monkeypatch.setattr(MetadataImage, "topic", counting)
            b.replica_manager.reconcile()
            assert len(looked_up) <= MAX_REPLICA_OPENS_PER_RECONCILE
            assert (
                pending - MAX_REPLICA_OPENS_PER_RECONCILE
                <= len(b.replica_manager.revisit)
                < pending
            )
            assert b.replica_manager.reconcile_scheduled, "the rest is scheduled, not dropped"

    asyncio.run(run())


def test_new_replicas_write_no_high_watermark_checkpoint_until_it_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the first checkpoint pass after a large create wrote (and fsynced) one file per
    new replica on the broker's event loop, though a missing file already means that value."""
    image = (
        ImageBuilder().with_brokers(101, 102, 103).with_topic("wide", partitions=8, rf=3).build()
    )
    written: list[int] = []
    monkeypatch.setattr(FileCheckpoint, "write", lambda self, offset: written.append(offset))

    async def run() -> None:
        async with _broker(_broker_config(tmp_path), image) as b:
            for _ in range(500):
                if len(b.replicas) == 8:
                    break
                await asyncio.sleep(0)
            for replica in b.replicas.values():
                replica.checkpoint_high_watermark()
            assert written == []

    asyncio.run(run())


def _take_over_leaderships(image: MetadataImage, local_id: int) -> MetadataImage:
    """Every partition whose leader is another broker is led by ``local_id`` now (a fencing
    moved them all here)."""
    for index in range(PARTITIONS):
        current = image.partition(topic_id_for("wide"), index)
        assert current is not None and local_id in current.isr
        if current.leader != local_id:
            change = PartitionChangeRecord(
                topic_id=topic_id_for("wide"), partition=index, leader=local_id
            )
            image = image.apply(change, image.last_offset + 1)
    return image


def test_leaderships_taken_over_in_a_pass_write_their_epoch_checkpoints_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The soak's cascade: each leadership a fencing moved here wrote its leader-epoch
    checkpoint (two fsyncs) on the event loop, one after another, so the broker's heartbeats
    went out late and it was fenced in turn. Now a pass writes them together; still, when the
    pass returns (before any request can see the new leader), every one is on disk."""
    image = _wide_image()
    flushed: list[int] = []
    original_flush = CheckpointBatch.flush

    def counting(batch: CheckpointBatch) -> list[tuple[Path, OSError]]:
        flushed.append(len(batch))
        return original_flush(batch)

    monkeypatch.setattr(CheckpointBatch, "flush", counting)

    def on_disk_epoch(replica: PartitionReplica) -> int | None:
        cache = LeaderEpochCache.load(replica.directory / LEADER_EPOCH_CHECKPOINT, lambda: 0)
        return None if cache is None else cache.latest_epoch

    async def run() -> None:
        async with _broker(_broker_config(tmp_path), image) as b:
            await _settled(b)
            manager = b.replica_manager
            local_id = manager.node_id
            moved = {tp for tp, r in b.replicas.items() if not r.driver.is_leader}
            assert moved
            b.image = _take_over_leaderships(b.image, local_id)
            flushed.clear()
            for _ in range(500):
                manager.reconcile()
                for tp in moved:  # after every pass: nothing new is left unwritten
                    replica = b.replicas[tp]
                    if replica.driver.is_leader:
                        assert on_disk_epoch(replica) == replica.driver.leader_epoch
                if all(b.replicas[tp].driver.is_leader for tp in moved):
                    break
                await asyncio.sleep(0)
            assert all(b.replicas[tp].driver.is_leader for tp in moved)
            written = [n for n in flushed if n]
            assert sum(written) >= len(moved)
            assert max(written) > 1, "together, not one at a time"
            assert max(written) <= CHECKPOINT_BATCH

    asyncio.run(run())


def test_a_checkpoint_whose_write_fails_takes_its_replica_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a write that failed on its own would have (the disk-error path, KIP-112 in kind)."""
    image = _wide_image()

    async def run() -> None:
        async with _broker(_broker_config(tmp_path), image) as b:
            await _settled(b)
            manager = b.replica_manager
            followers = sorted(
                (tp for tp, r in b.replicas.items() if not r.driver.is_leader),
                key=lambda tp: tp.partition,
            )
            victim = followers[0]
            broken = b.replicas[victim].directory
            original = checkpoint.write_atomically

            def failing(path: Path, data: bytes) -> None:
                if path.parent == broken:
                    raise OSError(5, "Input/output error")
                original(path, data)

            monkeypatch.setattr(checkpoint, "write_atomically", failing)
            b.image = _take_over_leaderships(b.image, manager.node_id)
            for _ in range(500):
                manager.reconcile()
                if all(b.replicas[tp].driver.is_leader for tp in followers[1:]):
                    break
                await asyncio.sleep(0)
            assert victim not in b.replicas
            assert manager.offline.get(victim) is not None
            assert all(b.replicas[tp].driver.is_leader for tp in followers[1:])

    asyncio.run(run())
