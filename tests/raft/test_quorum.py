"""Majority and high-watermark math (etcd's ``quorum/`` table tests)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.raft.quorum import has_majority, majority_end_offset, majority_size, next_high_watermark


@pytest.mark.parametrize(
    ("voters", "majority"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)]
)
def test_majority_size(voters: int, majority: int) -> None:
    assert majority_size(voters) == majority
    assert has_majority(majority, voters)
    assert not has_majority(majority - 1, voters)


@pytest.mark.parametrize(
    ("end_offsets", "voters", "expected"),
    [
        ([], 1, -1),
        ([5], 1, 5),
        ([5, 3, 9], 3, 5),
        ([5, 3], 3, 3),
        ([5], 3, -1),
        ([10, 10, 0, 0, 0], 5, 0),
        ([10, 10, 10, 0, 0], 5, 10),
        ([7, 1, 4, 9, 2], 5, 4),
        ([3, 3, 3], 3, 3),
    ],
)
def test_majority_end_offset(end_offsets: list[int], voters: int, expected: int) -> None:
    """The high watermark candidate is the largest offset a majority has reached."""
    assert majority_end_offset(end_offsets, voters) == expected


@pytest.mark.parametrize(
    ("current", "ends", "epoch_start", "expected"),
    [
        (0, [10, 10, 0], 5, 10),  # majority past the epoch start: commit
        (0, [10, 5, 0], 5, None),  # majority only at the epoch start batch: not yet (§5.4.2)
        (0, [10, 6, 0], 5, 6),
        (8, [10, 6, 0], 5, None),  # never backwards
        (8, [10, 9, 9], 5, 9),
        (0, [4, 4, 4], 5, None),  # entries of older epochs only: wait for our own
    ],
)
def test_next_high_watermark_needs_majority_past_epoch_start(
    current: int, ends: list[int], epoch_start: int, expected: int | None
) -> None:
    """Raft §5.4.2: "Raft never commits log entries from previous terms by counting
    replicas. Only log entries from the leader's current term are committed by counting
    replicas." Reference: Raft §5.4.2, KIP-595."""
    got = next_high_watermark(
        current=current, end_offsets=ends, voter_count=3, epoch_start_offset=epoch_start
    )
    assert got == expected


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=7))
def test_majority_end_offset_is_reached_by_a_majority(ends: list[int]) -> None:
    value = majority_end_offset(ends, len(ends))
    assert sum(1 for e in ends if e >= value) >= majority_size(len(ends))
    assert value in ends
