"""The data topics the simulated group consumes: topic ids, partition counts, log end offsets.

Producing is not under test here (the broker simulation covers it): a partition's log is just
its end offset, record ``o`` is the one at offset ``o``. Topics are created and grown during
a run, so the coordinator must pick them up.
"""

from __future__ import annotations

from typing import final

from replication.group import TopicInfo


@final
class DataTopics:
    def __init__(self) -> None:
        self.topics: dict[str, TopicInfo] = {}
        self._ends: dict[tuple[str, int], int] = {}
        self._by_id: dict[str, str] = {}

    def create(self, name: str, partitions: int) -> None:
        topic_id = f"{name}-id"
        self.topics[name] = TopicInfo(topic_id=topic_id, name=name, partitions=partitions)
        self._by_id[topic_id] = name
        for p in range(partitions):
            self._ends.setdefault((topic_id, p), 0)

    def grow(self, name: str, partitions: int) -> None:
        old = self.topics[name]
        assert partitions >= old.partitions
        self.create(name, partitions)

    def name_of(self, topic_id: str) -> str:
        return self._by_id[topic_id]

    def id_of(self, name: str) -> str:
        return self.topics[name].topic_id

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._ends)

    def end(self, tp: tuple[str, int]) -> int:
        return self._ends.get(tp, 0)

    def produce(self, tp: tuple[str, int], count: int = 1) -> None:
        self._ends[tp] += count
