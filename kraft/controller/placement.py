"""Replica placement for new topics and partitions: Kafka's (rack-aware) assignment.

This is the classic algorithm of Kafka's ``AdminUtils.assignReplicasToBrokers``, run over the
*active* brokers only (unfenced, not shutting down):

- Without racks: partition ``p``'s first replica (its preferred leader) is broker
  ``(p + start_index) % n`` of the sorted broker list; the other replicas follow at a shift that
  grows by one every ``n`` partitions, so followers spread as evenly as leaders. With
  ``num_partitions`` a multiple of ``n`` every broker leads exactly ``num_partitions / n``
  partitions and holds exactly ``num_partitions * rf / n`` replicas.
- With racks (any broker declares one; brokers without a rack share one anonymous rack): the
  brokers are first arranged rack-alternating (``r1 b1, r2 b4, r1 b2, ...``); the first replica
  is picked as above, and each next replica is the next broker in the shifted walk whose rack
  holds no replica of the partition yet (once every rack has one, any broker not yet used). A
  partition thus spans ``min(rf, racks)`` racks.

``start_index`` and ``replica_shift`` are drawn from the injected ``rng`` unless given, which
keeps the core deterministic under one seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from storage.errors import InvalidPartitionsError, InvalidReplicationFactorError


@dataclass(frozen=True, slots=True, kw_only=True)
class UsableBroker:
    """A broker placement may use: its id and optional rack."""

    broker_id: int
    rack: str | None = None


def place_replicas(
    brokers: Sequence[UsableBroker],
    num_partitions: int,
    replication_factor: int,
    *,
    start_partition_id: int = 0,
    rng: random.Random | None = None,
    start_index: int | None = None,
    replica_shift: int | None = None,
) -> list[tuple[int, ...]]:
    """Replica lists for partitions ``start_partition_id .. start_partition_id + n - 1``.

    Args:
        brokers: the brokers to place on (the caller passes the active ones).
        num_partitions: how many partitions to place (> 0).
        replication_factor: replicas per partition (> 0 and <= len(brokers)).
        start_partition_id: the id of the first partition (CreatePartitions continues a topic).
        rng: draws ``start_index`` and ``replica_shift`` when they are not given.
        start_index: index of partition 0's first replica in the (arranged) broker list.
        replica_shift: initial distance between a partition's first and second replica.

    Returns:
        One replica tuple per partition; the first replica is the preferred leader.

    Raises:
        InvalidPartitionsError: ``num_partitions <= 0``.
        InvalidReplicationFactorError: ``replication_factor <= 0`` or more than the brokers.
    """
    if num_partitions <= 0:
        raise InvalidPartitionsError(f"number of partitions must be positive: {num_partitions}")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"replication factor must be positive: {replication_factor}"
        )
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the "
            f"{len(brokers)} available brokers"
        )
    ids = [b.broker_id for b in brokers]
    assert len(set(ids)) == len(ids), f"duplicate brokers {ids}"
    n = len(brokers)
    if start_index is None:
        start_index = rng.randrange(n) if rng is not None else 0
    if replica_shift is None:
        replica_shift = rng.randrange(n) if rng is not None else 0
    if any(b.rack is not None for b in brokers):
        return _place_rack_aware(
            brokers,
            num_partitions,
            replication_factor,
            start_partition_id,
            start_index,
            replica_shift,
        )
    return _place_plain(
        sorted(ids),
        num_partitions,
        replication_factor,
        start_partition_id,
        start_index,
        replica_shift,
    )


def _replica_index(first: int, shift: int, replica: int, n: int) -> int:
    # Kafka AdminUtils.replicaIndex: never lands on `first` itself.
    return (first + 1 + (shift + replica) % (n - 1)) % n


def _place_plain(
    ids: list[int], num_partitions: int, rf: int, start_partition: int, start: int, shift: int
) -> list[tuple[int, ...]]:
    n = len(ids)
    out: list[tuple[int, ...]] = []
    partition = start_partition
    for _ in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [ids[first]]
        replicas.extend(ids[_replica_index(first, shift, j, n)] for j in range(rf - 1))
        out.append(tuple(replicas))
        partition += 1
    return out


def rack_alternated(brokers: Sequence[UsableBroker]) -> list[UsableBroker]:
    """Kafka's ``getRackAlternatedBrokerList``: round-robin over the racks in rack order, taking
    the brokers of each rack in id order."""
    by_rack: dict[str, list[UsableBroker]] = {}
    for broker in sorted(brokers, key=lambda b: b.broker_id):
        by_rack.setdefault(broker.rack or "", []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    out: list[UsableBroker] = []
    depth = 0
    while len(out) < len(brokers):
        out.extend(queue[depth] for queue in queues if depth < len(queue))
        depth += 1
    return out


def _place_rack_aware(
    brokers: Sequence[UsableBroker],
    num_partitions: int,
    rf: int,
    start_partition: int,
    start: int,
    shift: int,
) -> list[tuple[int, ...]]:
    arranged = rack_alternated(brokers)
    n = len(arranged)
    num_racks = len({b.rack or "" for b in arranged})
    out: list[tuple[int, ...]] = []
    partition = start_partition
    for _ in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        leader = arranged[first]
        replicas = [leader.broker_id]
        racks_used = {leader.rack or ""}
        used = {leader.broker_id}
        k = 0
        for _ in range(rf - 1):
            while True:
                candidate = arranged[_replica_index(first, shift * num_racks, k, n)]
                k += 1
                rack = candidate.rack or ""
                rack_ok = rack not in racks_used or len(racks_used) == num_racks
                broker_ok = candidate.broker_id not in used or len(used) == n
                if rack_ok and broker_ok:
                    replicas.append(candidate.broker_id)
                    racks_used.add(rack)
                    used.add(candidate.broker_id)
                    break
        out.append(tuple(replicas))
        partition += 1
    return out


__all__ = ["UsableBroker", "place_replicas", "rack_alternated"]
