"""The slow-link scenario of ``kraft compare --network netns``: an ISR topic and a quorum topic
side by side under the same real link limit (issue 29).

Every node is on its own host (`kraft.cluster.netns_cluster.NetnsCluster`), so a limit acts on
the packets of one host's link, below TCP: a delay with jitter (netem, or the delaying relay
where the kernel has none: the result says which ran) or a token bucket (TBF). One paced
probe per mode runs through every phase, as in the slow-follower scenario:

1. no limit (the baseline);
2. each `LinkLimit` in turn, on one follower's host (a follower of every mode's partition,
   leading none) or on every broker's host, then healed and given time to recover.

Per mode and phase: acknowledged records/s, ack latency p50/p99 of the records sent in it,
and the ISR changes (when the limited follower left the ISR and when it came back) and
leader changes. The probes offer a fixed rate, so their records/s show when writes were
acknowledged; what a mode can take under each limit is a second pass: once the probes have
stopped, a burst of ``steady_records`` acks=all records per mode under each limit again, one
mode after the other (which goes first alternates), each from a full ISR
(`scenarios.produce_records`, the steady scenario's harness).

An ISR topic commits once every in-sync replica has the record, so a follower behind a slow
link slows every write until ``replica.lag.time.max.ms`` drops it; a quorum commits at a
majority, so a slow follower costs it nothing (a slow leader does).

The plan of limits and the rows are pure (`plan_limits`, `link_phase_row`); `slow_link` is the
shell that applies them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from kraft.compare.modes import Arena, Mode
from kraft.compare.scenarios import (
    Say,
    Timing,
    isr_events,
    phase_row,
    probed_follower,
    produce_records,
    stop_probes,
    wait_flowing,
    window_percentiles,
)
from kraft.compare.workload import Clock, Send, TopicWatcher, latency_series, throughput_series

Where = Literal["follower", "brokers"]

DELAY_MS = 20.0
JITTER_MS = 5.0
BANDWIDTH_KBIT = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkLimit:
    """One phase's limit: a delay (each way, ± jitter) or a bandwidth (each way), on the
    limited follower's host or on every broker's host."""

    where: Where
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    kbit: int = 0

    @property
    def kind(self) -> str:
        return "delay" if self.kbit == 0 else "bandwidth"

    def hosts(self, follower: str, brokers: Sequence[str]) -> list[str]:
        """The hosts it limits: the ``follower``'s, or every broker's."""
        return [follower] if self.where == "follower" else list(brokers)

    def describe(self, hosts: Sequence[str]) -> str:
        """What is limited, on which hosts, how much: the phase's name in the report."""
        what = (
            f"{self.delay_ms:g} ms ± {self.jitter_ms:g} ms delay each way"
            if self.kind == "delay"
            else f"{self.kbit:,} kbit/s each way (TBF)"
        )
        on = f"on {hosts[0]}'s link" if self.where == "follower" else "on every broker's link"
        return f"{what} {on}" + (f" ({', '.join(hosts)})" if self.where == "brokers" else "")


def plan_limits(
    delay_ms: float = DELAY_MS, jitter_ms: float = JITTER_MS, kbit: int = BANDWIDTH_KBIT
) -> tuple[LinkLimit, ...]:
    """The phases' limits: the delay on a follower's host, the bandwidth on it, the delay on
    every broker's host (a delay of 0 or a bandwidth of 0 leaves that phase out).

    Raises:
        ValueError: a negative delay or jitter, or a jitter above the delay.
    """
    if delay_ms < 0 or jitter_ms < 0 or kbit < 0:
        raise ValueError(f"delay {delay_ms} ms, jitter {jitter_ms} ms, {kbit} kbit/s: give >= 0")
    if jitter_ms > delay_ms:
        raise ValueError(f"jitter {jitter_ms} ms above the delay {delay_ms} ms")
    limits: list[LinkLimit] = []
    if delay_ms:
        limits.append(LinkLimit(where="follower", delay_ms=delay_ms, jitter_ms=jitter_ms))
    if kbit:
        limits.append(LinkLimit(where="follower", kbit=kbit))
    if delay_ms:
        limits.append(LinkLimit(where="brokers", delay_ms=delay_ms, jitter_ms=jitter_ms))
    return tuple(limits)


def isr_moments(
    events: Sequence[dict[str, Any]], victim: int, start: float, healed: float, end: float
) -> dict[str, Any]:
    """From a topic's ISR events (`scenarios.isr_events`): seconds from ``start`` to the first
    ISR without ``victim`` before ``healed``, seconds from ``healed`` (or from that shrink, if
    it came back while limited) to its return, and the leader changes in ``[start, end)``."""
    shrink = next(
        (e["t"] for e in events if start <= e["t"] < healed and victim not in e["isr"]), None
    )
    back = (
        next((e["t"] for e in events if e["t"] > shrink and victim in e["isr"]), None)
        if shrink is not None
        else None
    )
    before = [e for e in events if e["t"] < start]
    leader = before[-1]["leader"] if before else None
    changes = 0
    for e in events:
        if start <= e["t"] < end:
            if leader is not None and e["leader"] != leader:
                changes += 1
            leader = e["leader"]
    return {
        "isr_shrink_s": round(shrink - start, 3) if shrink is not None else None,
        "isr_expand_s": round(back - healed, 3) if back is not None and back >= healed else None,
        "isr_back_while_limited": back is not None and back < healed,
        "leader_changes": changes,
    }


def link_phase_row(
    name: str, sends: list[Send], a: float, b: float, *, healed: float | None = None
) -> dict[str, Any]:
    """One phase of one mode: `scenarios.phase_row` (sent, acknowledged, unavailable), the
    records/s acknowledged in ``[a, b)``, and the latency of the records sent in
    ``[a, healed)`` (the limited part; all of it without a limit)."""
    limited_end = b if healed is None else healed
    acked_in = sum(1 for s in sends if s.acked_s is not None and a <= s.acked_s < limited_end)
    seconds = limited_end - a
    return {
        **phase_row(name, sends, a, b),
        "acked_per_s": round(acked_in / seconds, 1) if seconds > 0 else None,
        "latency": window_percentiles(sends, a, limited_end),
    }


def slow_link(
    arena: Arena,
    modes: Sequence[Mode],
    clock: Clock,
    timing: Timing,
    say: Say,
    *,
    limits: Sequence[LinkLimit] = plan_limits(),
) -> dict[str, Any]:
    """Probe an ISR topic and a quorum topic (both led from the first broker where the
    election allows) through a baseline and each of ``limits`` (``pause_s`` each, then healed
    and ``after_s`` to recover, until the ISR is full again); then a burst of
    ``steady_records`` per mode without a limit and under each limit."""
    from kraft.cluster.netns_cluster import NetnsCluster

    cluster = arena.cluster
    if not isinstance(cluster, NetnsCluster) or cluster.network is None:
        raise ValueError("the slow-link scenario needs a cluster of hosts (--network netns)")
    network = cluster.network
    topics, victim, probes = probed_follower("link", arena, modes, clock, timing)
    brokers = [cluster.host_name(b) for b in cluster.broker_ids]
    phases: list[dict[str, Any]] = []
    with TopicWatcher(arena.describe, list(topics.values()), clock) as watcher:
        wait_flowing(probes, clock)
        say(f"warm-up {timing.warmup_s:.0f}s")
        time.sleep(timing.warmup_s)
        wait_flowing(probes, clock, since=clock.now())
        start = clock.now()
        say(f"no limit, {timing.phase_s:.0f}s")
        time.sleep(timing.phase_s)
        phases.append({"name": "no limit", "start": start, "healed": None, "end": clock.now()})
        for limit in limits:
            hosts = limit.hosts(cluster.host_name(victim), brokers)
            text = limit.describe(hosts)
            say(f"{text}, {timing.pause_s:.0f}s")
            start = clock.now()
            try:
                ran = _apply(network, limit, hosts, seed=len(phases))
                time.sleep(timing.pause_s)
                counters = {h: network.limits(h) for h in hosts}
            finally:
                for host in hosts:
                    network.heal(host)
            healed = clock.now()
            say(f"healed; {timing.after_s:.0f}s more")
            time.sleep(timing.after_s)
            arena.wait_full_isr(list(topics.values()), timeout=60)
            phases.append(
                {
                    "name": text,
                    "limit": {**asdict(limit), "kind": limit.kind, "hosts": hosts, "by": ran},
                    "counters": counters,
                    "start": start,
                    "healed": healed,
                    "end": clock.now(),
                }
            )
        end = clock.now()
        stop_probes(probes)
    burst = timing.steady_records
    bursts: dict[str, list[dict[str, Any]]] = {m.name: [] for m in modes}
    for i, limited in enumerate((None, *limits)):
        hosts = [] if limited is None else limited.hosts(cluster.host_name(victim), brokers)
        text = "no limit" if limited is None else limited.describe(hosts)
        # each from a full ISR (not behind the other mode's backlog), who goes first alternating
        for mode in modes if i % 2 == 0 else modes[::-1]:
            try:
                if limited is not None:
                    _apply(network, limited, hosts, seed=len(phases))
                say(f"{mode.name}: {burst:,} records, acks=all, {text}")
                run = produce_records(arena, topics[mode.name], burst, 20_000, 5)
                bursts[mode.name].append({k: run[k] for k in ("records_per_s", "p50_ms", "p99_ms")})
            finally:
                for host in hosts:
                    network.heal(host)
            arena.wait_full_isr(list(topics.values()), timeout=60)
    out: dict[str, Any] = {
        "victim": victim,
        "victim_host": cluster.host_name(victim),
        "burst_records": burst,
        "phases": [
            {k: round(v, 3) if isinstance(v, float) else v for k, v in p.items()} for p in phases
        ],
        "modes": {},
    }
    for mode in modes:
        topic, probe = topics[mode.name], probes[mode.name]
        events = isr_events(watcher, topic)
        rows = []
        for p, burst_row in zip(phases, bursts[mode.name], strict=True):
            healed = p["healed"]
            row = link_phase_row(p["name"], probe.sends, p["start"], p["end"], healed=healed)
            row.update(isr_moments(events, victim, p["start"], healed or p["end"], p["end"]))
            rows.append({**row, "burst": burst_row})
        out["modes"][mode.name] = {
            "topic": topic,
            "quorum": mode.quorum,
            "leader": arena.leader(topic),
            "phases": rows,
            "isr_events": events,
            "latency_series": latency_series(probe.sends, 0.5),
            "throughput_series": throughput_series(
                probe.sends, 0.5, probe.sends[0].sent_s if probe.sends else 0.0, end
            ),
        }
    return out


def _apply(network: Any, limit: LinkLimit, hosts: Sequence[str], seed: int) -> str:
    """Put ``limit`` on each of ``hosts``' links; what ran it (netem, the relay, or tbf)."""
    ran = "tbf"
    for host in hosts:
        if limit.kind == "delay":
            ran = network.delay(host, limit.delay_ms, jitter_ms=limit.jitter_ms, seed=seed)
        else:
            network.bandwidth(host, limit.kbit)
    return ran


__all__ = [
    "BANDWIDTH_KBIT",
    "DELAY_MS",
    "JITTER_MS",
    "LinkLimit",
    "isr_moments",
    "link_phase_row",
    "plan_limits",
    "slow_link",
]
