"""Commits of a group consumer run in the order they were asked, asynchronous ones too: a
slow early commit never lands after a later one (committed offsets would go back). The group
side is a `ConsumerCoordinator` the consumer owns, tested here on its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

import pytest

from kraft.types import TopicPartition
from replication.clients import Consumer, ConsumerConfig
from replication.clients.consumer_groups import ConsumerCoordinator, OwnedPartitions

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


def _coordinator(
    group: _RecordingGroup, positions: dict[TopicPartition, int | None]
) -> tuple[ConsumerCoordinator, Consumer]:
    """A coordinator over a stand-in group and plain positions (as its consumer would give)."""
    consumer = Consumer("127.0.0.1:1", enable_auto_commit=False)  # no group_id: only a callee
    owned = OwnedPartitions(
        lock=threading.RLock(),
        positions=lambda: dict(positions),
        assign=lambda tps: None,
        seek=positions.__setitem__,
        add_topics=lambda names: None,
    )
    config = ConsumerConfig.create({"group_id": "g", "enable_auto_commit": False})
    return ConsumerCoordinator(group, config, owned, consumer), consumer  # type: ignore[arg-type]


def test_an_asynchronous_commit_never_lands_after_a_later_one() -> None:
    group = _RecordingGroup()
    coordinator, consumer = _coordinator(group, {})
    try:
        coordinator.commit({TP: 10}, asynchronous=True)
        coordinator.commit({TP: 20}, asynchronous=True)
        coordinator.commit({TP: 30})  # synchronous: returns once it (and those before) are done
        assert group.completed == [10, 20, 30]
    finally:
        coordinator.close()
        consumer.close()


def test_a_commit_without_offsets_commits_the_positions_its_consumer_gives() -> None:
    """The coordinator reads positions only through `OwnedPartitions`; unknown ones are skipped."""
    group = _RecordingGroup()
    other = TopicPartition("t", 1)
    coordinator, consumer = _coordinator(group, {TP: 7, other: None})
    try:
        coordinator.commit()
        assert group.completed == [7]
    finally:
        coordinator.close()
        consumer.close()


def test_a_consumer_without_a_group_id_refuses_group_calls() -> None:
    with Consumer("127.0.0.1:1") as consumer:
        for call in (
            lambda: consumer.subscribe(["t"]),
            lambda: consumer.commit({TP: 1}),
            lambda: consumer.committed([TP]),
        ):
            with pytest.raises(ValueError, match="needs a group_id"):
                call()


def test_the_consumer_owns_its_group_side_instead_of_inheriting_it() -> None:
    """No mixin sharing the consumer's private fields: the coordinator is a field with its own
    state, reaching the consumer only through `OwnedPartitions`."""
    assert Consumer.__mro__ == (Consumer, object)
    assert ConsumerCoordinator.__mro__ == (ConsumerCoordinator, object)
    assert "__dict__" not in dir(ConsumerCoordinator)
