"""Automatic snapshots are paced by the state's size: a large metadata image is not
re-serialised after every small interval of applied bytes (each snapshot stalls the loop)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from kraft.raft_shell.snapshots import Snapshots


@dataclass
class _StateMachine:
    size: int

    def snapshot(self) -> bytes:
        return b"x" * self.size


@dataclass
class _Applier:
    state_machine: _StateMachine
    bytes_since_snapshot: int = 0
    applied_offset: int = 99

    def snapshot_taken(self) -> None:
        self.bytes_since_snapshot = 0


@dataclass
class _Storage:
    saved: list[Any] = field(default_factory=list)

    def save_snapshot(self, sid: Any, data: bytes) -> None:
        self.saved.append((sid, len(data)))


class _Node:
    log_start_offset = 0

    def snapshot_id_at(self, end: int) -> int:
        return end

    def snapshot_taken(self, sid: int) -> None:
        self.log_start_offset = sid

    def voters_at(self, end: int) -> None:
        return None  # static voters: the snapshot carries no voters frame


def test_the_next_snapshot_waits_for_as_many_applied_bytes_as_the_last_one_held() -> None:
    applier = _Applier(_StateMachine(size=10_000))
    snapshots = Snapshots(cast(Any, _Storage()), cast(Any, applier), interval_bytes=1_000)
    applier.bytes_since_snapshot = 1_000
    assert snapshots.due()  # the first: the interval alone
    snapshots.take(cast(Any, _Node()))
    applier.bytes_since_snapshot = 5_000
    assert not snapshots.due(), "a 10 kB state is not re-serialised after 5 kB of log"
    applier.bytes_since_snapshot = 10_000
    assert snapshots.due()


def test_a_small_state_keeps_the_configured_interval() -> None:
    applier = _Applier(_StateMachine(size=100))
    snapshots = Snapshots(cast(Any, _Storage()), cast(Any, applier), interval_bytes=1_000)
    applier.bytes_since_snapshot = 1_000
    snapshots.take(cast(Any, _Node()))
    applier.bytes_since_snapshot = 1_000
    assert snapshots.due()
