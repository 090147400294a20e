"""The timeline of a fault run: acknowledged writes per second, produce latency (send to
acknowledgement, p50 and p99 per second) and polls per second, with every fault's interval
shaded and labelled."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from replication.nemesis.history import Ack, Operation, Poll, Send, SendFailed

if TYPE_CHECKING:
    from replication.nemesis.run import AppliedFault


FAULT_COLORS = {
    "kill": "tab:red",
    "kill-controller": "tab:brown",
    "pause": "tab:gray",
    "stop": "tab:pink",
    "partition": "tab:orange",
    "roll": "tab:olive",
    "delay": "tab:cyan",
    "bandwidth": "tab:purple",
    "loss": "tab:green",
    "reorder": "tab:blue",
    "duplicate": "yellowgreen",
    "stale-leader": "black",
    "lone-leader": "black",
}
"""The shade of each fault kind on the timeline (a legend names them)."""


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def plot_timeline(
    operations: Sequence[Operation], faults: Sequence[AppliedFault], path: Path
) -> None:
    """Write the PNG (matplotlib, headless)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sent_at: dict[str, int] = {}
    acks: dict[int, int] = defaultdict(int)
    failures: dict[int, int] = defaultdict(int)
    polls: dict[int, int] = defaultdict(int)
    latencies: dict[int, list[float]] = defaultdict(list)
    for op in operations:
        match op:
            case Send():
                sent_at[op.value] = op.time_ms
            case Ack():
                second = op.time_ms // 1000
                acks[second] += 1
                if op.value in sent_at:
                    latencies[second].append(op.time_ms - sent_at[op.value])
            case SendFailed():
                failures[op.time_ms // 1000] += 1
            case Poll():
                polls[op.time_ms // 1000] += 1
    seconds = sorted(set(acks) | set(polls) | set(failures))
    if not seconds:
        seconds = [0]
    span = range(seconds[0], seconds[-1] + 1)
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(12, 8), sharex=True)
    top.plot(span, [acks.get(s, 0) for s in span], label="acknowledged/s", color="tab:blue")
    top.plot(span, [failures.get(s, 0) for s in span], label="failed/s", color="tab:red")
    top.set_ylabel("writes/s")
    top.legend(loc="upper right")
    lat_seconds = [s for s in span if latencies.get(s)]
    middle.plot(lat_seconds, [_percentile(latencies[s], 0.5) for s in lat_seconds], label="p50")
    middle.plot(lat_seconds, [_percentile(latencies[s], 0.99) for s in lat_seconds], label="p99")
    middle.set_yscale("log")
    middle.set_ylabel("send→ack ms")
    middle.legend(loc="upper right")
    bottom.plot(span, [polls.get(s, 0) for s in span], label="polled/s", color="tab:green")
    bottom.set_ylabel("reads/s")
    bottom.set_xlabel("seconds since start")
    shaded: set[str] = set()
    for fault in faults:
        color = FAULT_COLORS.get(fault.kind, "orange")
        for axis in (top, middle, bottom):
            axis.axvspan(
                fault.start_s,
                fault.end_s or fault.start_s,
                color=color,
                alpha=0.2,
                label=fault.kind if axis is bottom and fault.kind not in shaded else None,
            )
        shaded.add(fault.kind)
        top.annotate(
            fault.label,
            (fault.start_s, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=60,
            fontsize=7,
            va="bottom",
        )
    if shaded:
        bottom.legend(loc="upper right", fontsize=7, ncols=min(len(shaded) + 1, 6))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = ["plot_timeline"]
