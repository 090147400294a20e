"""Which segments retention deletes: a pure planner over segment descriptions.

Theory of operation
-------------------
Retention deletes whole segments from the front of a log, never the active (last) one, and
moves the log start offset to the first segment that remains. `plan_retention` decides; the
log (`storage.log.SegmentedLog.apply_retention`) applies the plan: deletes the files, fsyncs
the directory, trims the leader-epoch cache and checkpoints the new start.

The rules, in Kafka's order (``UnifiedLog.deleteOldSegments``):

1. ``retention.ms``: delete while the front segment's newest timestamp is older than
   ``now_ms - retention.ms``;
2. ``retention.bytes``: then delete while the log stays at least ``retention.bytes`` large
   without the front segment.

Either is off when negative, and both are off unless ``cleanup.policy`` includes ``delete``
(a ``compact``-only log is bounded by the log cleaner instead, as in Kafka). With a
``high_watermark`` (a partition's), a segment holding an offset at or above it is never
deleted: uncommitted data may still be needed (Kafka's ``highWatermark`` bound in
``deletableSegments``). Each rule stops at the first segment it
keeps: retention only ever deletes a prefix.

The planner reads no clock and touches no file: ``now_ms`` comes in, and table tests can walk
it without a disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage.config import LogConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentInfo:
    """A read-only description of one segment."""

    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPlan:
    """What retention deletes: the first ``segments_to_delete`` segments, after which the log
    starts at ``log_start_offset`` (never below where it started before)."""

    segments_to_delete: int
    log_start_offset: int


def plan_retention(
    segments: Sequence[SegmentInfo],
    config: LogConfig,
    *,
    log_start_offset: int,
    now_ms: int,
    high_watermark: int | None = None,
) -> RetentionPlan:
    """The segments ``retention.ms`` and ``retention.bytes`` delete (see the module docstring).

    Args:
        segments: the log's segments in offset order, the active one last (at least one).
        log_start_offset: the log's current start offset.
        high_watermark: if given, no segment holding an offset at or above it is deleted.
    """
    assert segments, "a log always has an active segment"
    last = len(segments) - 1  # the active segment: never deleted

    def deletable(i: int) -> bool:
        return i < last and (high_watermark is None or segments[i].next_offset <= high_watermark)

    n = 0
    if not config.delete:
        return RetentionPlan(segments_to_delete=0, log_start_offset=log_start_offset)
    if config.retention_ms >= 0:
        while deletable(n) and now_ms - segments[n].max_timestamp_ms > config.retention_ms:
            n += 1
    if config.retention_bytes >= 0:
        total = sum(s.size_bytes for s in segments[n:])
        while deletable(n) and total - segments[n].size_bytes >= config.retention_bytes:
            total -= segments[n].size_bytes
            n += 1
    if n == 0:
        return RetentionPlan(segments_to_delete=0, log_start_offset=log_start_offset)
    return RetentionPlan(
        segments_to_delete=n,
        log_start_offset=max(log_start_offset, segments[n].base_offset),
    )


__all__ = ["RetentionPlan", "SegmentInfo", "plan_retention"]
