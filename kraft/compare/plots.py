"""The PNG plots of ``kraft compare`` (matplotlib, the Agg backend: no display needed).

- ``latency-slow-follower.png``: p50/p99/p99.9 produce latency over time per mode, the pause
  shaded, ISR shrink and expand marked;
- ``throughput.png``: acknowledged records/s over time per mode in the slow-follower and
  failures scenarios, faults shaded;
- ``unavailability.png``: seconds without acknowledgements per mode and failure phase;
- ``records-lost.png``: acknowledged records lost per mode and data-loss case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

COLORS = {"isr-min2": "tab:blue", "isr-min1": "tab:green", "quorum": "tab:red"}


def _color(mode: str) -> str:
    return next((c for m, c in COLORS.items() if mode.startswith(m)), "tab:gray")


def plot_all(results: dict[str, Any], out: Path) -> list[str]:
    """Write every plot the results allow; their file names."""
    s = results["scenarios"]
    written: list[str] = []
    for name, ok, draw in (
        ("latency-slow-follower.png", "modes" in s.get("slow-follower", {}), _latency),
        (
            "throughput.png",
            any("modes" in s.get(k, {}) for k in ("slow-follower", "failures")),
            _throughput,
        ),
        ("unavailability.png", "modes" in s.get("failures", {}), _unavailability),
        ("records-lost.png", "data-loss" in s, _lost),
    ):
        if ok:
            fig = draw(s)
            fig.savefig(out / name, dpi=110, bbox_inches="tight")
            plt.close(fig)
            written.append(name)
    return written


def _latency(s: dict[str, Any]) -> Any:
    r = s["slow-follower"]
    modes = r["modes"]
    fig, axes = plt.subplots(
        len(modes), 1, figsize=(9, 2.6 * len(modes)), sharex=True, sharey=True, squeeze=False
    )
    for ax, (mode, m) in zip(axes[:, 0], modes.items(), strict=True):
        series = m["latency_series"]
        t = [p["t"] for p in series]
        for key, style in (("p50_ms", "-"), ("p99_ms", "--"), ("p999_ms", ":")):
            ax.plot(t, [p[key] for p in series], style, color=_color(mode), label=key[:-3])
        ax.axvspan(
            r["fault"]["start"], r["fault"]["end"], color="orange", alpha=0.2, label="paused"
        )
        for e in m["isr_events"][1:]:
            shrink = r["victim"] not in e["isr"]
            ax.axvline(e["t"], color="black" if shrink else "gray", ls="-." if shrink else ":")
            ax.annotate(
                "ISR shrink" if shrink else "ISR expand",
                (e["t"], 0.9),
                xycoords=("data", "axes fraction"),
                fontsize=7,
            )
        ax.set_yscale("log")
        ax.set_ylabel("latency ms")
        ax.set_title(
            f"{mode}: produce latency, acks=all (follower {r['victim']} paused)", fontsize=9
        )
        ax.legend(fontsize=7, loc="upper left")
    axes[-1, 0].set_xlabel("seconds since the run started")
    return fig


def _throughput(s: dict[str, Any]) -> Any:
    parts = [k for k in ("slow-follower", "failures") if "modes" in s.get(k, {})]
    fig, axes = plt.subplots(len(parts), 1, figsize=(9, 2.8 * len(parts)), squeeze=False)
    for ax, part in zip(axes[:, 0], parts, strict=True):
        r = s[part]
        for mode, m in r["modes"].items():
            series = m["throughput_series"]
            ax.plot([p[0] for p in series], [p[1] for p in series], color=_color(mode), label=mode)
        if part == "slow-follower":
            ax.axvspan(r["fault"]["start"], r["fault"]["end"], color="orange", alpha=0.2)
        else:
            shades = {"1 replica killed": 0.12, "2 replicas killed": 0.25}
            for p in r["phases"]:
                if p["name"] in shades:
                    ax.axvspan(p["start"], p["end"], color="red", alpha=shades[p["name"]])
        ax.set_ylabel("acked records/s")
        ax.set_title(f"{part}: acknowledged records/s (faults shaded)", fontsize=9)
        ax.legend(fontsize=7, loc="lower left")
    axes[-1, 0].set_xlabel("seconds since the run started")
    return fig


def _unavailability(s: dict[str, Any]) -> Any:
    r = s["failures"]
    modes = list(r["modes"])
    phases = [p["phase"] for p in r["modes"][modes[0]]["phases"]]
    fig, ax = plt.subplots(figsize=(9, 3.2))
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        values = [p["unavailable_s"] for p in r["modes"][mode]["phases"]]
        xs = [j + i * width for j in range(len(phases))]
        ax.bar(xs, values, width, color=_color(mode), label=mode)
    ax.set_xticks([j + width * (len(modes) - 1) / 2 for j in range(len(phases))], phases)
    ax.set_ylabel("seconds without acks")
    ax.set_title("failures: acks=all unavailability per phase", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def _lost(s: dict[str, Any]) -> Any:
    r = s["data-loss"]
    labels: list[str] = []
    values: list[int] = []
    colors: list[str] = []
    for mode, m in r.get("acks1_leader_kill", {}).get("modes", {}).items():
        for acks, c in m.items():
            labels.append(f"leader kill\n{mode} {acks}")
            values.append(c["lost"])
            colors.append(_color(mode))
    for mode, c in r.get("unclean_election", {}).get("modes", {}).items():
        labels.append("stale replica\n" + mode.replace(", ", "\n"))
        values.append(c["lost"])
        colors.append(_color(mode))
    for mode, m in r.get("power_loss", {}).get("modes", {}).items():
        for key, case in (("last_standing", "last standing"), ("correlated", "correlated")):
            if key in m:
                labels.append(f"power loss (sim)\n{case}\n{mode}\n(batches)")
                values.append(m[key]["lost_acked_batches"])
                colors.append(_color(mode))
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(labels)), 3.4))
    bars = ax.bar(range(len(labels)), values, color=colors)
    ax.bar_label(bars, fontsize=7)
    ax.set_xticks(range(len(labels)), labels, fontsize=6)
    ax.set_ylabel("acknowledged, then lost")
    ax.set_title("acknowledged data lost", fontsize=9)
    return fig


__all__ = ["plot_all"]
