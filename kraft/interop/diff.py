"""Compare two systems' normalized answers, step by step and field by field.

A difference is one of:

- ``accepted``: in `ACCEPTED` with exactly these two answers (a different answer is a new
  difference); each is also listed, with its reason, in docs/kafka-compatibility.md;
- ``not served``: one side stopped the step because it does not serve an API yet (its
  ``not_served`` field, and every field it could not answer after it);
- ``differs``: anything else, a regression or a difference not yet triaged.

The exit code is 0 only when every difference is accepted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

MISSING = "-"
"""A field one side has no answer for."""


@dataclass(frozen=True)
class Accepted:
    kraft: Any
    kafka: Any
    reason: str


ACCEPTED: Mapping[tuple[str, str], Accepted] = {}
"""(step, field) -> the two answers accepted, and why: the machine-readable copy of
docs/kafka-compatibility.md's "Differences found by kraft interop diff"."""


@dataclass(frozen=True)
class Difference:
    step: str
    field: str
    kraft: Any
    kafka: Any
    status: str
    """``accepted``, ``not served`` or ``differs``."""
    reason: str = ""


def compare(
    results: Mapping[str, Mapping[str, Mapping[str, Any]]],
    accepted: Mapping[tuple[str, str], Accepted] = ACCEPTED,
) -> list[Difference]:
    """``results``: step -> system (``kraft``, ``kafka``) -> fields. Every field where the two
    differ, in step order then field order."""
    out: list[Difference] = []
    for step, systems in results.items():
        kraft, kafka = systems.get("kraft", {}), systems.get("kafka", {})
        stopped = "not_served" in kraft or "not_served" in kafka
        for field in sorted(set(kraft) | set(kafka)):
            a, b = kraft.get(field, MISSING), kafka.get(field, MISSING)
            if _same(a, b):
                continue
            rule = accepted.get((step, field))
            if rule is not None and _same(rule.kraft, a) and _same(rule.kafka, b):
                out.append(Difference(step, field, a, b, "accepted", rule.reason))
            elif stopped and (field == "not_served" or MISSING in (a, b)):
                out.append(Difference(step, field, a, b, "not served"))
            else:
                out.append(Difference(step, field, a, b, "differs"))
    return out


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def exit_code(differences: list[Difference]) -> int:
    return 0 if all(d.status == "accepted" for d in differences) else 1


def as_json(
    results: Mapping[str, Mapping[str, Mapping[str, Any]]],
    differences: list[Difference],
    meta: Mapping[str, Any],
) -> str:
    summary = {
        s: sum(d.status == s for d in differences) for s in ("accepted", "not served", "differs")
    }
    doc = {
        **meta,
        "summary": summary,
        "differences": [asdict(d) for d in differences],
        "results": results,
    }
    return json.dumps(doc, indent=2, sort_keys=False, default=str)


def as_table(differences: list[Difference], steps: list[str]) -> str:
    """The differences as an aligned table (step, field, kraft, kafka, status), then one line
    per step that agreed entirely."""
    rows = [("step", "field", "kraft", "kafka", "status")]
    rows += [(d.step, d.field, _cell(d.kraft), _cell(d.kafka), d.status) for d in differences]
    widths = [min(max(len(r[i]) for r in rows), 48) for i in range(5)]
    lines = [
        "  ".join(c[:48].ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    differing = {d.step for d in differences}
    agreed = [s for s in steps if s not in differing]
    if agreed:
        lines.append("")
        lines.append("agreed on every field: " + ", ".join(agreed))
    counts = {
        s: sum(d.status == s for d in differences) for s in ("accepted", "not served", "differs")
    }
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)
