"""Core identifier types: `NodeId`, `Epoch`, `Offset`, `PartitionId`, `TopicPartition`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType

from storage.types import Epoch, Offset

NodeId = NewType("NodeId", int)
"""A controller or broker id (``node.id``)."""

PartitionId = NewType("PartitionId", int)


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


__all__ = ["Epoch", "NodeId", "Offset", "PartitionId", "TopicPartition"]
