"""A broker that learns of a topic with many partitions opens their replicas in slices, one
slice per event-loop turn, so its heartbeats and fetches go on meanwhile (before, one pass
opened them all: ~10 s for 1,000 replicas, and the controller fenced the silent broker)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from replication.broker.server import MAX_REPLICA_OPENS_PER_RECONCILE
from tests.broker.test_dynamic_topic_config import _broker, _broker_config
from tests.metadata.builders import ImageBuilder

PARTITIONS = MAX_REPLICA_OPENS_PER_RECONCILE * 2 + 5


def test_a_large_topic_is_opened_over_several_loop_turns_and_completely(tmp_path: Path) -> None:
    image = (
        ImageBuilder()
        .with_brokers(101, 102, 103)
        .with_topic("wide", partitions=PARTITIONS, rf=3)
        .build()
    )

    async def run() -> None:
        async with _broker(_broker_config(tmp_path), image) as b:
            assert len(b.replicas) == MAX_REPLICA_OPENS_PER_RECONCILE, "one slice per pass"
            assert b._reconcile_scheduled, "the rest is scheduled, not dropped"
            for _ in range(50):
                if len(b.replicas) == PARTITIONS:
                    break
                await asyncio.sleep(0)
            assert len(b.replicas) == PARTITIONS

    asyncio.run(run())
