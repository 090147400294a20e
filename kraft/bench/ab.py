"""A/B benchmarks in the same run: two clusters side by side, the same load on each, runs
alternated (A, B, A, B, ...) so a change of the shared machine's load shifts both arms alike.

`alternate` runs the rounds and collects each run's figures with the CPU the client and the
brokers spent; `summarize` reports medians and bests per arm and the B/A ratio as the median
of the rounds' ratios (each round's two runs saw nearly the same load) beside the ratio of the
medians. Used by ``kraft bench produce|consume --tls`` and ``kraft bench produce --metrics``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from typing import Any

from kraft.bench.cpu import _cpu_figures, cpu_time

Run = dict[str, Any]


def alternate(
    arms: Mapping[str, Any],
    rounds: int,
    run_one: Callable[[str, Any], Run],
    records: int,
    say: Callable[[str], None],
) -> dict[str, list[Run]]:
    """``rounds`` rounds; in each, ``run_one(name, cluster)`` once per arm, in order, timed
    with the CPU of the client and of the cluster's brokers (``records`` per run)."""
    runs: dict[str, list[Run]] = {name: [] for name in arms}
    for round_ in range(1, rounds + 1):
        for name, cluster in arms.items():
            cpu: dict[str, Any] = {}
            with cpu_time(cpu, cluster):
                run = run_one(name, cluster)
            run |= _cpu_figures(cpu, records, run)
            runs[name].append(run)
            say(
                f"round {round_}/{rounds} {name}: {run['records_per_s']:,.0f} records/s, "
                f"p50 {run['p50_ms']:.2f} ms"
            )
    return runs


def summarize(
    runs: Mapping[str, list[Run]], base: str, other: str, target: float
) -> dict[str, Any]:
    """Medians and bests of each arm, and ``other`` / ``base``: ``ratio_median`` (the median of
    the rounds' ratios, judged against ``target``), ``ratio_of_medians`` and ``ratio_best``."""
    summary: dict[str, Any] = {}
    for name, rs in runs.items():
        rates = [r["records_per_s"] for r in rs]
        summary[name] = {
            "median_records_per_s": statistics.median(rates),
            "best_records_per_s": max(rates),
            "median_p50_ms": statistics.median(r["p50_ms"] for r in rs),
            "median_client_cpu_us_per_record": statistics.median(
                r.get("client_cpu_us_per_record") or 0.0 for r in rs
            ),
            "median_brokers_cpu_us_per_record": statistics.median(
                r.get("brokers_cpu_us_per_record") or 0.0 for r in rs
            ),
        }
    ratios = [
        b["records_per_s"] / a["records_per_s"]
        for a, b in zip(runs[base], runs[other], strict=True)
    ]
    a, b = summary[base], summary[other]
    summary["round_ratios"] = [round(r, 3) for r in ratios]
    summary["ratio_median"] = round(statistics.median(ratios), 3)
    summary["ratio_of_medians"] = round(b["median_records_per_s"] / a["median_records_per_s"], 3)
    summary["ratio_best"] = round(b["best_records_per_s"] / a["best_records_per_s"], 3)
    summary["target_met"] = summary["ratio_median"] >= target
    return summary


__all__ = ["alternate", "summarize"]
