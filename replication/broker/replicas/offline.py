"""`OfflineReplicas`: the replicas a disk error took offline on this broker, and their probes.

A replica whose log hits a disk error (ENOSPC, EIO, a corrupt batch found on read) goes
offline (`PartitionReplica.go_offline`); the broker moves it from its replicas to this set.
Every heartbeat carries `report` (the whole set, so a lost heartbeat loses nothing), and the
controller moves the replica's leadership and drops it from the ISR
(`kraft.controller.offline_replicas`). Kafka's unit is a log directory (KIP-858); a kraft
broker has one data directory, so kraft's unit is the replica.

The broker tries to reopen each one (`due`) after `OFFLINE_PROBE_INITIAL_BACKOFF_MS`; each
failed attempt doubles the wait up to `OFFLINE_PROBE_MAX_BACKOFF_MS` (`probe_failed`). A
restart reopens every log too. The time is an input (``now_s``, monotonic seconds): this
class does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kraft.controller.messages import TopicIdPartition
from kraft.types import TopicPartition

OFFLINE_PROBE_INITIAL_BACKOFF_MS: Final = 500
"""How long an offline replica waits before the first attempt to reopen its log."""
OFFLINE_PROBE_MAX_BACKOFF_MS: Final = 10_000
"""The longest wait between two attempts (the wait doubles after each failed one)."""


@dataclass(slots=True, kw_only=True)
class OfflineReplica:
    """A replica taken offline by a disk error, and when to try to reopen it."""

    topic_id: str
    error: str
    backoff_ms: int
    next_probe_s: float


class OfflineReplicas:
    """The offline replicas of one broker (see the module docstring)."""

    def __init__(self) -> None:
        self._entries: dict[TopicPartition, OfflineReplica] = {}

    def __contains__(self, tp: object) -> bool:
        return tp in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, tp: TopicPartition) -> OfflineReplica | None:
        return self._entries.get(tp)

    def partitions(self) -> list[TopicPartition]:
        return list(self._entries)

    def add(self, tp: TopicPartition, topic_id: str, error: str, now_s: float) -> None:
        """``tp`` went offline (again: its probe schedule starts over)."""
        self._entries[tp] = OfflineReplica(
            topic_id=topic_id,
            error=error,
            backoff_ms=OFFLINE_PROBE_INITIAL_BACKOFF_MS,
            next_probe_s=now_s + OFFLINE_PROBE_INITIAL_BACKOFF_MS / 1000,
        )

    def remove(self, tp: TopicPartition) -> OfflineReplica | None:
        """``tp`` is back online, or no longer this broker's."""
        return self._entries.pop(tp, None)

    def due(self, now_s: float) -> list[tuple[TopicPartition, OfflineReplica]]:
        """The replicas whose next attempt to reopen is due."""
        return [(tp, e) for tp, e in self._entries.items() if e.next_probe_s <= now_s]

    def next_probe_s(self) -> float | None:
        """When the next attempt to reopen one is due (None: no replica is offline)."""
        return min((e.next_probe_s for e in self._entries.values()), default=None)

    def probe_failed(self, tp: TopicPartition, error: str, now_s: float) -> int:
        """An attempt to reopen ``tp`` failed: wait twice as long. Returns the wait (ms)."""
        entry = self._entries[tp]
        entry.error = error
        entry.backoff_ms = min(2 * entry.backoff_ms, OFFLINE_PROBE_MAX_BACKOFF_MS)
        entry.next_probe_s = now_s + entry.backoff_ms / 1000
        return entry.backoff_ms

    def report(self) -> tuple[TopicIdPartition, ...]:
        """What the heartbeat carries: every offline replica, in a stable order."""
        return tuple(
            TopicIdPartition(topic_id=e.topic_id, partition=tp.partition)
            for tp, e in sorted(self._entries.items(), key=lambda item: str(item[0]))
        )


__all__ = [
    "OFFLINE_PROBE_INITIAL_BACKOFF_MS",
    "OFFLINE_PROBE_MAX_BACKOFF_MS",
    "OfflineReplica",
    "OfflineReplicas",
]
