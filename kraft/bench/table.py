"""The text tables of the benchmarks' reports: one column layout, one way to print a missing
figure, one load-average line, one median that skips missing figures.

    columns = [Column("client", 17), Column("records/s", 12, ",.0f"), Column("p99 ms", 9, ".2f")]
    lines = [load_line(result), "", *table(columns, [["kraft", 20_000.0, None]])]
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Column:
    """A column: its title, width, and the format spec of its numbers (a string passes as
    it is). The first column of a table and a ``left`` one are left-aligned, the others
    right-aligned."""

    title: str
    width: int
    spec: str = ""
    left: bool = False


def cell(value: Any, spec: str = "") -> str:
    """``value`` formatted by ``spec``; ``-`` for a figure that is missing (None); a string
    as it is."""
    if value is None:
        return "-"
    return value if isinstance(value, str) else format(value, spec)


def table(columns: Sequence[Column], rows: Iterable[Sequence[Any]]) -> list[str]:
    """The header line and one line per row."""

    def line(texts: Sequence[str]) -> str:
        return "".join(
            text.ljust(c.width) if i == 0 or c.left else text.rjust(c.width)
            for i, (c, text) in enumerate(zip(columns, texts, strict=True))
        )

    return [
        line([c.title for c in columns]),
        *(line([cell(v, c.spec) for c, v in zip(columns, row, strict=True)]) for row in rows),
    ]


def load_line(result: dict[str, Any]) -> str:
    load = result["load_average"]
    return f"load average before: {load['before']}, after: {load['after']}"


def median(values: Iterable[float | None]) -> float | None:
    """The median of the known figures (to 3 decimals), None if there are none."""
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 3) if known else None


SUMMARY_KEYS = (
    "records_per_s",
    "p50_ms",
    "p99_ms",
    "servers_cpu_us_per_record",
    "client_cpu_us_per_record",
)
"""The figures of a run that a side-by-side summary gives the median of."""
SUMMARY_COLUMNS = (
    Column("records/s", 12, ",.0f"),
    Column("p50 ms", 9, ".2f"),
    Column("p99 ms", 9, ".2f"),
    Column("nodes µs/rec", 14, ".1f"),
    Column("client µs/rec", 15, ".1f"),
)
"""Their columns, in that order."""


def medians(runs: Sequence[dict[str, Any]], keys: Sequence[str] = SUMMARY_KEYS) -> dict[str, Any]:
    """``median_<key>`` over ``runs`` for each of ``keys`` (a run may lack a figure)."""
    return {f"median_{key}": median(r.get(key) for r in runs) for key in keys}


__all__ = [
    "SUMMARY_COLUMNS",
    "SUMMARY_KEYS",
    "Column",
    "cell",
    "load_line",
    "median",
    "medians",
    "table",
]
