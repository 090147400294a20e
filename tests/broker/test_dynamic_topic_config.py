"""Dynamic topic configs reach open replicas live, as in Kafka: `ReplicaManager.reconcile` after a
ConfigRecord (no restart, no leader change), the broker's own ``min.insync.replicas`` as the
default of topics that set none, and ``flush.ms`` honoured for an idle log by the tick.

The broker here is a real `BrokerServer` that is never started: the test sets its metadata
image and broker epoch and calls the reconcile step the observer would schedule."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from kraft.metadata import ConfigRecord, ConfigResourceType
from kraft.metadata.image import MetadataImage, PartitionRegistration
from kraft.types import TopicPartition
from replication.broker.config import BrokerNodeConfig
from replication.broker.replicas.partition import PartitionReplica
from replication.broker.replicas.topic_settings import resolve_min_insync_replicas
from replication.broker.server import BrokerServer
from replication.core import (
    BrokerStatus,
    FollowerFetchRequest,
    FollowerFetchResponse,
    ReplicationConfig,
)
from storage.config import LONG_MAX, LogConfig
from storage.errors import ErrorCode
from tests.metadata.builders import ImageBuilder
from tests.replication.harness import TP, batch

TOPIC = TopicPartition("t", 0)
LEADER = 101


def _broker_config(tmp_path: Path, **props: str) -> BrokerNodeConfig:
    return BrokerNodeConfig.from_properties(
        {
            "node.id": str(LEADER),
            "controller.quorum.voters": "1@127.0.0.1:1",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / "broker"),
            **props,
        }
    )


def _image(
    *, isr: tuple[int, ...] = (101, 102), configs: Mapping[str, str] | None = None
) -> MetadataImage:
    return (
        ImageBuilder()
        .with_brokers(101, 102, 103)
        .with_topic("t", assignments=[(101, 102, 103)], configs=configs)
        .with_partition("t", 0, isr=isr, leader=LEADER)
        .build()
    )


def _with_config(
    image: MetadataImage, key: str, value: str | None, *, resource: str = "t"
) -> MetadataImage:
    kind = ConfigResourceType.TOPIC if resource == "t" else ConfigResourceType.BROKER
    record = ConfigRecord(resource_type=kind, resource_name=resource, name=key, value=value)
    return image.apply_batch([record], base_offset=image.last_offset + 1, epoch=1)


@asynccontextmanager
async def _broker(config: BrokerNodeConfig, image: MetadataImage) -> AsyncIterator[BrokerServer]:
    server = BrokerServer(config)
    server.broker_epoch = 7
    server.image = image
    server.replica_manager.reconcile()
    try:
        yield server
    finally:
        await server.close_unstarted()


def _replica(server: BrokerServer) -> PartitionReplica:
    return server.replicas[TOPIC]


def _reconcile(server: BrokerServer, image: MetadataImage) -> None:
    server.image = image
    server.replica_manager.reconcile()


# --- min.insync.replicas --------------------------------------------------------------------


def test_a_raised_min_insync_replicas_reaches_the_leader_without_a_leader_change(
    tmp_path: Path,
) -> None:
    """Kafka applies a topic's dynamic config at once; before, the leader read it only when it
    became leader, so raising it to 3 with an ISR of 2 still acknowledged acks=all."""

    async def run() -> None:
        async with _broker(
            _broker_config(tmp_path), _image(configs={"min.insync.replicas": "2"})
        ) as b:
            leader = _replica(b).leader
            assert leader is not None and leader.min_isr == 2
            _reconcile(b, _with_config(b.image, "min.insync.replicas", "3"))
            assert _replica(b).leader is leader, "the same leader core, no leader change"
            assert leader.min_isr == 3 and leader.is_under_min_isr
            done = await _replica(b).produce(-1, 1000, batch(b"x", count=3))
            assert done.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
            # Deleting the topic's value falls back to the default (1 here).
            _reconcile(b, _with_config(b.image, "min.insync.replicas", None))
            assert leader.min_isr == 1

    asyncio.run(run())


def test_the_brokers_min_insync_replicas_is_the_default_of_topics_that_set_none(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        config = _broker_config(tmp_path, **{"min.insync.replicas": "2"})
        async with _broker(config, _image()) as b:
            leader = _replica(b).leader
            assert leader is not None and leader.min_isr == 2  # was 1: the property was ignored
            # The cluster-wide dynamic default overrides the broker's property ...
            _reconcile(b, _with_config(b.image, "min.insync.replicas", "3", resource=""))
            assert leader.min_isr == 3
            # ... and the topic's own value overrides both.
            _reconcile(b, _with_config(b.image, "min.insync.replicas", "1"))
            assert leader.min_isr == 1

    asyncio.run(run())


def test_min_insync_replicas_resolution_order() -> None:
    assert resolve_min_insync_replicas({}, {}, 2) == 2
    assert resolve_min_insync_replicas({}, {"min.insync.replicas": "3"}, 2) == 3
    assert resolve_min_insync_replicas({"min.insync.replicas": "1"}, {"x": "3"}, 2) == 1
    assert resolve_min_insync_replicas({"min.insync.replicas": "zero"}, {}, 2) == 2  # skipped


# --- log configs ----------------------------------------------------------------------------


def test_topic_log_configs_reach_the_open_log_without_a_restart(tmp_path: Path) -> None:
    async def run() -> None:
        async with _broker(
            _broker_config(tmp_path, **{"log.retention.ms": "60000"}), _image()
        ) as b:
            replica = _replica(b)
            assert replica.log.config.retention_ms == 60_000
            image = b.image
            for key, value in {
                "retention.ms": "1000",
                "segment.bytes": "4096",
                "max.message.bytes": "200",
                "flush.ms": "50",
            }.items():
                image = _with_config(image, key, value)
            _reconcile(b, image)
            assert _replica(b) is replica, "the same open replica"
            config = replica.log.config
            assert (config.retention_ms, config.segment_bytes) == (1000, 4096)
            assert (config.max_message_bytes, config.flush_ms) == (200, 50)
            # The log uses it at once: a batch over the new max.message.bytes is refused.
            done = await replica.produce(1, 1000, batch(b"x" * 100, count=3))
            assert done.error_code is ErrorCode.MESSAGE_TOO_LARGE
            # A cluster-wide dynamic default reaches it too (the topic sets no segment.ms).
            _reconcile(b, _with_config(b.image, "log.roll.ms", "5000", resource=""))
            assert replica.log.config.segment_ms == 5000

    asyncio.run(run())


def test_a_raised_min_insync_replicas_fails_waiting_acks_all_produces(
    tmp_path: Path,
) -> None:
    """A produce waiting for the follower when the minimum rises above the ISR fails with
    NOT_ENOUGH_REPLICAS_AFTER_APPEND (its high watermark is frozen below the minimum)."""

    async def run() -> None:
        async with _broker(_broker_config(tmp_path), _image()) as b:
            waiting = asyncio.create_task(_replica(b).produce(-1, 10_000, batch(b"x", count=2)))
            await _until(lambda: _replica(b).leader is not None and _leader_waiting(b) == 1)
            _reconcile(b, _with_config(b.image, "min.insync.replicas", "3"))
            done = await asyncio.wait_for(waiting, 5)
            assert done.error_code is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    asyncio.run(run())


def _leader_waiting(b: BrokerServer) -> int:
    leader = _replica(b).leader
    return 0 if leader is None else leader.waiting_produces


async def _until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


# --- flush.ms on an idle log ----------------------------------------------------------------


def test_the_tick_flushes_an_idle_log_once_flush_ms_elapsed(tmp_path: Path) -> None:
    """``flush.ms`` was checked only on append, so the last writes of an idle partition were
    never flushed by time (Kafka's log flusher checks every log periodically)."""

    async def run() -> None:
        replica = PartitionReplica(
            topic_partition=TP,
            topic_id="tid",
            directory=tmp_path / "p",
            log_config=LogConfig(flush_ms=300),
            local_id=1,
            broker_epoch=10,
            fetch_from_leader=_no_fetch,
            send_alter_partition=lambda _replica, _send: None,
        )
        try:
            registration = PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=0)
            replica.apply_registration(
                registration, {1: BrokerStatus(broker_epoch=10)}, ReplicationConfig()
            )
            done = await replica.produce(1, 1000, batch(b"x", count=3))
            assert done.error_code is ErrorCode.NONE
            assert replica.log.recovery_point < replica.log.log_end_offset, "flushed on append"
            replica.tick()
            assert replica.log.recovery_point < replica.log.log_end_offset, "flushed too early"

            def flushed() -> bool:
                replica.tick()  # what the broker's tick task does at the flush.ms deadline
                return replica.log.recovery_point == replica.log.log_end_offset

            await _until(flushed)
            # flush.ms "never" (the default) leaves an idle log alone.
            replica.update_log_config(LogConfig(flush_ms=LONG_MAX))
            assert replica.maybe_flush() is False
        finally:
            replica.stop()

    asyncio.run(run())


async def _no_fetch(request: FollowerFetchRequest) -> FollowerFetchResponse:
    raise AssertionError("a leader does not fetch")  # pragma: no cover
