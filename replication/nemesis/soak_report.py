"""The figures of a soak run (`replication.nemesis.soak`) from its samples: pure, except
`plot_soak` (matplotlib, writes a file).

A `Sample` is taken once a second: the records acknowledged and consumed so far, and each
node's resident memory, descriptors, threads and disk. From them:

- `rates`: records/s acknowledged and consumed, per second;
- `slope_percent_per_10_min`: a least-squares line through a series after the warm-up, as a
  share of the series' mean per 10 minutes (the soak's goal: memory and descriptors flat,
  under 1% per 10 minutes); `node_slopes` takes it over the longest-lived process of each
  node (a killed and restarted node starts from nothing again) and says how often each node
  was restarted;
- `memory_by_fault`: per fault kind, how much a node's memory changed over each fault and the
  quiet time after it (what grows with the load shows under every kind; what grows with what a
  fault causes, under that kind only);
- `recoveries`: per healed fault, the seconds from the heal to the start of the first
  `RECOVERY_WINDOW_S` seconds whose mean acknowledged rate is within 10% of the steady rate
  (the median outside faults and the 10 s after each).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

RECOVERY_WINDOW_S: Final = 3
"""Seconds averaged when judging whether the rate has recovered."""
SMOOTH_S: Final = 10
"""The plot's rolling mean of records/s (the raw per-second rate is drawn faint behind it)."""
RECOVERED: Final = 0.9
"""The share of the steady rate that counts as recovered."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSample:
    pid: int
    rss_bytes: int
    fds: int
    threads: int
    disk_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    t_s: float
    acknowledged: int
    consumed: int
    nodes: dict[str, NodeSample] = field(default_factory=dict)
    """Host name -> its process's figures (absent while it is down)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultSpan:
    label: str
    start_s: float
    end_s: float


def rates(samples: Sequence[Sample]) -> list[tuple[float, float, float]]:
    """``(t, acknowledged/s, consumed/s)`` between consecutive samples."""
    out = []
    for before, after in itertools.pairwise(samples):
        dt = after.t_s - before.t_s
        if dt > 0:
            out.append(
                (
                    after.t_s,
                    (after.acknowledged - before.acknowledged) / dt,
                    (after.consumed - before.consumed) / dt,
                )
            )
    return out


def slope_percent_per_10_min(points: Sequence[tuple[float, float]], warmup_s: float) -> float:
    """The least-squares slope of ``(t, value)`` after ``warmup_s``, in percent of the mean
    value per 10 minutes (0.0 with fewer than two points or a zero mean)."""
    kept = [(t, v) for t, v in points if t >= warmup_s]
    if len(kept) < 2:
        return 0.0
    mean_t = statistics.fmean(t for t, _ in kept)
    mean_v = statistics.fmean(v for _, v in kept)
    spread = sum((t - mean_t) ** 2 for t, _ in kept)
    if spread == 0 or mean_v == 0:
        return 0.0
    slope = sum((t - mean_t) * (v - mean_v) for t, v in kept) / spread
    return slope * 600 / mean_v * 100


def node_slopes(samples: Sequence[Sample], warmup_s: float) -> dict[str, dict[str, float]]:
    """Per host, the `slope_percent_per_10_min` of its resident memory (``rss``) and
    descriptors (``fds``), over the samples of its process seen most often after the warm-up,
    and the same over the second half of those samples (``rss_late``, ``fds_late``: what is
    still growing once the run has settled); its descriptors at the first and last of them
    and their most (``fds_start``, ``fds_end``, ``fds_max``: a node holds a few dozen, so one
    more is a few percent, and a count bounded by design shows as a level it does not pass);
    and how many times the host's process was replaced in the whole run (``restarts``: 0
    means the slopes cover one process that lived the whole run)."""
    out: dict[str, dict[str, float]] = {}
    for host in sorted({h for s in samples for h in s.nodes}):
        mine = [(s.t_s, s.nodes[host]) for s in samples if host in s.nodes and s.t_s >= warmup_s]
        if not mine:
            continue
        pids = [n.pid for _, n in mine]
        longest = max(set(pids), key=pids.count)
        kept = [(t, n) for t, n in mine if n.pid == longest]
        late = kept[len(kept) // 2 :]
        every_pid = [s.nodes[host].pid for s in samples if host in s.nodes]
        restarts = sum(1 for a, b in itertools.pairwise(every_pid) if a != b)

        def slope(points: Sequence[tuple[float, NodeSample]], rss: bool) -> float:
            series = [(t, n.rss_bytes if rss else n.fds) for t, n in points]
            return round(slope_percent_per_10_min(series, 0.0), 2)

        out[host] = {
            "rss": slope(kept, True),
            "fds": slope(kept, False),
            "rss_late": slope(late, True),
            "fds_late": slope(late, False),
            "fds_start": kept[0][1].fds,
            "fds_end": kept[-1][1].fds,
            "fds_max": max(n.fds for _, n in kept),
            "restarts": restarts,
        }
    return out


def memory_by_fault(
    samples: Sequence[Sample], faults: Sequence[FaultSpan], warmup_s: float
) -> dict[str, dict[str, float]]:
    """Per fault kind (its label up to the first ``:``) and per role (a host name up to its
    first ``-``), the mean change of a node's resident memory in MiB from just before a fault
    starts to just before the next one (or the end), over the faults that start after the
    warm-up; ``faults``: how many of that kind. A node restarted in between is left out of
    that fault. Memory that grows with the records shows under every kind; memory that grows
    only under faults that stop replication (partitions, loss) comes from what they cause
    (leaders moving, followers catching up), not from the steady load."""
    by_time = [(s.t_s, s) for s in samples]

    def before(t: float) -> Sample | None:
        found = None
        for ts, sample in by_time:
            if ts >= t:
                break
            found = sample
        return found

    changes: dict[str, dict[str, list[float]]] = {}
    counts: dict[str, int] = {}
    for i, fault in enumerate(faults):
        if fault.start_s < warmup_s:
            continue
        end = faults[i + 1].start_s if i + 1 < len(faults) else float("inf")
        start_sample, end_sample = before(fault.start_s), before(end)
        if start_sample is None or end_sample is None:
            continue
        kind = fault.label.split(":", 1)[0].split(" ", 1)[0]
        counts[kind] = counts.get(kind, 0) + 1
        per_role = changes.setdefault(kind, {})
        for host, first in start_sample.nodes.items():
            last = end_sample.nodes.get(host)
            if last is not None and last.pid == first.pid:
                change = (last.rss_bytes - first.rss_bytes) / 2**20
                per_role.setdefault(host.split("-", 1)[0], []).append(change)
    return {
        kind: {
            **{role: round(statistics.fmean(v), 3) for role, v in sorted(changes[kind].items())},
            "faults": counts[kind],
        }
        for kind in sorted(counts)
    }


def stalled_seconds(series: Sequence[tuple[float, float]], warmup_s: float) -> int:
    """Seconds after the warm-up in which nothing was acknowledged."""
    return sum(1 for t, r in series if t >= warmup_s and r == 0)


def steady_rate(
    series: Sequence[tuple[float, float]], faults: Sequence[FaultSpan], warmup_s: float
) -> float:
    """The median rate after the warm-up outside every fault and the 10 s after it."""
    quiet = [
        r
        for t, r in series
        if t >= warmup_s and not any(f.start_s <= t <= f.end_s + 10 for f in faults)
    ]
    return statistics.median(quiet) if quiet else 0.0


def recoveries(
    series: Sequence[tuple[float, float]], faults: Sequence[FaultSpan], steady: float
) -> list[float | None]:
    """Per fault, the seconds from its heal until the rate averaged over
    `RECOVERY_WINDOW_S` reaches `RECOVERED` of ``steady`` (None: not before the next fault or
    the end)."""
    out: list[float | None] = []
    if steady <= 0:  # no steady rate to come back to (the load stalled outside the faults)
        return [None] * len(faults)
    for i, fault in enumerate(faults):
        until = faults[i + 1].start_s if i + 1 < len(faults) else float("inf")
        after = [(t, r) for t, r in series if fault.end_s <= t < until]
        found = None
        for j in range(len(after) - RECOVERY_WINDOW_S + 1):
            window = after[j : j + RECOVERY_WINDOW_S]
            if statistics.fmean(r for _, r in window) >= RECOVERED * steady:
                found = round(window[0][0] - 1 - fault.end_s, 1)  # the window's first second
                break
        out.append(max(0.0, found) if found is not None else None)
    return out


def _rolling(values: Sequence[float], width: int) -> list[float]:
    out = []
    for i in range(len(values)):
        window = values[max(0, i - width + 1) : i + 1]
        out.append(sum(window) / len(window))
    return out


def plot_soak(
    samples: Sequence[Sample], faults: Sequence[FaultSpan], path: Path, title: str
) -> None:
    """Records/s, and per node resident memory, descriptors, threads and disk, over time,
    with the faults shaded (``path``: a PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nan = float("nan")
    series = rates(samples)
    hosts = sorted({h for s in samples for h in s.nodes})
    panels = [
        ("records/s", None),
        ("resident memory (MiB)", lambda n: n.rss_bytes / 2**20),
        ("open descriptors", lambda n: n.fds),
        ("threads", lambda n: n.threads),
        ("disk (MiB)", lambda n: n.disk_bytes / 2**20),
    ]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 12), sharex=True)
    for axis, (label, value) in zip(axes, panels, strict=True):
        if value is None:
            times = [t for t, _, _ in series]
            for column, name, color in (
                (1, "acknowledged", "tab:blue"),
                (2, "consumed (group)", "tab:orange"),
            ):
                raw = [row[column] for row in series]
                axis.plot(times, raw, lw=0.4, alpha=0.35, color=color)
                axis.plot(
                    times,
                    _rolling(raw, SMOOTH_S),
                    lw=1.3,
                    color=color,
                    label=f"{name}, {SMOOTH_S} s mean",
                )
            smooth = _rolling([row[1] for row in series], SMOOTH_S)
            if smooth:  # the mean's scale: catch-up spikes after a heal run off the top
                axis.set_ylim(0, max(smooth) * 1.8 or 1)
            axis.legend(loc="upper right", fontsize=8)
        else:
            for host in hosts:  # NaN while a node is down: a gap in its line
                values = [value(s.nodes[host]) if host in s.nodes else nan for s in samples]
                axis.plot([s.t_s for s in samples], values, lw=0.8, label=host)
            if label.startswith("resident"):
                axis.legend(loc="upper left", fontsize=7, ncol=3)
        axis.set_ylabel(label, fontsize=9)
        axis.grid(alpha=0.3)
        for fault in faults:
            axis.axvspan(fault.start_s, fault.end_s, color="tab:red", alpha=0.12, lw=0)
    for fault in faults:
        axes[0].annotate(
            fault.label, (fault.start_s, 1.0), xycoords=("data", "axes fraction"),
            fontsize=6, rotation=90, va="top", ha="right",
        )  # fmt: skip
    axes[-1].set_xlabel("seconds")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


__all__ = [
    "FaultSpan",
    "NodeSample",
    "Sample",
    "memory_by_fault",
    "node_slopes",
    "plot_soak",
    "rates",
    "recoveries",
    "slope_percent_per_10_min",
    "stalled_seconds",
    "steady_rate",
]
