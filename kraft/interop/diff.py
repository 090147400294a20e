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


_HARNESS = (
    "the harness, not kraft: the Kafka peer sets kraft's values in its server.properties "
    "(STATIC_BROKER_CONFIG, and min.insync.replicas=2 as a dynamic cluster default), which Kafka "
    "lists as extra synonym layers; the kraft cluster of the command keeps its defaults"
)

ACCEPTED: Mapping[tuple[str, str], Accepted] = {
    ("create_topics_invalid", "min_isr_above_rf.error"): Accepted(
        "INVALID_CONFIG",
        "NONE",
        (
            "kraft refuses min.insync.replicas above the replication factor at create and alter "
            "(acks=all could never succeed; kraft/metadata/configs.py check_min_insync_replicas); "
            "Kafka accepts it"
        ),
    ),
    ("create_topics_invalid", "reserved_offsets.error"): Accepted(
        "INVALID_REQUEST",
        "NONE",
        (
            "kraft's brokers create __consumer_offsets themselves and refuse it from a client, "
            "validate_only included; Kafka validates it as any topic"
        ),
    ),
    ("describe_configs", "max.message.bytes.source"): Accepted(
        5,
        4,
        _HARNESS,
    ),
    ("describe_configs", "max.message.bytes.synonyms"): Accepted(
        [["message.max.bytes", 5]],
        [["message.max.bytes", 4], ["message.max.bytes", 5]],
        _HARNESS,
    ),
    ("describe_configs", "min.insync.replicas.source"): Accepted(
        5,
        3,
        _HARNESS,
    ),
    ("describe_configs", "min.insync.replicas.synonyms"): Accepted(
        [["min.insync.replicas", 5]],
        [["min.insync.replicas", 3], ["min.insync.replicas", 4], ["min.insync.replicas", 5]],
        _HARNESS,
    ),
    ("describe_configs", "min.insync.replicas.value"): Accepted(
        "1",
        "2",
        _HARNESS,
    ),
    ("describe_configs", "retention.ms.synonyms"): Accepted(
        [["retention.ms", 1], ["log.retention.ms", 5]],
        [["retention.ms", 1]],
        (
            "kraft lists the broker default's layer (log.retention.ms); Kafka's default lives in "
            "log.retention.hours, which it leaves out of this synonym list"
        ),
    ),
    ("describe_configs", "segment.bytes.source"): Accepted(
        5,
        4,
        _HARNESS,
    ),
    ("describe_configs", "segment.bytes.synonyms"): Accepted(
        [["log.segment.bytes", 5]],
        [["log.segment.bytes", 4], ["log.segment.bytes", 5]],
        _HARNESS,
    ),
    ("describe_configs", "unclean.leader.election.enable.source"): Accepted(
        5,
        4,
        _HARNESS,
    ),
    ("describe_configs", "unclean.leader.election.enable.synonyms"): Accepted(
        [["unclean.leader.election.enable", 5]],
        [["unclean.leader.election.enable", 4], ["unclean.leader.election.enable", 5]],
        _HARNESS,
    ),
}
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
