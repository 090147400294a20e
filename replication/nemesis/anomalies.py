"""`Anomalies`: the count of one kind of anomaly a checker found, and a few examples."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

SAMPLE_LIMIT: Final = 20
"""How many examples of each anomaly a report keeps (the counts are exact)."""


@dataclass(slots=True)
class Anomalies:
    """The count of one kind of anomaly and a few examples."""

    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, example: str) -> None:
        self.count += 1
        if len(self.examples) < SAMPLE_LIMIT:
            self.examples.append(example)


__all__ = ["SAMPLE_LIMIT", "Anomalies"]
