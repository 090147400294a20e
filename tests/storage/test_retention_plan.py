"""Table tests of the retention planner (`storage.retention.plan_retention`): pure, no disk."""

from __future__ import annotations

import pytest

from storage.config import LogConfig
from storage.retention import SegmentInfo, plan_retention


def _segments(*specs: tuple[int, int, int]) -> list[SegmentInfo]:
    """Contiguous segments from (record count, size in bytes, newest timestamp) triples."""
    out, base = [], 0
    for count, size, max_ts in specs:
        out.append(
            SegmentInfo(
                base_offset=base, next_offset=base + count, size_bytes=size, max_timestamp_ms=max_ts
            )
        )
        base += count
    return out


SEGMENTS = _segments((10, 100, 1_000), (10, 100, 2_000), (10, 100, 3_000), (5, 50, 4_000))


@pytest.mark.parametrize(
    ("retention_ms", "retention_bytes", "now_ms", "high_watermark", "deleted"),
    [
        (-1, -1, 10_000, None, 0),  # both off
        (1_500, -1, 3_000, None, 1),  # only the first is older than now - retention.ms
        (0, -1, 10_000, None, 3),  # everything old, but never the active segment
        (-1, 250, 0, None, 1),  # 350 bytes: dropping the first leaves 250 >= 250
        (-1, 0, 0, None, 3),
        (0, -1, 10_000, 20, 2),  # the high watermark bounds it: segment [20, 30) stays
        (0, -1, 10_000, 19, 1),
        (1_500, 100, 3_000, None, 2),  # time deletes one, then size deletes one more
    ],
)
def test_retention_deletes_the_prefix_its_rules_allow(
    retention_ms: int, retention_bytes: int, now_ms: int, high_watermark: int | None, deleted: int
) -> None:
    config = LogConfig(retention_ms=retention_ms, retention_bytes=retention_bytes)
    plan = plan_retention(
        SEGMENTS, config, log_start_offset=0, now_ms=now_ms, high_watermark=high_watermark
    )
    assert plan.segments_to_delete == deleted
    assert plan.log_start_offset == SEGMENTS[deleted].base_offset


def test_retention_stops_at_the_first_segment_it_keeps() -> None:
    """Retention deletes only a prefix: a newer segment in front protects older ones behind."""
    segments = _segments((10, 100, 5_000), (10, 100, 1_000), (1, 10, 6_000))
    plan = plan_retention(segments, LogConfig(retention_ms=1_000), log_start_offset=0, now_ms=5_500)
    assert plan.segments_to_delete == 0


def test_retention_never_moves_the_log_start_offset_back() -> None:
    """A log start offset already inside the next segment (DeleteRecords) stays where it is."""
    plan = plan_retention(SEGMENTS, LogConfig(retention_ms=0), log_start_offset=25, now_ms=10_000)
    assert plan.segments_to_delete == 3
    assert plan.log_start_offset == 30
    plan = plan_retention(SEGMENTS, LogConfig(retention_ms=0), log_start_offset=32, now_ms=10_000)
    assert plan.log_start_offset == 32


def test_retention_of_a_single_active_segment_deletes_nothing() -> None:
    plan = plan_retention(
        _segments((10, 100, 0)),
        LogConfig(retention_ms=0, retention_bytes=0),
        log_start_offset=3,
        now_ms=10_000,
    )
    assert plan.segments_to_delete == 0 and plan.log_start_offset == 3
