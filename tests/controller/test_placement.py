"""Replica placement: even leaders and replicas, rack awareness, Kafka's errors."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.controller import UsableBroker, place_replicas
from kraft.controller.placement import rack_alternated
from storage.errors import InvalidPartitionsError, InvalidReplicationFactorError


def brokers(*ids: int, racks: dict[int, str] | None = None) -> list[UsableBroker]:
    return [UsableBroker(broker_id=b, rack=(racks or {}).get(b)) for b in ids]


def test_placement_matches_kafkas_assignment_for_fixed_start_and_shift() -> None:
    # AdminUtils.assignReplicasToBrokers with startIndex=0, nextReplicaShift=0 on brokers 0..4.
    placed = place_replicas(brokers(0, 1, 2, 3, 4), 10, 3, start_index=0, replica_shift=0)
    assert placed[:6] == [(0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1), (0, 2, 3)]


@given(
    n=st.integers(1, 8),
    rounds=st.integers(1, 4),
    data=st.data(),
    seed=st.integers(0, 2**32),
)
def test_leaders_and_replicas_spread_exactly_evenly_over_whole_rounds(
    n: int, rounds: int, data: st.DataObject, seed: int
) -> None:
    rf = data.draw(st.integers(1, n))
    placed = place_replicas(brokers(*range(n)), n * rounds, rf, rng=random.Random(seed))
    assert all(len(set(r)) == rf for r in placed)
    assert set(Counter(r[0] for r in placed).values()) == {rounds}
    assert set(Counter(b for r in placed for b in r).values()) == {rounds * rf}


@given(
    n=st.integers(1, 8),
    partitions=st.integers(1, 40),
    data=st.data(),
    seed=st.integers(0, 2**32),
)
def test_leader_counts_differ_by_at_most_one(
    n: int, partitions: int, data: st.DataObject, seed: int
) -> None:
    rf = data.draw(st.integers(1, n))
    placed = place_replicas(brokers(*range(10, 10 + n)), partitions, rf, rng=random.Random(seed))
    counts = Counter(r[0] for r in placed)
    all_counts = [counts.get(b, 0) for b in range(10, 10 + n)]
    assert max(all_counts) - min(all_counts) <= 1


@given(
    rack_of=st.lists(st.sampled_from("abc"), min_size=2, max_size=9),
    partitions=st.integers(1, 30),
    data=st.data(),
    seed=st.integers(0, 2**32),
)
def test_rack_aware_placement_spans_as_many_racks_as_it_can(
    rack_of: list[str], partitions: int, data: st.DataObject, seed: int
) -> None:
    racks = {b: rack for b, rack in enumerate(rack_of)}
    rf = data.draw(st.integers(1, len(racks)))
    placed = place_replicas(brokers(*racks, racks=racks), partitions, rf, rng=random.Random(seed))
    num_racks = len(set(rack_of))
    for replicas in placed:
        assert len(set(replicas)) == rf
        assert len({racks[b] for b in replicas}) == min(rf, num_racks)


def test_rack_aware_leaders_are_even_when_racks_are_balanced() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    placed = place_replicas(brokers(*racks, racks=racks), 12, 3, start_index=0, replica_shift=0)
    assert set(Counter(r[0] for r in placed).values()) == {2}


def test_rack_alternated_list_round_robins_over_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "c", 5: "c", 6: "c"}
    assert [b.broker_id for b in rack_alternated(brokers(*racks, racks=racks))] == [
        1,
        3,
        4,
        2,
        5,
        6,
    ]


def test_placement_is_deterministic_for_a_seed() -> None:
    a = place_replicas(brokers(1, 2, 3, 4), 8, 2, rng=random.Random(7))
    b = place_replicas(brokers(1, 2, 3, 4), 8, 2, rng=random.Random(7))
    assert a == b


def test_create_partitions_continues_the_rotation_from_the_start_partition() -> None:
    whole = place_replicas(brokers(1, 2, 3), 6, 2, start_index=1, replica_shift=0)
    tail = place_replicas(
        brokers(1, 2, 3), 3, 2, start_partition_id=3, start_index=1, replica_shift=0
    )
    assert whole[3:] == tail


def test_replication_factor_above_available_brokers_is_invalid_replication_factor() -> None:
    with pytest.raises(InvalidReplicationFactorError):
        place_replicas(brokers(1, 2), 1, 3)


@pytest.mark.parametrize("rf", [0, -1])
def test_non_positive_replication_factor_is_invalid(rf: int) -> None:
    with pytest.raises(InvalidReplicationFactorError):
        place_replicas(brokers(1, 2), 1, rf)


@pytest.mark.parametrize("partitions", [0, -3])
def test_non_positive_partition_count_is_invalid_partitions(partitions: int) -> None:
    with pytest.raises(InvalidPartitionsError):
        place_replicas(brokers(1, 2), partitions, 1)
