"""Which ``__consumer_offsets`` partition a group belongs to: exactly Kafka's rule.

``GroupCoordinatorService.partitionFor`` is ``Utils.abs(groupId.hashCode()) % numPartitions``.
Java's ``String.hashCode`` is ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units in 32-bit
two's-complement arithmetic; ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 (``Math.abs`` would
leave it negative). Python's ``hash()`` is salted per process and must never be used here.
"""

from __future__ import annotations

_INT_MIN = -(2**31)


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode()`` of ``s``, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):  # one UTF-16 code unit at a time, as Java's char[]
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Integer.MIN_VALUE`` maps to 0, not to itself."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for_group(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` (Kafka's ``partitionFor``)."""
    if partitions <= 0:
        raise ValueError("offsets.topic.num.partitions must be positive")
    return kafka_abs(java_string_hashcode(group_id)) % partitions
