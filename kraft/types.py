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


OFFSETS_TOPIC = "__consumer_offsets"
"""The internal topic of consumer groups' state and committed offsets (Kafka's name)."""
TRANSACTION_STATE_TOPIC = "__transaction_state"
"""The internal topic of the transaction coordinators' state (Kafka's name, KIP-98)."""
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
"""Kafka's ``Topic.isInternal``: hidden from ``kraft topics list`` unless ``--internal``, and
refused to clients' Produce."""


__all__ = [
    "INTERNAL_TOPICS",
    "OFFSETS_TOPIC",
    "TRANSACTION_STATE_TOPIC",
    "Epoch",
    "NodeId",
    "Offset",
    "PartitionId",
    "TopicPartition",
]
