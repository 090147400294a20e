"""Majority and commit-offset math, kept apart so it can be table-tested (etcd's ``quorum/``).

KIP-595: the leader's high watermark is the largest offset that a majority of voters
(the leader included) has fetched past, and it may only be advanced once that offset is
past the start of the leader's own epoch (Raft §5.4.2: commit only entries of the current
term by counting replicas).
"""

from __future__ import annotations

from collections.abc import Iterable


def majority_size(voter_count: int) -> int:
    """The number of votes that make a majority of ``voter_count`` voters."""
    assert voter_count > 0, "a quorum needs at least one voter"
    return voter_count // 2 + 1


def has_majority(granted: int, voter_count: int) -> bool:
    """Whether ``granted`` votes (or acks) are a majority of ``voter_count`` voters."""
    return granted >= majority_size(voter_count)


def majority_end_offset(end_offsets: Iterable[int], voter_count: int) -> int:
    """The largest offset that a majority of voters has reached.

    ``end_offsets`` holds one entry per voter whose end offset is known (unknown voters are
    left out and count as behind everyone); the answer is the ``majority``-th largest, or
    -1 when fewer than a majority of voters are known.
    """
    ordered = sorted(end_offsets, reverse=True)
    assert len(ordered) <= voter_count, "more end offsets than voters"
    k = majority_size(voter_count)
    if len(ordered) < k:
        return -1
    return ordered[k - 1]


def next_high_watermark(
    *,
    current: int,
    end_offsets: Iterable[int],
    voter_count: int,
    epoch_start_offset: int,
) -> int | None:
    """The leader's new high watermark, or None if it must not move.

    KIP-595 / Raft §5.4.2: a majority must have fetched past ``epoch_start_offset`` (the
    leader-change batch that opens the leader's epoch) before any offset commits; the high
    watermark never moves backwards.
    """
    candidate = majority_end_offset(end_offsets, voter_count)
    if candidate <= epoch_start_offset or candidate <= current:
        return None
    return candidate


__all__ = ["has_majority", "majority_end_offset", "majority_size", "next_high_watermark"]
