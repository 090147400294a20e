"""PNG figures of the side-by-side benchmarks (matplotlib, the Agg backend: no display needed),
written by ``kraft bench produce|consume|e2e --against kafka --plot FILE``:

- `plot_against`: records/s and the nodes' CPU µs per record of each system (and client),
  the medians as bars and every round as a dot;
- `plot_e2e`: p50/p99/p99.9 produce -> consume latency per system and ``linger.ms`` (log
  scale), and the nodes' CPU µs per record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

COLORS = {"kraft": "tab:blue", "kafka": "tab:orange", "kafka-java": "tab:brown"}
DPI = 80
"""Small files: the figures are committed under docs/."""


def _load(result: dict[str, Any]) -> str:
    before, after = result["load_average"]["before"], result["load_average"]["after"]
    return f"load average {before[0]:.1f} -> {after[0]:.1f}"


def plot_against(result: dict[str, Any], path: Path) -> None:
    """records/s and nodes' CPU µs/record per system of ``kraft bench produce|consume
    --against kafka``."""
    runs: dict[str, list[dict[str, Any]]] = result["runs"]
    systems = list(runs)
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    for ax, key, label in (
        (axes[0], "records_per_s", "records/s"),
        (axes[1], "servers_cpu_us_per_record", "nodes' CPU µs per record"),
    ):
        medians = [result["summary"][s][f"median_{key}"] for s in systems]
        ax.bar(
            range(len(systems)),
            medians,
            color=[COLORS.get(s, "tab:gray") for s in systems],
            alpha=0.8,
        )
        for i, s in enumerate(systems):
            ax.plot([i] * len(runs[s]), [r[key] for r in runs[s]], "k.", markersize=4)
        ax.set_xticks(range(len(systems)), [_client_label(s, runs[s]) for s in systems])
        ax.set_title(label, fontsize=10)
        ax.tick_params(labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    s = result["summary"]
    fig.suptitle(
        f"kraft bench {result['bench']}: kraft/Kafka {s['ratio_kraft_to_kafka']:.2f}x records/s,"
        f" {s['cpu_ratio_kraft_to_kafka']:.2f}x CPU/record ({_load(result)})",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


CLIENT_LABELS = {
    "confluent-kafka": "librdkafka",
    "kafka-producer-perf-test": "Java perf test",
    "kafka-consumer-perf-test": "Java perf test",
    "kraft": "kraft client",
}


def _client_label(system: str, runs: list[dict[str, Any]]) -> str:
    client = str(runs[0].get("client", "")).split(" ")[0]
    return f"{system}\n{CLIENT_LABELS.get(client, client)}" if client else system


def plot_e2e(result: dict[str, Any], path: Path) -> None:
    """Latency percentiles and nodes' CPU µs/record per system and linger of ``kraft bench e2e
    --against kafka``."""
    summary: dict[str, Any] = result["summary"]
    lingers = list(summary)
    systems = ("kraft", "kafka")
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4), gridspec_kw={"width_ratios": [3, 1.3]})
    ax = axes[0]
    percentiles = (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9"))
    width = 0.8 / (len(lingers) * len(systems))
    for j, linger in enumerate(lingers):
        for k, system in enumerate(systems):
            offset = (j * len(systems) + k) * width - 0.4 + width / 2
            values = [summary[linger][system][f"median_{p}"] or 0 for p, _ in percentiles]
            ax.bar(
                [i + offset for i in range(len(percentiles))],
                values,
                width,
                color=COLORS[system],
                alpha=1.0 if j == 0 else 0.5,
                label=f"{system}, linger.ms={linger}",
            )
    ax.set_xticks(range(len(percentiles)), [label for _, label in percentiles])
    ax.set_yscale("log")
    ax.set_ylabel("produce -> consume ms", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    ax = axes[1]
    labels, values, colors = [], [], []
    for linger in lingers:
        for system in systems:
            labels.append(f"{system}\n{linger}")
            values.append(summary[linger][system]["median_servers_cpu_us_per_record"] or 0)
            colors.append(COLORS[system])
    ax.bar(range(len(values)), values, color=colors, alpha=0.8)
    ax.set_xticks(range(len(values)), labels, fontsize=7)
    ax.set_title("nodes' CPU µs/record\n(system, linger.ms)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.suptitle(
        f"kraft bench e2e --against kafka: {result['rate']:,} records/s, librdkafka on both"
        f" ({_load(result)})",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


__all__ = ["plot_against", "plot_e2e"]
