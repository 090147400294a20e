"""Kafka-compatible key partitioning (murmur2) and KIP-480 sticky partitioning."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replication.clients.partitioner import (
    StickyPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

# Kafka's own vectors: clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java
# (testMurmur2), plus the short keys Akka checks against Kafka's implementation.
KAFKA_MURMUR2_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"1", -1993445489),
    (b"12", 126087238),
    (b"123", -267702483),
    (b"1234", -1614185708),
    (b"12345", -1188365604),
]

# Key -> partition of 1000, as Kafka's default partitioner picks (kafka-python checks the same
# table against the Java client: test_murmur2_java_compatibility).
KAFKA_KEY_PARTITIONS = [
    (b"", 681),
    (b"a", 524),
    (b"ab", 434),
    (b"abc", 107),
    (b"123456789", 566),
    (b"\x00 ", 742),
]


@pytest.mark.parametrize(("key", "expected"), KAFKA_MURMUR2_VECTORS)
def test_murmur2_matches_kafkas_utils_murmur2(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "partition"), KAFKA_KEY_PARTITIONS)
def test_keyed_records_go_where_kafkas_default_partitioner_sends_them(
    key: bytes, partition: int
) -> None:
    assert partition_for_key(key, 1000) == partition


def test_to_positive_clears_the_sign_bit_like_kafka_not_abs() -> None:
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(5) == 5


@given(key=st.binary(max_size=300), count=st.integers(min_value=1, max_value=10_000))
def test_murmur2_is_a_signed_32_bit_int_and_the_partition_is_in_range(
    key: bytes, count: int
) -> None:
    h = murmur2(key)
    assert -(2**31) <= h < 2**31
    assert 0 <= partition_for_key(key, count) < count
    assert partition_for_key(key, count) == partition_for_key(bytes(key), count)


def test_sticky_partitioner_sticks_until_a_new_batch_is_needed() -> None:
    sticky = StickyPartitioner(random.Random(7))
    first = sticky.partition("t", 6, list(range(6)))
    assert all(sticky.partition("t", 6, list(range(6))) == first for _ in range(100))
    second = sticky.on_new_batch("t", 6, list(range(6)), previous=first)
    assert second != first
    assert sticky.partition("t", 6, list(range(6))) == second


def test_sticky_partitioner_switches_only_away_from_the_partition_that_needed_a_batch() -> None:
    """StickyPartitionCache.nextPartition: another thread may have switched already."""
    sticky = StickyPartitioner(random.Random(1))
    current = sticky.partition("t", 4, [0, 1, 2, 3])
    stale = (current + 1) % 4
    assert sticky.on_new_batch("t", 4, [0, 1, 2, 3], previous=stale) == current


def test_sticky_partitioner_picks_only_available_partitions_and_spreads_over_them() -> None:
    sticky = StickyPartitioner(random.Random(3))
    seen = set()
    current = sticky.partition("t", 10, [2, 5, 7])
    for _ in range(200):
        current = sticky.on_new_batch("t", 10, [2, 5, 7], previous=current)
        seen.add(current)
    assert seen == {2, 5, 7}


def test_sticky_partitioner_with_one_or_no_available_partition() -> None:
    sticky = StickyPartitioner(random.Random(0))
    assert sticky.partition("t", 3, [1]) == 1
    assert sticky.on_new_batch("t", 3, [1], previous=1) == 1
    assert 0 <= sticky.on_new_batch("u", 3, [], previous=-1) < 3


def test_sticky_partitions_are_per_topic_and_replayable_from_the_seed() -> None:
    def choices(seed: int) -> list[int]:
        sticky = StickyPartitioner(random.Random(seed))
        out = [sticky.partition(t, 8, list(range(8))) for t in ("a", "b", "c")]
        out += [sticky.on_new_batch("a", 8, list(range(8)), previous=out[0]) for _ in range(1)]
        return out

    assert choices(42) == choices(42)
