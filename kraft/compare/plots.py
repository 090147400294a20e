"""The PNG plots of ``kraft compare`` (matplotlib, the Agg backend: no display needed).

- ``latency-slow-follower.png``: p50/p99/p99.9 produce latency over time per mode, the pause
  shaded, ISR shrink and expand marked;
- ``latency-slow-link.png``: the same for the slow-link scenario (``--network netns``), each
  link limit shaded and named (what, on which host, how much);
- ``throughput.png``: acknowledged records/s over time of the fixed-rate probe, one panel per
  scenario and mode, faults shaded and labelled, the offered rate drawn: availability over
  time, not a throughput measurement (that is `kraft bench produce`);
- ``unavailability.png``: seconds without acknowledgements per mode and failure phase;
- ``slow-link-bursts.png``: acks=all records/s of a burst per mode, without a limit and under
  each link limit (named);
- ``records-lost.png``: acknowledged records lost per mode and data-loss case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Patch

COLORS = {  # the first prefix that matches: the longer name first
    "kafka-isr-min1": "tab:brown",
    "isr-min2": "tab:blue",
    "isr-min1": "tab:green",
    "quorum": "tab:red",
    "kafka-isr": "tab:orange",
}


def _color(mode: str) -> str:
    return next((c for m, c in COLORS.items() if mode.startswith(m)), "tab:gray")


FAULT_SHADES = {
    "follower paused (SIGSTOP)": ("orange", 0.2),
    "1 replica killed": ("red", 0.12),
    "2 replicas killed": ("red", 0.28),
    "delay": ("purple", 0.14),
    "bandwidth": ("teal", 0.16),
}
"""How each kind of fault is shaded (a link limit: by its kind, labelled with what it
limited), with its legend label."""


THROUGHPUT_PARTS = ("slow-follower", "failures", "slow-link")
"""The scenarios whose probes' acknowledged records/s `throughput.png` draws."""


def plot_all(results: dict[str, Any], out: Path, dpi: int = 110) -> list[str]:
    """Write every plot the results allow (at ``dpi``); their file names."""
    s = results["scenarios"]
    rate = float(results.get("timing", {}).get("rate_per_s", 0) or 0)
    written: list[str] = []
    for name, ok, draw in (
        (
            "latency-slow-follower.png",
            "modes" in s.get("slow-follower", {}),
            lambda scenarios: _latency(scenarios, "slow-follower"),
        ),
        (
            "latency-slow-link.png",
            "modes" in s.get("slow-link", {}),
            lambda scenarios: _latency(scenarios, "slow-link"),
        ),
        (
            "throughput.png",
            any("modes" in s.get(k, {}) for k in THROUGHPUT_PARTS),
            lambda scenarios: _throughput(scenarios, rate),
        ),
        ("unavailability.png", "modes" in s.get("failures", {}), _unavailability),
        ("slow-link-bursts.png", "modes" in s.get("slow-link", {}), _bursts),
        ("records-lost.png", "data-loss" in s, _lost),
    ):
        if ok:
            fig = draw(s)
            fig.savefig(out / name, dpi=dpi)
            plt.close(fig)
            written.append(name)
    return written


def _shade(ax: Any, start: float, end: float, kind: str, label: str | None = None) -> None:
    color, alpha = FAULT_SHADES[kind]
    ax.axvspan(start, end, color=color, alpha=alpha, lw=0, label=label or kind)


def _shade_faults(ax: Any, part: str, r: dict[str, Any]) -> None:
    """Shade the faults of scenario ``part`` (its results ``r``) on ``ax``."""
    if part == "slow-follower":
        _shade(ax, r["fault"]["start"], r["fault"]["end"], "follower paused (SIGSTOP)")
        return
    for p in r["phases"]:
        if part == "slow-link" and p.get("limit"):
            _shade(ax, p["start"], p["healed"], p["limit"]["kind"], _wrap(p["name"]))
        elif p["name"] in FAULT_SHADES:
            _shade(ax, p["start"], p["end"], p["name"])


def _wrap(text: str, width: int = 48) -> str:
    """A long legend label on lines of at most ``width`` characters."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\n".join(lines)


def _latency(s: dict[str, Any], part: str) -> Any:
    r = s[part]
    modes = r["modes"]
    fig, axes = plt.subplots(
        len(modes),
        1,
        figsize=(9, 2.8 * len(modes) + 0.6),
        sharex=True,
        sharey=True,
        squeeze=False,
        layout="constrained",
    )
    what = (
        f"follower {r['victim']} paused"
        if part == "slow-follower"
        else f"limits on follower {r['victim_host']}'s link, then on every broker's"
    )
    fig.suptitle(f"{part}: produce latency per mode, acks=all ({what})", fontsize=10)
    for ax, (mode, m) in zip(axes[:, 0], modes.items(), strict=True):
        series = m["latency_series"]
        t = [p["t"] for p in series]
        _shade_faults(ax, part, r)
        # NB: widest and palest first, so p99.9 is not hidden under p99 where they coincide.
        for key, style, width, alpha in (
            ("p999_ms", "-", 3.0, 0.35),
            ("p99_ms", "--", 1.4, 1.0),
            ("p50_ms", "-", 1.2, 1.0),
        ):
            label = {"p999_ms": "p99.9", "p99_ms": "p99", "p50_ms": "p50"}[key]
            ax.plot(
                t, [p[key] for p in series], style, color=_color(mode), lw=width, alpha=alpha,
                label=label,
            )  # fmt: skip
        victim = m.get("kafka_victim", r["victim"])  # the Kafka column paused its own broker
        for e in m["isr_events"][1:]:
            shrink = victim not in e["isr"]
            ax.axvline(e["t"], color="black" if shrink else "gray", ls="-." if shrink else ":")
            ax.annotate(
                " ISR shrink" if shrink else " ISR expand",
                (e["t"], 0.92),
                xycoords=("data", "axes fraction"),
                fontsize=8,
            )
        ax.set_yscale("log")
        ax.set_ylabel("latency ms (log)")
        ax.set_title(mode, fontsize=9, loc="left")
        # the ISR marks are labelled on top; a link limit's long label goes beside the plot
        if part == "slow-link":
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        else:
            ax.legend(fontsize=8, loc="lower left", ncols=4)
    lowest = min(
        (p["p50_ms"] for m in modes.values() for p in m["latency_series"] if p["p50_ms"] > 0),
        default=1.0,
    )
    axes[0, 0].set_ylim(bottom=lowest / 5)  # shared: room for the legends under the lines
    axes[-1, 0].set_xlabel("seconds since the run started")
    return fig


def _throughput(s: dict[str, Any], rate: float) -> Any:
    """One panel per scenario and mode (small multiples: no line hides another), each with
    the rate its probe offered: these are acknowledged records/s of a fixed, low load, i.e.
    availability over time, not what a mode could sustain (`kraft bench produce` measures that)."""
    parts = [k for k in THROUGHPUT_PARTS if "modes" in s.get(k, {})]
    panels = [(part, mode) for part in parts for mode in s[part]["modes"]]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(9, 1.9 * len(panels) + 0.9), squeeze=False, layout="constrained"
    )
    fig.suptitle(
        "records/s acknowledged of a probe at a fixed offered rate: availability over time, "
        "not a throughput measurement",
        fontsize=10,
    )
    for ax, (part, mode) in zip(axes[:, 0], panels, strict=True):
        r = s[part]
        offered = min(rate, 100) if part == "failures" else rate
        series = r["modes"][mode]["throughput_series"]
        _shade_faults(ax, part, r)
        if offered:
            ax.axhline(offered, color="gray", ls=":", lw=1, label=f"offered {offered:g}/s")
        values = [p[1] for p in series]
        ax.plot([p[0] for p in series], values, color=_color(mode), label=mode)
        ax.set_ylim(0, 1.4 * max([*values, offered, 1.0]))  # room for the legend above the line
        ax.set_ylabel("acked/s")
        ax.set_title(f"{part}: {mode}", fontsize=9, loc="left")
        if part == "slow-link":
            ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        else:
            ax.legend(fontsize=7, loc="upper right", ncols=4)
    axes[-1, 0].set_xlabel("seconds since the run started")
    return fig


def _unavailability(s: dict[str, Any]) -> Any:
    r = s["failures"]
    modes = list(r["modes"])
    phases = [p["phase"] for p in r["modes"][modes[0]]["phases"]]
    fig, ax = plt.subplots(figsize=(9, 3.6), layout="constrained")
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        values = [p["unavailable_s"] for p in r["modes"][mode]["phases"]]
        xs = [j + i * width for j in range(len(phases))]
        bars = ax.bar(xs, values, width, color=_color(mode), label=mode)
        ax.bar_label(bars, fmt="%.1f", fontsize=8)  # a 0 shows as 0, not as a missing bar
    ax.set_xticks([j + width * (len(modes) - 1) / 2 for j in range(len(phases))], phases)
    ax.set_ylabel("seconds without acks")
    ax.set_title("failures: seconds without an acknowledged acks=all write, per phase", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def _bursts(s: dict[str, Any]) -> Any:
    """Grouped bars: per link limit (named: what, where, how much), each mode's burst rate."""
    r = s["slow-link"]
    modes = list(r["modes"])
    names = [p["name"] for p in r["phases"]]
    fig, ax = plt.subplots(figsize=(9, 4.2), layout="constrained")
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        values = [row["burst"]["records_per_s"] for row in r["modes"][mode]["phases"]]
        xs = [j + i * width for j in range(len(names))]
        bars = ax.bar(xs, values, width, color=_color(mode), label=mode)
        ax.bar_label(bars, fmt="{:,.0f}", fontsize=8)
    ax.set_xticks(
        [j + width * (len(modes) - 1) / 2 for j in range(len(names))],
        [_wrap(n, 30) for n in names],
        fontsize=7,
    )
    ax.set_ylabel("acknowledged records/s")
    ax.set_title(
        f"slow link: a burst of {r.get('burst_records', 0):,} acks=all records per mode, "
        "under each limit",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    return fig


def _lost(s: dict[str, Any]) -> Any:
    """Horizontal bars, one per case and mode, labelled in words at a readable size, coloured
    by mode with a legend; the simulator's power-loss cases count batches, the others
    records."""
    r = s["data-loss"]
    rows: list[tuple[str, int, str]] = []  # (label, value, mode)
    for mode, m in r.get("acks1_leader_kill", {}).get("modes", {}).items():
        for acks, c in m.items():
            rows.append((f"leader killed, {acks}: {mode}", c["lost"], mode))
    for mode, c in r.get("unclean_election", {}).get("modes", {}).items():
        rows.append((f"stale replica elected: {mode}", c["lost"], mode))
    for mode, m in r.get("power_loss", {}).get("modes", {}).items():
        for key, case in (("last_standing", "last standing"), ("correlated", "correlated")):
            if key in m:
                rows.append(
                    (
                        f"power loss, {case} (sim, batches): {mode}",
                        m[key]["lost_acked_batches"],
                        mode,
                    )
                )
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.4), layout="constrained")
    ys = list(range(len(rows)))[::-1]
    bars = ax.barh(ys, [v for _, v, _ in rows], color=[_color(m) for _, _, m in rows])
    ax.bar_label(bars, fontsize=8, padding=2)
    ax.set_yticks(ys, [label for label, _, _ in rows], fontsize=8)
    ax.set_xlabel("acknowledged, then lost (records; power loss: acks=all batches)")
    ax.set_title("acknowledged data lost, per case and mode", fontsize=10)
    seen = dict.fromkeys(_mode_family(m) for _, _, m in rows)
    handles = [Patch(color=COLORS[f]) for f in seen if f in COLORS]
    ax.legend(handles, [f for f in seen if f in COLORS], fontsize=8, loc="lower right")
    ax.margins(x=0.08)
    return fig


def _mode_family(mode: str) -> str:
    return next((m for m in COLORS if mode.startswith(m)), mode)


__all__ = ["plot_all"]
