"""The fault scenarios of ``kraft compare`` on a real `LocalCluster`: slow follower, failures,
leader kill and steady state (the data-loss ones are in `kraft.compare.losses`).

Each scenario creates one fresh one-partition topic per mode, runs a `ProbeProducer` on each
(the modes side by side, under the same fault at the same moment, where the fault allows) and
returns a JSON-able dict. Faults are real: SIGSTOP/SIGCONT of a broker process (a follower
stalled, as by a GC pause or a stalled disk), SIGKILL and a restart.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kraft.bench.cpu import nodes_cpu
from kraft.bench.kafka_clients import librdkafka_produce
from kraft.bench.produce_consume import percentiles, produce
from kraft.compare.modes import Arena, Mode
from kraft.compare.workload import (
    Clock,
    ProbeProducer,
    Send,
    TopicWatcher,
    latency_series,
    throughput_series,
    unavailable_s,
)

Say = Callable[[str], None]

STUCK_S = 15.0
"""A leader kill after which no record sent is acknowledged this long is counted unrecovered."""


@dataclass(frozen=True, slots=True)
class Timing:
    """Durations of one run (``--quick`` or the full run), seconds unless named."""

    warmup_s: float
    pause_s: float
    after_s: float
    phase_s: float
    kills: int
    steady_records: int
    rate_per_s: float


FULL = Timing(
    warmup_s=5, pause_s=20, after_s=10, phase_s=8, kills=10, steady_records=30_000, rate_per_s=200
)
QUICK = Timing(
    warmup_s=2, pause_s=8, after_s=4, phase_s=4, kills=2, steady_records=5_000, rate_per_s=150
)


def _victim(arena: Arena, leaders: set[int], fallback_not: set[int]) -> int:
    """A broker that leads none of ``leaders`` (else one outside ``fallback_not``)."""
    for b in reversed(arena.cluster.broker_ids):
        if b not in leaders and b not in fallback_not:
            return b
    return next(b for b in reversed(arena.cluster.broker_ids) if b not in fallback_not)


def _start_probes(
    arena: Arena, topics: dict[str, str], clock: Clock, **options: Any
) -> dict[str, ProbeProducer]:
    probes = {mode: arena.probe(topic, clock, **options) for mode, topic in topics.items()}
    for p in probes.values():
        p.start()
    return probes


def wait_flowing(
    probes: dict[str, ProbeProducer], clock: Clock, timeout: float = 30.0, since: float = -1.0
) -> None:
    """Until every probe has had a send (sent after ``since``) acknowledged (metadata learnt,
    connections up)."""
    deadline = time.monotonic() + timeout
    while not all(p.acked_after(since) for p in probes.values()):
        if time.monotonic() > deadline:
            raise TimeoutError("the probe producers got no acknowledgement within 30s")
        time.sleep(0.05)


def stop_probes(probes: dict[str, ProbeProducer]) -> None:
    for p in probes.values():
        p.stop()


def _first_sent(probe: ProbeProducer) -> float:
    return probe.sends[0].sent_s if probe.sends else 0.0


def isr_events(watcher: TopicWatcher, topic: str) -> list[dict[str, Any]]:
    return [
        {"t": round(c.t, 3), "leader": c.leader, "epoch": c.leader_epoch, "isr": list(c.isr)}
        for c in watcher.of(topic)
    ]


def window_percentiles(
    sends: list[Send], start: float, end: float, *, acked_by: float | None = None
) -> dict[str, Any]:
    """Latency percentiles of the sends of ``[start, end)`` that were acknowledged (by
    ``acked_by``, when given)."""
    lat = [
        (s.acked_s - s.sent_s) * 1e3
        for s in sends
        if s.acked_s is not None
        and start <= s.sent_s < end
        and (acked_by is None or s.acked_s < acked_by)
    ]
    return {"acked": len(lat), **percentiles(lat), "max_ms": round(max(lat), 1) if lat else None}


def probed_follower(
    prefix: str, arena: Arena, modes: Sequence[Mode], clock: Clock, timing: Timing
) -> tuple[dict[str, str], int, dict[str, ProbeProducer]]:
    """One topic per mode (led from the first broker, where the election allows), a broker
    that follows every one of them and leads none, and a probe producer started on each at
    the timing's rate: mode -> topic, the follower, mode -> probe."""
    first = arena.cluster.broker_ids[0]
    topics = {m.name: arena.create(prefix, m, leader=first) for m in modes}
    leaders = {arena.leader(t) for t in topics.values()}
    victim = _victim(arena, leaders, set())
    probes = _start_probes(
        arena,
        topics,
        clock,
        rate_per_s=timing.rate_per_s,
        window=20_000,
        delivery_timeout_ms=120_000,
    )
    return topics, victim, probes


# -- slow follower -------------------------------------------------------------------------------


def slow_follower(
    arena: Arena, modes: Sequence[Mode], clock: Clock, timing: Timing, say: Say
) -> dict[str, Any]:
    """SIGSTOP one follower of every mode's partition for ``pause_s``: produce latency over
    time, and when the ISR shrank and expanded."""
    topics, victim, probes = probed_follower("slow", arena, modes, clock, timing)
    with TopicWatcher(arena.describe, list(topics.values()), clock) as watcher:
        wait_flowing(probes, clock)
        flowing_at = clock.now()  # "before" starts here: not the first sends' connecting
        say(f"warm-up {timing.warmup_s:.0f}s")
        time.sleep(timing.warmup_s)
        # and until a record sent since has been acknowledged: "before" is not empty however
        # slow acks=all is (a cold JVM under load took 4 s)
        wait_flowing(probes, clock, since=flowing_at)
        paused_at = clock.now()
        say(f"SIGSTOP broker {victim} for {timing.pause_s:.0f}s")
        arena.cluster.pause_broker(victim)
        try:
            time.sleep(timing.pause_s)
        finally:
            arena.cluster.resume_broker(victim)
        resumed_at = clock.now()
        say(f"SIGCONT broker {victim}; {timing.after_s:.0f}s more")
        time.sleep(timing.after_s)
        end = clock.now()
        stop_probes(probes)
    out: dict[str, Any] = {
        "victim": victim,
        "fault": {"kind": "SIGSTOP", "start": round(paused_at, 3), "end": round(resumed_at, 3)},
        "modes": {},
    }
    for mode in modes:
        topic, probe = topics[mode.name], probes[mode.name]
        events = isr_events(watcher, topic)
        shrink = next(
            (e["t"] for e in events if e["t"] >= paused_at and victim not in e["isr"]), None
        )
        expand = next(
            (
                e["t"]
                for e in events
                if shrink is not None and e["t"] > shrink and victim in e["isr"]
            ),
            None,
        )
        out["modes"][mode.name] = {
            "topic": topic,
            "leader": arena.leader(topic),
            # Undisturbed: sent and acknowledged before the pause. A record sent before it
            # but not yet acknowledged waits for the paused follower too; a fixed margin
            # (it was 0.5 s) let one in whenever acks took longer than that (a cold JVM
            # under load: 0.8-1 s), and "before" then showed the pause itself.
            "before": window_percentiles(probe.sends, flowing_at, paused_at, acked_by=paused_at),
            "during": window_percentiles(probe.sends, paused_at, resumed_at),
            "after": window_percentiles(probe.sends, resumed_at, end),
            "isr_shrink_s": round(shrink - paused_at, 3) if shrink is not None else None,
            "isr_expand_s": round(expand - resumed_at, 3) if expand is not None else None,
            "isr_events": events,
            "latency_series": latency_series(probe.sends, 0.5),
            "throughput_series": throughput_series(probe.sends, 0.5, _first_sent(probe), end),
            "failed": sum(1 for s in probe.sends if s.error),
        }
    return out


# -- failures ------------------------------------------------------------------------------------


def failures(
    arena: Arena, modes: Sequence[Mode], clock: Clock, timing: Timing, say: Say
) -> dict[str, Any]:
    """SIGKILL one replica, then a second, then restart both: per mode and phase, whether
    acks=all writes were still accepted and for how long they were not, and what one acks=all
    Produce request got at the phase's end (`Arena.produce_once`: NOT_ENOUGH_REPLICAS when
    the ISR is below ``min.insync.replicas``)."""
    first = arena.cluster.broker_ids[0]
    topics = {m.name: arena.create("fail", m, leader=first) for m in modes}
    probes = _start_probes(
        arena,
        topics,
        clock,
        rate_per_s=min(timing.rate_per_s, 100),
        delivery_timeout_ms=3_000,
        request_timeout_ms=1_500,
    )
    wait_flowing(probes, clock)
    phases: list[tuple[str, float, float]] = []
    once: list[dict[str, str]] = []
    killed: list[int] = []

    def produce_once() -> None:
        with ThreadPoolExecutor(max_workers=len(modes)) as pool:
            answers = pool.map(arena.produce_once, [topics[m.name] for m in modes])
            once.append(dict(zip([m.name for m in modes], answers, strict=True)))

    def phase(name: str) -> None:
        start = clock.now()
        time.sleep(timing.phase_s)
        phases.append((name, start, clock.now()))
        produce_once()

    phase("all replicas up")
    leaders = {arena.leader(t) for t in topics.values()}
    for label in ("1 replica killed", "2 replicas killed"):
        victim = _victim(arena, leaders, set(killed))
        say(f"SIGKILL broker {victim} ({label})")
        arena.cluster.kill_broker(victim)
        killed.append(victim)
        phase(label)
    say(f"restarting brokers {killed}")
    start = clock.now()
    arena.restart(killed)
    time.sleep(timing.phase_s)
    phases.append(("restarted", start, clock.now()))
    produce_once()
    stop_probes(probes)
    out: dict[str, Any] = {
        "killed": killed,
        "phases": [{"name": n, "start": round(a, 3), "end": round(b, 3)} for n, a, b in phases],
        "modes": {},
    }
    for mode in modes:
        probe = probes[mode.name]
        rows = [
            {**phase_row(name, probe.sends, a, b), "produce_once": answers[mode.name]}
            for (name, a, b), answers in zip(phases, once, strict=True)
        ]
        out["modes"][mode.name] = {
            "topic": topics[mode.name],
            "phases": rows,
            "throughput_series": throughput_series(
                probe.sends, 0.5, _first_sent(probe), phases[-1][2]
            ),
        }
    return out


# -- leader kill ---------------------------------------------------------------------------------


def leader_kill(
    arena: Arena, modes: Sequence[Mode], clock: Clock, timing: Timing, say: Say
) -> dict[str, Any]:
    """SIGKILL the leader; the time from the kill to the acknowledgement of the first record
    sent after it (the producer finds the new leader by itself). ``kills`` per mode; a kill
    of a broker leading several modes' partitions counts for each."""
    first = arena.cluster.broker_ids[0]
    topics = {m.name: arena.create("kill", m, leader=first) for m in modes}
    options: dict[str, Any] = {
        "rate_per_s": timing.rate_per_s,
        "window": 20_000,
        "delivery_timeout_ms": 60_000,
    }
    probes = _start_probes(arena, topics, clock, **options)
    first_probes = dict(probes)
    wait_flowing(probes, clock)
    samples: dict[str, list[float]] = {m.name: [] for m in modes}
    kills: list[dict[str, Any]] = []
    killed: dict[str, int] = {m.name: 0 for m in modes}
    """Kills of each mode's leader, measured or not (a stuck producer's kill counts too)."""
    while min(killed.values()) < timing.kills:
        target = min(modes, key=lambda m: killed[m.name])
        victim = arena.wait_led(topics[target.name])
        affected = [m.name for m in modes if arena.leader(topics[m.name]) == victim]
        say(f"kill {len(kills) + 1}: SIGKILL leader {victim} of {', '.join(affected)}")
        for name in affected:
            killed[name] += 1
        at = clock.now()
        arena.cluster.kill_broker(victim)
        deadline = time.monotonic() + STUCK_S
        recovered: dict[str, float] = {}
        while len(recovered) < len(affected) and time.monotonic() < deadline:
            for name in affected:
                ack = probes[name].first_ack_sent_after(at)
                if ack is not None and name not in recovered:
                    recovered[name] = round(ack - at, 3)
            time.sleep(0.02)
        for name, seconds in recovered.items():
            samples[name].append(seconds)
        stuck = [name for name in affected if name not in recovered]
        kill: dict[str, Any] = {
            "t": round(at, 3),
            "victim": victim,
            "recovered_s": recovered,
            "not_recovered": stuck,
        }
        kills.append(kill)
        if stuck:
            # Is the partition writable, or is the long-lived producer stuck? A new probe says.
            say(f"kill {len(kills)}: no ack within {STUCK_S:.0f}s on {', '.join(stuck)}")
            for name in stuck:
                old = probes[name]
                threading.Thread(target=old.stop, daemon=True).start()
                probes[name] = arena.probe(topics[name], clock, **options)
                probes[name].start()
            try:
                wait_flowing({n: probes[n] for n in stuck}, clock, timeout=30)
                kill["new_producer_acked"] = True
            except TimeoutError:
                kill["new_producer_acked"] = False
        arena.restart([victim])
        arena.wait_full_isr(list(topics.values()))
    stop_probes(probes)
    out: dict[str, Any] = {"kills": kills, "modes": {}}
    for mode in modes:
        v = samples[mode.name]
        out["modes"][mode.name] = {
            "topic": topics[mode.name],
            "samples_s": v,
            "not_recovered": sum(1 for k in kills if mode.name in k["not_recovered"]),
            "p50_s": round(statistics.median(v), 3) if v else None,
            "max_s": round(max(v), 3) if v else None,
            "latency_series": latency_series(first_probes[mode.name].sends, 0.5),
        }
    return out


# -- steady state --------------------------------------------------------------------------------


def steady(
    arena: Arena, modes: Sequence[Mode], clock: Clock, timing: Timing, say: Say
) -> dict[str, Any]:
    """Throughput, latency and CPU per record of acks=all produce, the bench's harness
    (`kraft.bench.produce_consume.produce`), one mode after the other; and one-at-a-time
    acks=all latency (window 1)."""
    out: dict[str, Any] = {"records": timing.steady_records, "modes": {}}
    first = arena.cluster.broker_ids[0]
    for mode in modes:
        topic = arena.create("steady", mode, leader=first)
        say(f"{mode.name}: {timing.steady_records:,} records, acks=all")
        cpu: dict[str, Any] = {}
        with nodes_cpu(cpu, arena.broker_pids(), timing.steady_records):
            run = produce_records(arena, topic, timing.steady_records, 20_000, 5)
        say(f"{mode.name}: one record at a time")
        single = produce_records(arena, topic, 300, 1, 0)
        out["modes"][mode.name] = {
            "topic": topic,
            "records_per_s": run["records_per_s"],
            "p50_ms": run["p50_ms"],
            "p99_ms": run["p99_ms"],
            "p999_ms": run["p999_ms"],
            "client_cpu_us_per_record": cpu["client_cpu_us_per_record"],
            "brokers_cpu_us_per_record": cpu["servers_cpu_us_per_record"],
            "client": arena.client,
            "one_at_a_time_p50_ms": single["p50_ms"],
            "one_at_a_time_p99_ms": single["p99_ms"],
        }
    return out


def produce_records(
    arena: Arena, topic: str, records: int, window: int, linger_ms: int
) -> dict[str, Any]:
    """acks=all (idempotent) records of 100 bytes through the arena's client, at most
    ``window`` unacknowledged."""
    if arena.client == "kraft":
        return produce(arena.bootstrap, topic, records, 100, "all", window, linger_ms)
    return librdkafka_produce(arena.bootstrap, topic, records, 100, window, linger_ms, 16384)


def phase_row(name: str, sends: list[Send], a: float, b: float) -> dict[str, Any]:
    """One phase of the failures scenario: what was sent in ``[a, b)``, what was acknowledged,
    and whether the mode was *accepting*: a record sent in the phase's second half was
    acknowledged **within the phase** (one sent late and acknowledged after the replicas came
    back says nothing of the phase: the full run of 2026-11-26 called a quorum with 2 of 3
    replicas down "accepting" on 60 such acknowledgements)."""
    sent = [s for s in sends if a <= s.sent_s < b]
    late = [s for s in sent if s.sent_s >= (a + b) / 2]
    return {
        "phase": name,
        "sent": len(sent),
        "acked": sum(1 for s in sent if s.acked_s is not None),
        "failed": sum(1 for s in sent if s.error),
        "errors": sorted({s.error for s in sent if s.error}),
        "accepting": any(s.acked_s is not None and s.acked_s < b for s in late),
        "unavailable_s": unavailable_s(sends, a, b),
        "seconds": round(b - a, 3),
    }


__all__ = [
    "FULL",
    "QUICK",
    "Timing",
    "failures",
    "isr_events",
    "leader_kill",
    "phase_row",
    "probed_follower",
    "produce_records",
    "slow_follower",
    "steady",
    "stop_probes",
    "wait_flowing",
    "window_percentiles",
]
