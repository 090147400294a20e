"""Commits of a group consumer run in the order they were asked, asynchronous ones too: a
slow early commit never lands after a later one (committed offsets would go back)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from kraft.types import TopicPartition
from replication.clients import Consumer

TP = TopicPartition("t", 0)


class _RecordingGroup:
    """Stands in for `GroupClient`: records each commit when it completes; the first is slow."""

    group_id = "g"

    def __init__(self) -> None:
        self.completed: list[int] = []
        self._first = True
        self._lock = threading.Lock()

    def commit(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        member_id: str = "",
        member_epoch: Callable[[], int] = lambda: -1,
        timeout_s: float,
    ) -> None:
        with self._lock:
            slow, self._first = self._first, False
        if slow:
            time.sleep(0.3)
        with self._lock:
            self.completed.append(offsets[TP])


def test_an_asynchronous_commit_never_lands_after_a_later_one() -> None:
    consumer = Consumer("127.0.0.1:1", group_id="g", enable_auto_commit=False)
    group = _RecordingGroup()
    consumer._group = group  # type: ignore[assignment]
    try:
        consumer.commit({TP: 10}, asynchronous=True)
        consumer.commit({TP: 20}, asynchronous=True)
        consumer.commit({TP: 30})  # synchronous: returns once it (and those before) are done
        assert group.completed == [10, 20, 30]
    finally:
        consumer.close()
