"""A broker builds its metadata images off the event loop (Kafka's ``MetadataLoader``): a
committed batch of a 10,000-partition topic took its loop (heartbeats, Raft and follower
fetches) for ~0.2 s of decoding and folding; the loop now keeps serving while a worker thread
builds the image, which is then published in commit order."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kraft.metadata import MetadataImage, RemoveTopicRecord
from kraft.metadata.codec import encode_record
from replication.broker.lifecycle.metadata_loader import MetadataLoader
from replication.broker.server import BrokerServer
from storage.errors import InvalidRecordError
from tests.broker.test_dynamic_topic_config import _broker_config
from tests.metadata.builders import ImageBuilder, topic_id_for

WIDE = 10_000


def _batch(records: list[bytes], base_offset: int) -> list[tuple[int, bytes]]:
    return [(base_offset + i, value) for i, value in enumerate(records)]


def _wide_topic_batch(partitions: int = WIDE) -> list[tuple[int, bytes]]:
    """One committed batch: three brokers and a topic of ``partitions`` partitions."""
    builder = ImageBuilder().with_brokers(101, 102, 103)
    builder = builder.with_topic("wide", partitions=partitions, rf=3)
    return _batch([encode_record(r) for r in builder.records()], 0)


def test_the_loop_serves_other_work_while_a_large_batch_is_applied(tmp_path: Path) -> None:
    """Behaviour, not a timing: loop turns happen between the batch's hand-over and the new
    image. Before, the observer folded it on the loop, inside the Raft driver's call: the image
    changed before any other callback (a heartbeat, a fetch) could run."""

    async def run() -> None:
        broker = BrokerServer(_broker_config(tmp_path))
        try:
            turns = 0
            published: list[int] = []
            stop = asyncio.Event()

            async def other_work() -> None:
                nonlocal turns
                while not stop.is_set():
                    turns += 1
                    await asyncio.sleep(0)

            worker = asyncio.create_task(other_work())
            await asyncio.sleep(0)
            before = turns
            broker.raft.state_machine.apply_batch(0, 1, _wide_topic_batch(), False)  # type: ignore[attr-defined]
            if broker.image.last_offset >= 0:
                published.append(turns)
            for _ in range(100_000):
                if broker.image.last_offset >= 0:
                    break
                await asyncio.sleep(0.001)
            published.append(turns)
            stop.set()
            await worker
            assert published[0] > before, "loop turns ran before the image changed"
            topic = broker.image.topic("wide")
            assert topic is not None and len(topic.partitions) == WIDE
        finally:
            await broker.close_unstarted()

    asyncio.run(run())


def test_images_are_published_in_commit_order_and_a_snapshot_holds_every_batch_handed_over() -> (
    None
):
    """The Raft driver counts a batch applied when ``apply_batch`` returns and snapshots at that
    offset: the snapshot must hold it even if its image is not published yet."""

    async def run() -> None:
        published: list[MetadataImage] = []
        errors: list[BaseException] = []
        loader = MetadataLoader(published.append, errors.append)
        try:
            first = _wide_topic_batch(100)
            loader.apply_batch(0, 1, first, False)
            removal = encode_record(RemoveTopicRecord(topic_id=topic_id_for("wide")))
            loader.apply_batch(len(first), 1, _batch([removal], len(first)), False)
            snapshot = await asyncio.to_thread(loader.snapshot_writer())
            restored = MetadataImage.from_snapshot(snapshot)
            assert restored.last_offset == len(first)
            assert restored.topic("wide") is None
            while loader.pending:
                await asyncio.sleep(0.001)
            assert [image.last_offset for image in published] == [len(first) - 1, len(first)]
            assert published[-1] == restored
            assert errors == []
            # A snapshot installed from the leader replaces the state, in turn.
            loader.restore(published[0].to_snapshot())
            while loader.pending:
                await asyncio.sleep(0.001)
            assert published[-1] == published[0]
        finally:
            loader.close()

    asyncio.run(run())


def test_a_batch_that_does_not_decode_reports_one_error_and_publishes_nothing_after_it() -> None:
    async def run() -> None:
        published: list[MetadataImage] = []
        errors: list[BaseException] = []
        loader = MetadataLoader(published.append, errors.append)
        try:
            batch = _wide_topic_batch(1)
            loader.apply_batch(0, 1, batch[:4], False)
            loader.apply_batch(4, 1, [(4, b"not json")], False)
            loader.apply_batch(5, 1, _batch([b for _, b in batch[4:6]], 5), False)
            while loader.pending:
                await asyncio.sleep(0.001)
            assert [image.last_offset for image in published] == [3]
            assert len(errors) == 1 and isinstance(errors[0], InvalidRecordError)
        finally:
            loader.close()

    asyncio.run(run())
