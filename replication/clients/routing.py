"""Where `Producer.send` and `send_batch` put a record: the per-topic state they read on every
call (cached per metadata snapshot), and murmur2 key partitions memoised for hot keys."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import final

from kraft.types import TopicPartition
from replication.clients.batch import ProducerBatch
from replication.clients.metadata import ClusterSnapshot
from replication.clients.partitioner import partition_for_key

KEY_MEMO_SIZE = 1 << 16


@dataclass(slots=True, kw_only=True)
class TopicState:
    """Per topic, what `Producer.send` needs, valid while ``snapshot`` is current."""

    snapshot: ClusterSnapshot
    count: int
    tps: list[TopicPartition]
    queues: list[deque[ProducerBatch]]
    """The accumulator's queues of ``tps`` (`RecordAccumulator.topic_queues`)."""
    sticky: int = -1
    """The sticky partition for keyless records (KIP-480), -1 until chosen."""


@final
class KeyPartitions:
    """murmur2 partitioning, memoised per topic for hot keys (murmur2 in pure Python is ~1 µs,
    a quarter of the per-record budget); reset when the partition count changes."""

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: dict[str, tuple[int, dict[bytes, int]]] = {}

    def partition(self, topic: str, key: bytes, count: int) -> int:
        cached = self._memo.get(topic)
        if cached is None or cached[0] != count:
            cached = self._memo[topic] = (count, {})
        memo = cached[1]
        partition = memo.get(key)
        if partition is None:
            partition = partition_for_key(key, count)
            if len(memo) < KEY_MEMO_SIZE:
                memo[key] = partition
        return partition


__all__ = ["KEY_MEMO_SIZE", "KeyPartitions", "TopicState"]
