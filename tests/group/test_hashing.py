"""Kafka's group -> __consumer_offsets partition rule, checked against values printed by Java
(``String.hashCode`` and ``Utils.abs(h) % 50``, run with OpenJDK 21)."""

from __future__ import annotations

import pytest

from replication.group import java_string_hashcode, partition_for_group
from replication.group.hashing import kafka_abs

JAVA = [
    ("", 0, 0),
    ("a", 97, 47),
    ("hello", 99162322, 22),
    ("my-group", -1906497762, 12),
    ("polygenelubricants", -2147483648, 0),
    ("GydZG_", -2147483648, 0),
    ("DESIGNING WORKHOUSES", -2147483648, 0),
    ("\u00e9\u20ac\U0001f600", 16752006, 6),  # a surrogate pair counts as two chars
    ("console-consumer-12345", 158455506, 6),
    ("test-group", 627841412, 12),
]


@pytest.mark.parametrize(("group_id", "hashcode", "partition"), JAVA)
def test_hashcode_and_partition_match_java(group_id: str, hashcode: int, partition: int) -> None:
    assert java_string_hashcode(group_id) == hashcode
    assert partition_for_group(group_id, 50) == partition


def test_integer_min_value_maps_to_partition_zero_as_kafkas_utils_abs() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert partition_for_group("polygenelubricants", 7) == 0


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError):
        partition_for_group("g", 0)
