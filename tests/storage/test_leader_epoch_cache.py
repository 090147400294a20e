"""`LeaderEpochCache`: assignment, OffsetForLeaderEpoch answers and truncation (KIP-101/279).

Cases follow Kafka's ``LeaderEpochFileCacheTest``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def cache_with(*entries: tuple[int, int], log_end_offset: int = 100) -> LeaderEpochCache:
    cache = LeaderEpochCache(None, lambda: log_end_offset)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def pairs(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries]


def test_latest_epoch_ends_at_the_log_end_offset() -> None:
    cache = cache_with((2, 10), log_end_offset=42)
    assert cache.end_offset_for(2) == (2, 42)


def test_undefined_epoch_and_an_empty_cache_answer_undefined() -> None:
    assert cache_with().end_offset_for(0) == UNDEFINED
    assert cache_with((1, 0)).end_offset_for(UNDEFINED_EPOCH) == UNDEFINED


def test_an_epoch_ends_where_the_next_epoch_starts() -> None:
    """Kafka: shouldGetFirstOffsetOfSubsequentEpochWhenOffsetRequestedForPreviousEpoch."""
    cache = cache_with((1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16))
    assert pairs(cache) == [(1, 11), (2, 13), (3, 15)]
    assert cache.end_offset_for(1) == (1, 13)
    assert cache.end_offset_for(2) == (2, 15)


def test_an_untracked_epoch_answers_the_largest_epoch_below_it() -> None:
    """Kafka: shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested."""
    cache = cache_with((0, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(1) == (0, 13)
    assert cache.end_offset_for(3) == (2, 17)


def test_an_epoch_above_the_latest_answers_undefined() -> None:
    cache = cache_with((2, 10), (4, 20))
    assert cache.end_offset_for(5) == UNDEFINED


def test_an_epoch_below_the_earliest_ends_where_the_cache_begins() -> None:
    """Kafka (KIP-279): ``endOffsetFor`` below the earliest epoch answers (requested epoch,
    start offset of the earliest epoch), so the follower truncates to where our history
    begins instead of keeping a divergent prefix."""
    cache = cache_with((2, 10), (4, 20))
    assert cache.end_offset_for(1) == (1, 10)


def test_assign_ignores_the_same_epoch_at_a_later_offset() -> None:
    """Kafka: shouldNotOverwriteOffsetForALeaderEpochOnceItHasBeenAssigned."""
    cache = cache_with((2, 6))
    assert not cache.assign(2, 9)
    assert pairs(cache) == [(2, 6)]


def test_assign_ignores_an_epoch_older_than_the_latest() -> None:
    cache = cache_with((3, 10))
    assert not cache.assign(2, 20)
    assert pairs(cache) == [(3, 10)]


def test_a_newer_epoch_starting_below_later_entries_replaces_them() -> None:
    cache = cache_with((1, 0), (2, 10), (3, 20))
    assert cache.assign(4, 15)
    assert pairs(cache) == [(1, 0), (2, 10), (4, 15)]
    assert cache.assign(4, 12)  # the latest epoch moving down keeps one entry
    assert pairs(cache) == [(1, 0), (2, 10), (4, 12)]


def test_assign_rejects_negative_values() -> None:
    with pytest.raises(ValueError):
        cache_with().assign(-1, 0)


def test_epoch_for_offset_is_the_epoch_of_the_entry_at_or_before_it() -> None:
    cache = cache_with((1, 5), (3, 10))
    assert [cache.epoch_for_offset(o) for o in (4, 5, 9, 10, 99)] == [None, 1, 1, 3, 3]


def test_truncate_from_end_drops_entries_starting_at_or_after_the_offset() -> None:
    cache = cache_with((2, 6), (3, 8), (4, 11))
    cache.truncate_from_end(9)
    assert pairs(cache) == [(2, 6), (3, 8)]
    cache.truncate_from_end(8)
    assert pairs(cache) == [(2, 6)]
    cache.truncate_from_end(100)
    assert pairs(cache) == [(2, 6)]


def test_truncate_from_start_moves_the_covering_entry_up() -> None:
    """Kafka: shouldUpdateSavedOffsetWhenOffsetToClearToIsBetweenEpochs."""
    cache = cache_with((2, 6), (3, 8), (4, 11))
    cache.truncate_from_start(9)
    assert pairs(cache) == [(3, 9), (4, 11)]
    cache.truncate_from_start(11)
    assert pairs(cache) == [(4, 11)]
    cache.truncate_from_start(5)
    assert pairs(cache) == [(4, 11)]


def test_every_change_is_persisted_and_reloaded(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path, lambda: 50)
    cache.assign(1, 0)
    cache.assign(3, 20)
    assert path.read_text().split("\n")[:4] == ["0", "2", "1 0", "3 20"]
    loaded = LeaderEpochCache.load(path, lambda: 50)
    assert loaded is not None
    assert loaded.entries == [EpochEntry(1, 0), EpochEntry(3, 20)]
    cache.truncate_from_end(20)
    reloaded = LeaderEpochCache.load(path, lambda: 50)
    assert reloaded is not None and reloaded.entries == [EpochEntry(1, 0)]
    assert LeaderEpochCache.load(tmp_path / "missing", lambda: 0) is None


def test_an_older_epoch_replayed_where_the_cache_has_it_is_a_silent_no_op() -> None:
    """Reopening a log replays its batches' epochs from the recovery point: a batch of an
    older epoch inside that epoch's range agrees with the cache and is no news (found by
    ``kraft nemesis``: 126,743 warnings from one broker in a 600 s run). Only an older epoch
    *past* the start of a newer one is inconsistent, and warned about."""
    from structlog.testing import capture_logs

    cache = cache_with((0, 0), (1, 50))
    with capture_logs() as logs:
        assert cache.assign(0, 14) is False
        assert cache.assign(0, 49) is False
    assert pairs(cache) == [(0, 0), (1, 50)]
    assert not [e for e in logs if e["event"] == "epoch_assignment_ignored"]
    with capture_logs() as logs:
        assert cache.assign(0, 60) is False
    assert [e["log_level"] for e in logs if e["event"] == "epoch_assignment_ignored"] == ["warning"]
