"""`Anomalies`: the count of one kind of anomaly a checker found, and a few examples;
`AnomalyReport`, what a checker's report with such fields answers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Final

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


class AnomalyReport:
    """The base of a checker's report (a dataclass): its `Anomalies` fields named in
    ``VIOLATIONS`` are the violations; the others are informational."""

    __slots__ = ()
    VIOLATIONS: ClassVar[tuple[str, ...]] = ()

    @property
    def valid(self) -> bool:
        return all(getattr(self, name).count == 0 for name in self.VIOLATIONS)

    def violations(self) -> dict[str, int]:
        return {name: getattr(self, name).count for name in self.VIOLATIONS}

    def examples(self, per_violation: int = 5) -> Iterator[str]:
        """``"<violation>: <example>"`` for the first examples of each violation."""
        for name in self.VIOLATIONS:
            for example in getattr(self, name).examples[:per_violation]:
                yield f"{name}: {example}"

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = asdict(self)  # type: ignore[call-overload]
        data["valid"] = self.valid
        return data


__all__ = ["SAMPLE_LIMIT", "Anomalies", "AnomalyReport"]
