"""`GroupLag`: lag against this broker's own replica where it holds one, and against the
partition leader's answer (refreshed) where it does not."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kraft.metrics.kafka import GROUP_LAG, GROUP_OFFSET
from kraft.types import TopicPartition
from replication.broker.coordinators.group_lag import GroupLag

COMMITTED = [("billing", "orders", 0, 40), ("billing", "orders", 1, 10), ("billing", "audit", 0, 3)]
LOCAL = {TopicPartition("orders", 0): 100}
LEADERS = {TopicPartition("orders", 1): 102, TopicPartition("audit", 0): 103}


class Leaders:
    def __init__(self, answers: dict[TopicPartition, int]) -> None:
        self.answers = answers
        self.asked: list[tuple[int, list[TopicPartition]]] = []

    async def list_latest(
        self, leader: int, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        self.asked.append((leader, list(partitions)))
        return {tp: self.answers[tp] for tp in partitions if tp in self.answers}


def _lag(leaders: Leaders) -> GroupLag:
    return GroupLag(
        committed=lambda: list(COMMITTED),
        local_high_watermark=LOCAL.get,
        leader_of=LEADERS.get,
        list_latest=leaders.list_latest,
    )


def test_partitions_without_a_local_replica_get_their_lag_from_their_leader() -> None:
    leaders = Leaders({TopicPartition("orders", 1): 25})  # broker 103 does not answer
    lag = _lag(leaders)
    before = lag.metric_values()
    assert before[GROUP_LAG] == {("billing", "orders", "0"): 60}  # local only, before a refresh
    asyncio.run(lag.refresh())
    assert sorted(leaders.asked) == [
        (102, [TopicPartition("orders", 1)]),
        (103, [TopicPartition("audit", 0)]),
    ]  # the local replica's partition is not asked for
    values = lag.metric_values()
    assert values[GROUP_LAG] == {
        ("billing", "orders", "0"): 60,
        ("billing", "orders", "1"): 15,
    }
    assert len(values[GROUP_OFFSET]) == 3  # type: ignore[arg-type]


def test_a_refresh_replaces_the_leaders_answers_and_drops_those_no_longer_given() -> None:
    leaders = Leaders({TopicPartition("orders", 1): 25, TopicPartition("audit", 0): 9})
    lag = _lag(leaders)
    asyncio.run(lag.refresh())
    assert lag.metric_values()[GROUP_LAG][("billing", "audit", "0")] == 6  # type: ignore[index]
    leaders.answers = {TopicPartition("orders", 1): 30}
    asyncio.run(lag.refresh())
    values = lag.metric_values()[GROUP_LAG]
    assert values == {("billing", "orders", "0"): 60, ("billing", "orders", "1"): 20}
