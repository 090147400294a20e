"""The acknowledged-data-lost scenarios of ``kraft compare``.

- **acks=1 with a leader kill** (real processes): an acks=1 and an acks=all probe per mode,
  SIGKILL of the leader, restart, a final read checked against every acknowledgement.
- **unclean leader election with a stale replica** (real processes): with
  ``min.insync.replicas=1``, kill every follower (the ISR shrinks to the leader, which keeps
  acknowledging), kill the leader, bring the stale followers back: with
  ``unclean.leader.election.enable=true`` one of them leads and what only the old leader had is
  gone once it rejoins; with ``false`` the partition waits for the old leader.
- **last replica standing, power loss** (the deterministic simulator, `replication.sim`): a
  killed process keeps its page cache, so a real SIGKILL cannot cut an unflushed tail. The
  simulator's power-loss fault can: its broker logs lose what was not flushed. Followers crash,
  the leader alone in the ISR acknowledges (``min.insync.replicas=1``), then loses power,
  restarts as the only ISR member and leads again without its tail.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Sequence
from typing import Any

from kraft.compare.checker import check_acknowledged
from kraft.compare.modes import Arena, Mode
from kraft.compare.scenarios import Say, Timing
from kraft.compare.workload import Clock, ProbeProducer, TopicWatcher, unavailable_s


def _check(arena: Arena, probe: ProbeProducer) -> dict[str, Any]:
    read = arena.read_back(probe.topic)
    return check_acknowledged(probe.acknowledged_values(), read).as_dict()


def real_process_losses(
    arena: Arena, modes: Sequence[Mode], clock: Clock, timing: Timing, say: Say
) -> dict[str, Any]:
    """The two cases on real processes, one after the other, on ``arena`` (kraft's cluster or
    Apache Kafka's): `acks1_leader_kill` and `unclean_election`."""
    return {
        "acks1_leader_kill": acks1_leader_kill(arena, modes, clock, timing, say),
        "unclean_election": unclean_election(arena, modes, clock, timing, say),
    }


SAME_LEADER_ATTEMPTS = 3
"""Tries at a pair of quorum topics that elected the same leader (`_one_leader_topics`)."""


def _one_leader_topics(
    arena: Arena, modes: Sequence[Mode]
) -> tuple[int, dict[str, dict[str, str]]] | None:
    """Every mode's acks=1 and acks=all topics led by one broker, so one kill serves all modes:
    the quorum topics first (their groups elect their own leader: a pair that elected two is
    made again, up to `SAME_LEADER_ATTEMPTS` times), then the ISR topics placed on that leader.
    None if no quorum pair agreed (the caller kills once per mode)."""
    leader = arena.cluster.broker_ids[0]
    topics: dict[str, dict[str, str]] = {}
    for mode in (m for m in modes if m.quorum):
        for _ in range(SAME_LEADER_ATTEMPTS):
            pair = {acks: arena.create(f"acks{acks}", mode) for acks in ("1", "all")}
            leaders = {arena.wait_led(t) for t in pair.values()}
            if len(leaders) == 1:
                leader = leaders.pop()
                topics[mode.name] = pair
                break
        else:
            return None
    for mode in (m for m in modes if not m.quorum):
        topics[mode.name] = {
            acks: arena.create(f"acks{acks}", mode, leader=leader) for acks in ("1", "all")
        }
    return leader, {m.name: topics[m.name] for m in modes}


def acks1_leader_kill(
    arena: Arena, modes: Sequence[Mode], clock: Clock, timing: Timing, say: Say
) -> dict[str, Any]:
    """Per mode, acks=1 and acks=all probes on two topics led by one broker; SIGKILL it. When
    every mode's topics share that broker, one kill serves them all (it takes a quarter of a
    ``--quick`` run otherwise)."""
    first = arena.cluster.broker_ids[0]
    shared = _one_leader_topics(arena, modes)
    if shared is not None:
        topics = shared[1]
    else:
        topics = {
            m.name: {acks: arena.create(f"acks{acks}", m, leader=first) for acks in ("1", "all")}
            for m in modes
        }
    probes: dict[str, dict[str, ProbeProducer]] = {
        mode: {
            acks: arena.probe(topic, clock, acks=acks, rate_per_s=1000, window=20_000)
            for acks, topic in pair.items()
        }
        for mode, pair in topics.items()
    }
    every_topic = [p.topic for g in probes.values() for p in g.values()]
    for group in probes.values():
        for p in group.values():
            p.start()
    time.sleep(timing.warmup_s)
    kills: list[dict[str, Any]] = []
    rounds = [[m.name for m in modes]] if shared is not None else [[m.name] for m in modes]
    for names in rounds:
        led = [probes[n]["1"].topic for n in names]
        victim = arena.wait_led(led[0])
        say(f"{', '.join(names)}: SIGKILL leader {victim} under acks=1 and acks=all load")
        at = round(clock.now(), 3)
        kills += [{"mode": n, "victim": victim, "t": at} for n in names]
        arena.cluster.kill_broker(victim)
        for topic in led:
            arena.wait_led(topic, not_on=victim)
        time.sleep(1.0)
        arena.restart([victim])
        arena.wait_full_isr(every_topic)
    time.sleep(1.0)
    for group in probes.values():
        for p in group.values():
            p.stop()
    say("reading back every topic")
    out: dict[str, Any] = {"kills": kills, "modes": {}}
    for mode in modes:
        out["modes"][mode.name] = {
            f"acks={acks}": {"topic": p.topic, **_check(arena, p)}
            for acks, p in probes[mode.name].items()
        }
    return out


def unclean_election(
    arena: Arena, modes: Sequence[Mode], clock: Clock, timing: Timing, say: Say
) -> dict[str, Any]:
    """The stale-replica sequence on ISR topics with unclean election on and off (and on the
    quorum topic, when the mode runs), all led by one broker ``A`` at the start."""
    brokers = arena.cluster.broker_ids
    a, stale = brokers[0], brokers[1:]
    topics: dict[str, str] = {}
    for mode in modes:
        if mode.quorum:
            topics[mode.name] = arena.create("stale", mode, leader=a)
            continue
        for unclean in ("true", "false"):
            extra = {"min.insync.replicas": "1", "unclean.leader.election.enable": unclean}
            topics[f"{mode.name}, unclean={unclean}"] = arena.create(
                f"stale-u{unclean[0]}", mode, extra, leader=a
            )
    isr_topics = [t for k, t in topics.items() if ", unclean=" in k]
    probes = {
        k: arena.probe(
            t, clock, rate_per_s=100, delivery_timeout_ms=3_000, request_timeout_ms=1_500
        )
        for k, t in topics.items()
    }
    for p in probes.values():
        p.start()
    steps: list[dict[str, Any]] = []

    def step(name: str) -> None:
        steps.append({"name": name, "t": round(clock.now(), 3)})
        say(name)

    with TopicWatcher(arena.describe, list(topics.values()), clock) as watcher:
        time.sleep(timing.warmup_s)
        step(f"SIGKILL followers {stale}: the leader {a} stands alone")
        for b in stale:
            arena.cluster.kill_broker(b)
        followers_killed_at = clock.now()
        _wait_isr_alone(arena, isr_topics, a)
        time.sleep(timing.phase_s)  # A alone acknowledges (min.insync.replicas=1)
        alone_at = clock.now()
        step(f"SIGKILL {a}, the last in-sync replica")
        arena.cluster.kill_broker(a)
        time.sleep(1.0)
        step(f"restart the stale replicas {stale}")
        back = clock.now()
        for b in stale:
            arena.start_broker(b)
        fresh: dict[str, str] = {}
        for key, topic in topics.items():
            if "unclean=true" in key:
                with contextlib.suppress(TimeoutError):
                    arena.wait_led(topic, timeout=30, not_on=a)
                    fresh[key] = arena.produce_once(topic)
        time.sleep(timing.phase_s)
        step(f"restart {a}")
        a_back = clock.now()
        arena.restart([a])
        arena.wait_full_isr(list(topics.values()))
        time.sleep(1.0)
        for p in probes.values():
            p.stop()
    say("reading back every topic")
    out: dict[str, Any] = {"steps": steps, "modes": {}}
    for key, p in probes.items():
        back_led = next((c.t for c in watcher.of(p.topic) if c.t >= back and c.leader >= 0), None)
        out["modes"][key] = {
            "topic": p.topic,
            "unavailable_while_stale_only_s": unavailable_s(p.sends, back, a_back),
            "stale_only_s": round(a_back - back, 3),
            "led_again_after_s": round(back_led - back, 3) if back_led is not None else None,
            "errors_while_stale_only": _errors(p, back, a_back),
            "acknowledged_with_followers_down": sum(
                1
                for x in p.sends
                if followers_killed_at <= x.sent_s < alone_at and x.acked_s is not None
            ),
            "acknowledged_in_window": sum(
                1 for x in p.sends if back <= x.sent_s < a_back and x.acked_s is not None
            ),
            "fresh_producer_write": fresh.get(key),
            "leaders": [
                {"t": round(c.t, 3), "leader": c.leader, "isr": list(c.isr)}
                for c in watcher.of(p.topic)
            ],
            **_check(arena, p),
        }
    return out


FLUSH_INTERVAL_MS = 5_000
"""How often the simulated brokers flush (Linux writes dirty pages back every 5 s)."""


def power_loss_sim(
    seed: int = 7,
    *,
    min_insync_replicas: int = 1,
    mode: str = "isr",
    write_caching: bool = False,
    correlated: bool = False,
) -> dict[str, Any]:
    """A power loss in the simulator: acknowledged batches the partition's leader no longer
    has once the cluster is back.

    - last replica standing (``correlated=False``): the followers crash (a process crash: their
      logs survive), the leader goes on alone for 1.5 s, then loses power and restarts as the
      only in-sync replica; the followers come back after it;
    - ``correlated=True``: every broker loses power at the same instant, under load.

    ``mode`` is the simulator's ``isr`` or ``quorum`` (with ``write_caching``:
    ``quorum.write.caching=true``, acknowledging before the fsync)."""
    from replication.core import ACKS_ALL
    from replication.sim import BrokerCluster, ClusterChecker, ClusterConfig, Producer
    from replication.sim.admin import TopicCreator

    config = ClusterConfig(
        partitions=1,
        min_insync_replicas=min_insync_replicas,
        flush_interval_ms=FLUSH_INTERVAL_MS,
        mode=mode,
        quorum_write_caching=write_caching,
    )
    checker = ClusterChecker()
    violations: list[str] = []

    def record(invariant: str, detail: str) -> None:
        violations.append(f"{invariant}: {detail}"[:200])

    checker.fail = record  # type: ignore[method-assign]  # count them all, do not stop at one
    cluster = BrokerCluster(seed=seed, config=config, checker=checker)
    rng = random.Random(seed)
    (tp,) = cluster.topic_partitions()
    producer = Producer(
        cluster,
        random.Random(rng.getrandbits(64)),
        node_id=1000,
        tp=tp,
        acks=ACKS_ALL,
        interval_ms=(5, 15),
    )
    producer.start(100, 11_000)
    TopicCreator(cluster, random.Random(rng.getrandbits(64)), node_id=999).start(50)
    cluster.scheduler.run_until(6_000)  # past the first flush (at 5 s)
    registration = cluster.registration(tp)
    assert registration is not None and registration.leader >= 0
    leader = registration.leader
    followers = [b for b in cluster.brokers if b != leader]
    acked_alone = 0
    if not correlated:
        for b in followers:
            cluster.brokers[b].crash(power_loss=False)
        acked_before_alone = producer.acked
        cluster.scheduler.run_until(7_500)
        acked_alone = producer.acked - acked_before_alone
    acked_before_power_loss = dict(checker.acked.get(tp, {}))  # later acks may reuse offsets
    for b in [leader] if not correlated else list(cluster.brokers):
        cluster.brokers[b].crash(power_loss=True)
    cluster.scheduler.run_until(cluster.clock.now_ms + 200)
    cluster.brokers[leader].start()
    for b in followers:
        cluster.brokers[b].start()
    cluster.scheduler.run_until(12_000)
    registration = cluster.registration(tp)
    assert registration is not None
    replica = cluster.brokers[registration.leader].replicas.get(tp)
    lost = 0
    for base, crc in acked_before_power_loss.items():
        batch = replica.log.batch_at(base) if replica is not None else None
        if batch is None or _crc(batch) != crc:
            lost += 1
    return {
        "seed": seed,
        "min_insync_replicas": min_insync_replicas,
        "mode": mode,
        "write_caching": write_caching,
        "correlated": correlated,
        "flush_interval_ms": config.flush_interval_ms,
        "acked_batches_before_power_loss": len(acked_before_power_loss),
        "acked_while_leader_alone": acked_alone,
        "lost_acked_batches": lost,
        "violations": violations[:5],
        "violation_count": len(violations),
    }


def _crc(batch: bytes) -> int:
    from storage.records import read_header

    return read_header(batch).crc


def _errors(probe: ProbeProducer, start: float, end: float) -> dict[str, int]:
    """How the sends of ``[start, end)`` that were not acknowledged failed, by error."""
    counts: dict[str, int] = {}
    for s in probe.sends:
        if start <= s.sent_s < end and s.error:
            counts[s.error] = counts.get(s.error, 0) + 1
    return counts


def _wait_isr_alone(arena: Arena, topics: list[str], broker: int, timeout: float = 30) -> None:
    """Until the ISR of each topic is ``broker`` alone (the others fenced or shrunk out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if all(tuple(arena.describe(t).isr) == (broker,) for t in topics):
                return
        time.sleep(0.1)


POWER_LOSS_CASES = (
    # name, simulator mode, min.insync.replicas, quorum.write.caching
    ("isr-min1", "isr", 1, False),
    ("isr-min2", "isr", 2, False),
    ("quorum", "quorum", 2, False),
    ("quorum, write caching", "quorum", 2, True),
)


def power_loss(say: Say, seeds: Sequence[int] = (7, 8, 9)) -> dict[str, Any]:
    """`power_loss_sim` over a few seeds: the last replica standing, and a correlated power
    loss of every broker, for ISR (min.insync.replicas 1 and 2) and quorum (with and without
    ``quorum.write.caching``). The simulator is deterministic: a seed's figures are the same
    in every run."""
    out: dict[str, Any] = {
        "where": "simulator (replication.sim): real processes keep the page cache on SIGKILL",
        "modes": {},
    }
    for name, mode, min_isr, caching in POWER_LOSS_CASES:
        entry: dict[str, Any] = {}
        for correlated in (False, True):
            case = "correlated" if correlated else "last replica standing"
            say(f"simulator: {case} power loss, {name}")
            runs = [
                power_loss_sim(
                    s,
                    min_insync_replicas=min_isr,
                    mode=mode,
                    write_caching=caching,
                    correlated=correlated,
                )
                for s in seeds
            ]
            key = "correlated" if correlated else "last_standing"
            entry[key] = {
                "runs": runs,
                "acked_while_leader_alone": sum(r["acked_while_leader_alone"] for r in runs),
                "acked_batches": sum(r["acked_batches_before_power_loss"] for r in runs),
                "lost_acked_batches": sum(r["lost_acked_batches"] for r in runs),
            }
        out["modes"][name] = entry
    return out


__all__ = [
    "acks1_leader_kill",
    "power_loss",
    "power_loss_sim",
    "real_process_losses",
    "unclean_election",
]
