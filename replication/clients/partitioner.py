"""Choosing a partition: Kafka's murmur2 for keyed records, KIP-480's sticky partitions otherwise.

Keyed records go to ``to_positive(murmur2(key)) % num_partitions``, bit for bit what Kafka's
default partitioner (``BuiltInPartitioner.partitionForKey``, formerly ``DefaultPartitioner``)
computes, so a key written by this producer and by the Java producer lands in the same
partition (tested against Kafka's ``UtilsTest.testMurmur2`` vectors).

Keyless records use the sticky partitioner of KIP-480 (Kafka's ``StickyPartitionCache``): every
record of a topic goes to one partition until the producer needs a new batch for it (the
batch filled up or was sent), then it switches to another partition, chosen at random among
those with a leader, never the same one twice in a row when there is a choice. Fewer, fuller
batches: lower latency and far fewer requests than round robin.

Pure: no clock, no global randomness (the generator is injected, STYLE §1).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from typing import final

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = [struct.Struct(f"<{n}I") for n in range(64)]


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the 32-bit MurmurHash2 (seed 0x9747b28c), as a signed int.

    NB: Kafka's variant reads little-endian words and mixes the tail like MurmurHash2 proper;
    Java's 32-bit wrap-around is emulated with ``& 0xFFFFFFFF`` after each multiply.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n_words = length >> 2
    if n_words:
        words = (
            _WORDS[n_words].unpack_from(data)
            if n_words < 64
            else struct.unpack_from(f"<{n_words}I", data)
        )
        for k in words:
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``: MIN_VALUE maps to 0)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition of a keyed record, exactly as Kafka's default partitioner picks it."""
    return to_positive(murmur2(key)) % num_partitions


@final
class StickyPartitioner:
    """KIP-480's sticky partition per topic for keyless records.

    The producer calls `partition` for each keyless record and `on_new_batch` when appending
    to the sticky partition would open a new batch there; only then does the choice change.

    Args:
        rng: the injected random generator (seed it in tests for a replayable choice).
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}

    def current(self, topic: str) -> int | None:
        """The sticky partition of ``topic``, if one was chosen (the per-record fast path)."""
        return self._sticky.get(topic)

    def partition(self, topic: str, num_partitions: int, available: Sequence[int]) -> int:
        """The current sticky partition of ``topic`` (choosing one the first time).

        Args:
            num_partitions: how many partitions the topic has.
            available: the partitions that currently have a leader (may be empty).
        """
        current = self._sticky.get(topic)
        if current is not None and current < num_partitions:
            return current
        return self.on_new_batch(topic, num_partitions, available, previous=-1)

    def on_new_batch(
        self, topic: str, num_partitions: int, available: Sequence[int], previous: int
    ) -> int:
        """Switch ``topic`` to another partition because ``previous`` needs a new batch.

        Mirrors ``StickyPartitionCache.nextPartition``: only the partition that triggered the
        new batch is switched away from (another thread may have switched already), a random
        available partition other than the old one is chosen, and with no available partition
        any partition is.
        """
        old = self._sticky.get(topic)
        if old is not None and old != previous and old < num_partitions:
            return old
        if not available:
            new = self._rng.randrange(num_partitions)
        elif len(available) == 1:
            new = available[0]
        else:
            new = old if old is not None else -1
            while new == old or new < 0:
                new = available[self._rng.randrange(len(available))]
        self._sticky[topic] = new
        return new


__all__ = ["StickyPartitioner", "murmur2", "partition_for_key", "to_positive"]
