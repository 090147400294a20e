"""A broker removes the replicas of a deleted topic (or of a reassignment away) at once from
service, then retires them in slices: each log closed without a flush, its directory renamed
aside and deleted by a worker thread (Kafka's ``LogManager.asyncDelete``). Before, one pass
closed every replica cleanly (fsyncs) and deleted its directory on the loop: deleting a
1,000-partition topic stalled each broker's loop for 15-30 s on a loaded machine."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from kraft.metadata import MetadataImage, PartitionRecord, RemoveTopicRecord, TopicRecord
from replication.broker.replicas.partition import PartitionReplica
from replication.broker.replicas.replica_manager import DELETED_SUFFIX, RETIRE_BUDGET_S
from tests.broker.test_dynamic_topic_config import _broker, _broker_config
from tests.broker.test_reconcile_pacing import PARTITIONS, _settled, _wide_image
from tests.metadata.builders import topic_id_for


async def _until(condition: Any, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.005)


def _partition_dirs(data_dir: Path, topic: str) -> list[Path]:
    return [d for d in data_dir.iterdir() if d.name.startswith(f"{topic}-")]


def test_a_deleted_topic_leaves_service_at_once_and_is_retired_in_slices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _broker_config(tmp_path)
    retired: list[bool] = []
    original = PartitionReplica.stop

    def slow_stop(replica: PartitionReplica, *, delete: bool = False) -> None:
        time.sleep(RETIRE_BUDGET_S / 2)
        retired.append(delete)
        original(replica, delete=delete)

    async def run() -> None:
        async with _broker(config, _wide_image()) as b:
            await _settled(b)
            assert len(_partition_dirs(config.data_dir, "wide")) == PARTITIONS
            monkeypatch.setattr(PartitionReplica, "stop", slow_stop)
            removal = RemoveTopicRecord(topic_id=topic_id_for("wide"))
            b.image = b.image.apply(removal, b.image.last_offset + 1)
            b.replica_manager.reconcile()
            assert b.replicas == {}, "out of service at once"
            b.replica_manager.reconcile()
            assert 0 < len(retired) <= 3, "one time budget per pass"
            assert b.replica_manager.reconcile_scheduled, "the rest is scheduled, not dropped"
            await _until(lambda: not b.replica_manager.retiring, "every replica retired")
            assert len(retired) == PARTITIONS and all(retired), "closed without a flush"
            await _until(
                lambda: not _partition_dirs(config.data_dir, "wide"), "every directory deleted"
            )

    asyncio.run(run())


def test_a_topic_recreated_under_the_same_name_opens_fresh_logs(tmp_path: Path) -> None:
    config = _broker_config(tmp_path)

    async def run() -> None:
        async with _broker(config, _wide_image()) as b:
            await _settled(b)
            image = b.image
            old = image.topic("wide")
            assert old is not None
            removal = RemoveTopicRecord(topic_id=old.topic_id)
            image = image.apply(removal, image.last_offset + 1)
            again: list[Any] = [TopicRecord(name="wide", topic_id="wide-again")]
            again += [
                PartitionRecord(
                    topic_id="wide-again",
                    partition=p.partition,
                    replicas=p.replicas,
                    isr=p.isr,
                    leader=p.leader,
                )
                for p in (old.partitions[i].to_record(old.topic_id, i) for i in old.partitions)
            ]
            b.image = image.apply_batch(again, image.last_offset + 1, 1)
            b.replica_manager.reconcile()  # NB: one pass: the removal and the new topic
            await _settled(b)
            await _until(lambda: not b.replica_manager.retiring, "every old replica retired")
            assert {r.topic_id for r in b.replicas.values()} == {"wide-again"}
            for replica in b.replicas.values():
                assert (replica.directory / "topic_id").read_text() == "wide-again"
                assert replica.directory.exists()

    asyncio.run(run())


def test_a_directory_left_renamed_aside_is_deleted_at_the_first_pass(tmp_path: Path) -> None:
    """A broker that crashed (or stopped) before its worker deleted a retired replica's
    directory deletes it when it starts again."""
    config = _broker_config(tmp_path)
    leftover = config.data_dir / f"gone-0.0123abcd{DELETED_SUFFIX}"
    (leftover / "segments").mkdir(parents=True)
    (leftover / "topic_id").write_text("gone-id")

    async def run() -> None:
        image: MetadataImage = _wide_image()
        async with _broker(config, image) as b:
            await _settled(b)
            await _until(lambda: not leftover.exists(), "the leftover deleted")

    asyncio.run(run())
