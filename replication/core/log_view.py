"""What the replication cores read of a partition log: a read-only, structural view.

The cores never write: they tell the shell what to append or truncate (see `LeaderReady` and
`FollowerReady`) and read the result back through this view. `storage.log.SegmentedLog`
satisfies `PartitionLogView` as it is (its ``leader_epoch_cache`` is a
`storage.leader_epoch.LeaderEpochCache`), so the broker shell passes its log unchanged; tests
pass an in-memory log over a path-less ``LeaderEpochCache``.

Reads return what the shell has applied so far: the shell applies each Ready before it feeds
the core its next input, so the view and the core never disagree for long (see the Ready
docstrings for the exact contract).
"""

from __future__ import annotations

from typing import Protocol

from kraft.types import Offset

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
NO_OFFSET = Offset(-1)
"""An offset not known yet (Kafka's ``UnifiedLog.UnknownOffset``)."""


class EpochCacheView(Protocol):
    """The epoch -> start offset cache (KIP-101), as `storage.leader_epoch.LeaderEpochCache`."""

    @property
    def latest_epoch(self) -> int | None:
        """The epoch of the last entry, or None for an empty cache."""
        ...

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (KIP-279): ``(largest epoch <= epoch, its end offset)``, or
        ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``; see ``LeaderEpochCache.end_offset_for``."""
        ...


class PartitionLogView(Protocol):
    """The partition log as the cores see it (read-only)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int:
        """The offset after the last batch (LEO): where the next append goes."""
        ...

    @property
    def leader_epoch_cache(self) -> EpochCacheView: ...


def end_offset_for_epoch(log: PartitionLogView, epoch: int) -> tuple[int, int]:
    """``log.leader_epoch_cache.end_offset_for(epoch)``, spelled once."""
    return log.leader_epoch_cache.end_offset_for(epoch)


__all__ = [
    "NO_OFFSET",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochCacheView",
    "PartitionLogView",
    "end_offset_for_epoch",
]
