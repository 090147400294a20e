"""The slow-link part of ``report.md`` and of the terminal summary (`kraft.compare.slow_links`):
what each phase limited, on which host and how much, and per mode and phase the acknowledged
records/s, the ack latency and the ISR and leader changes."""

from __future__ import annotations

from typing import Any

from kraft.compare.report import _f, _table

CLAIM = (
    "On separate hosts, a follower behind a slow link slows every acks=all write of an ISR "
    "topic (it commits once every in-sync replica has the record) until "
    "`replica.lag.time.max.ms` drops the follower from the ISR; a quorum topic commits at a "
    "majority, so the slow follower costs it nothing. A slow leader costs both."
)

NO_KAFKA = (
    "Apache Kafka's column is not run on network hosts (`--with-kafka` is for `--network "
    "local`): this run compares kraft's two replication modes under the same real link limits."
)


def limit_note(phase: dict[str, Any]) -> str:
    """How the limit was applied and what the link's counters said at its end."""
    limit = phase.get("limit")
    if not limit:
        return "-"
    counters = phase.get("counters", {})
    if limit["kind"] == "bandwidth":
        held = sum(c.get("overlimits", 0) for c in counters.values())
        return f"tbf; {held:,} packets held back by the bucket"
    relayed = sum(c.get("dropped", 0) for c in counters.values())
    by = limit.get("by", "")
    return f"{by}; {relayed:,} inbound packets delayed" if by == "relay" else by


def _isr(row: dict[str, Any]) -> str:
    if row["isr_shrink_s"] is None:
        return "kept in the ISR"
    back = (
        "back while limited"
        if row["isr_back_while_limited"]
        else f"back {_f(row['isr_expand_s'], '.1f', 'never')} s after the heal"
    )
    return f"out {row['isr_shrink_s']:.1f} s after the limit began, {back}"


def slow_link_section(r: dict[str, Any], results: dict[str, Any]) -> list[str]:
    """The ``## Slow link`` section's body."""
    if "error" in r:
        return [f"The scenario failed: `{r['error']}`."]
    lag = results.get("broker_config", {}).get("replica.lag.time.max.ms")
    rate = results.get("timing", {}).get("rate_per_s")
    phases = [
        [
            p["name"],
            f"{p['start']:.1f}-{(p['healed'] or p['end']):.1f} s",
            limit_note(p),
        ]
        for p in r["phases"]
    ]
    rows = []
    for mode, m in r["modes"].items():
        for row in m["phases"]:
            rows.append(
                [
                    mode,
                    row["phase"],
                    _f(row["acked_per_s"]),
                    _f(row["latency"]["p50_ms"]),
                    _f(row["latency"]["p99_ms"]),
                    _f(row["unavailable_s"], ".2f"),
                    "-" if m.get("quorum") else _isr(row),
                    str(row["leader_changes"]),
                    _f(row.get("burst", {}).get("records_per_s"), ",.0f"),
                    _f(row.get("burst", {}).get("p99_ms"), ",.0f"),
                ]
            )
    leaders = ", ".join(f"`{mode}` broker {m['leader']}" for mode, m in r["modes"].items())
    return [
        f"Claim: {CLAIM}",
        "",
        f"Every node on its own network host; the limits act on the packets of a host's link "
        f"(below TCP). The limited follower: broker {r['victim']} (`{r['victim_host']}`), a "
        f"follower of every mode's partition; leaders: {leaders}. One probe per mode, "
        f"{_f(rate, 'g')} records/s offered, acks=all, the modes side by side under the same "
        f"limit at the same moment; `replica.lag.time.max.ms`={lag}. A delay on every "
        "broker's link is paid twice between two brokers (once leaving, once arriving).",
        "",
        *_table(["phase: what was limited, where, how much", "limited", "applied by"], phases),
        "",
        "Per mode and phase: *acked/s*: acknowledgements received while limited, per second; "
        "latency of the records sent while limited (acknowledgement minus send); "
        "*unavailable*: seconds of the phase (to the end of its recovery) in gaps of more than "
        "0.5 s between acknowledgements; *ISR*: when the limited follower left the ISR topic's "
        "ISR and came back; leader changes in the phase. *Burst*: after the probes, the same "
        f"limit again and under it {r.get('burst_records', 0):,} acks=all records of 100 B "
        "per mode (window 20,000, linger.ms=5), one mode after the other: the records/s a "
        "mode took under the limit, and their p99.",
        "",
        *_table(
            [
                "mode",
                "phase",
                "probe acked/s",
                "p50 ms",
                "p99 ms",
                "unavailable s",
                "ISR",
                "leaders",
                "burst records/s",
                "burst p99 ms",
            ],
            rows,
        ),
    ]


def slow_link_summary(r: dict[str, Any], mode: str) -> str:
    """The summary table's cell: p50 ms without a limit, then under each limit."""
    m = r.get("modes", {}).get(mode)
    if not m:
        return "-"
    return "/".join(_f(row["latency"]["p50_ms"], ".0f") for row in m["phases"])


__all__ = ["CLAIM", "NO_KAFKA", "limit_note", "slow_link_section", "slow_link_summary"]
