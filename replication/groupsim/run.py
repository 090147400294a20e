"""One seed of the consumer-group simulation, a range of seeds, and ``kraft sim group``.

A run: one group of 3 to 5 member slots consumes topic ``orders`` (and ``events``, which is
created during the run; ``orders`` also grows) against one coordinator whose records go
through a simulated offsets partition. From ``FAULTS_START_MS`` to ``FAULTS_END_MS`` the
nemesis crashes, pauses, isolates and gracefully stops members (a slot restarts as a new
member), crashes the coordinator's broker (the new leader loses part of the uncommitted tail
and reloads) and compacts the offsets partition; an admin resets offsets when the group is
empty. Then everything heals, every slot runs a member, producing stops, and the run must
drain: within ``LIVENESS_BOUND_MS`` the committed offsets reach every partition's end.
`GroupChecker` checks the invariants all along; a failing seed replays exactly with
``kraft sim group --seed X``.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kraft.arguments import ArgumentParser
from kraft.sim.checker import InvariantViolated
from kraft.sim.scheduler import Scheduler, SimClock
from kraft.sim.seeds import (
    add_seed_arguments,
    report_seed,
    report_summary,
    run_guarded,
    run_seed_jobs,
)
from replication.group import GroupConfig, OffsetCommitPartition, OffsetCommitRequest

from .checker import GroupChecker
from .data import DataTopics
from .host import CoordinatorHost, Link
from .member import SimMember

GROUP = "sim-group"
FAULTS_START_MS = 500
FAULTS_END_MS = 8_000
PRODUCE_END_MS = FAULTS_END_MS + 500
LIVENESS_BOUND_MS = 8_000
"""After the heal, the group drains within this much simulated time: a member crashed just
before the heal holds its partitions for a session timeout (600 ms), then the group
rebalances (a few heartbeat intervals) and the new owners catch up."""
SESSION_TIMEOUT_MS = 600
HEARTBEAT_INTERVAL_MS = 100


def replay_command(seed: int) -> str:
    return f"kraft sim group --seed {seed:#x}"


@dataclass(slots=True, kw_only=True)
class GroupSeedResult:
    seed: int
    slots: int = 0
    faults: int = 0
    coordinator_crashes: int = 0
    lost_tail_records: int = 0
    compactions: int = 0
    incarnations: int = 0
    fenced: int = 0
    processed: int = 0
    produced: int = 0
    commits: int = 0
    resets: int = 0
    events: int = 0
    sim_time_ms: int = 0
    drain_ms: int | None = None
    violation: str | None = None

    @property
    def replay(self) -> str:
        return replay_command(self.seed)

    def line(self) -> str:
        return (
            f"seed={self.seed:#x} slots={self.slots} faults={self.faults} "
            f"coordinator_crashes={self.coordinator_crashes} lost_tail={self.lost_tail_records} "
            f"compactions={self.compactions} members={self.incarnations} fenced={self.fenced} "
            f"produced={self.produced} processed={self.processed} commits={self.commits} "
            f"resets={self.resets} events={self.events} sim_time_ms={self.sim_time_ms} "
            f"drain_ms={self.drain_ms} violation={self.violation or 'none'}"
        )


@dataclass(slots=True, kw_only=True)
class GroupSummary:
    seeds_run: int = 0
    faults: int = 0
    coordinator_crashes: int = 0
    processed: int = 0
    max_drain_ms: int = 0
    violations: list[GroupSeedResult] = field(default_factory=list)
    wall_s: float = 0.0

    def line(self) -> str:
        return (
            f"seeds={self.seeds_run} faults={self.faults} "
            f"coordinator_crashes={self.coordinator_crashes} processed={self.processed} "
            f"max_drain_ms={self.max_drain_ms} violations={len(self.violations)} "
            f"wall={self.wall_s:.1f}s"
        )


class _Run:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed ^ 0x6C0)
        rng = self.rng
        self.clock = SimClock()
        self.scheduler = Scheduler(self.clock)
        self.data = DataTopics()
        self.data.create("orders", rng.randint(2, 6))
        self.checker = GroupChecker(GROUP, self.data)
        self.checker.bind_clock(lambda: self.clock.now_ms)
        assignors = ("uniform", "range") if rng.random() < 0.5 else ("range", "uniform")
        self.config = GroupConfig(
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            assignors=assignors,
            offsets_retention_ms=rng.choice((2_000, 7 * 24 * 3600 * 1000)),
            offsets_retention_check_interval_ms=500,
        )
        self.host = CoordinatorHost(
            self.scheduler,
            random.Random(rng.getrandbits(64)),
            self.config,
            lambda: self.data.topics,
            self.checker,
        )
        self.loss = rng.choice((0.0, 0.0, 0.01, 0.05))
        self.delay_max_ms = rng.choice((2, 5, 15))
        self.slots: list[SimMember | None] = [None] * rng.randint(3, 5)
        self.incarnations = 0
        self.faults = 0
        self.all_members: list[SimMember] = []

    def start_member(self, slot: int) -> None:
        self.incarnations += 1
        rng = self.rng
        member = SimMember(
            member_id=f"slot{slot}-{self.incarnations}",
            group_id=GROUP,
            scheduler=self.scheduler,
            rng=random.Random(rng.getrandbits(64)),
            host=self.host,
            link=Link(
                self.scheduler, random.Random(rng.getrandbits(64)), self.delay_max_ms, self.loss
            ),
            data=self.data,
            checker=self.checker,
            subscription=("events", "orders"),
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            assignor=rng.choice((None, None, "uniform", "range")),
        )
        self.slots[slot] = member
        self.all_members.append(member)
        self.checker.members.append(member)
        member.start()

    def produce(self) -> None:
        if self.clock.now_ms >= PRODUCE_END_MS:
            return
        self.scheduler.after(self.rng.randint(5, 30), self.produce)
        tps = self.data.partitions()
        self.data.produce(self.rng.choice(tps), self.rng.randint(1, 3))

    def topic_changes(self) -> None:
        rng = self.rng

        def create_events() -> None:
            self.data.create("events", rng.randint(1, 3))
            self.host.topics_changed()

        def grow_orders() -> None:
            self.data.grow("orders", self.data.topics["orders"].partitions + rng.randint(1, 2))
            self.host.topics_changed()

        self.scheduler.at(rng.randint(1_000, 6_000), create_events)
        self.scheduler.at(rng.randint(1_000, 7_000), grow_orders)

    def nemesis(self) -> None:
        now = self.clock.now_ms
        if now >= FAULTS_END_MS:
            return
        rng = self.rng
        self.scheduler.after(rng.randint(150, 600), self.nemesis)
        self.faults += 1
        slot = rng.randrange(len(self.slots))
        member = self.slots[slot]
        kind = rng.choice(
            ("crash", "pause", "isolate", "leave", "coordinator", "coordinator", "compact", "drain")
        )
        if kind == "crash" and member is not None and member.alive:
            member.crash()
            self.slots[slot] = None
            self.scheduler.after(rng.randint(50, 1_500), lambda: self._restart(slot))
        elif kind == "leave" and member is not None and member.alive:
            member.leave()
            self.slots[slot] = None
            self.scheduler.after(rng.randint(50, 1_500), lambda: self._restart(slot))
        elif kind == "pause" and member is not None:
            member.pause(rng.choice((50, 300, SESSION_TIMEOUT_MS + 200, 1_500)))
        elif kind == "isolate" and member is not None:
            member.link.cut_until_ms = now + rng.choice((100, 400, 1_200))
        elif kind == "coordinator":
            self.host.crash(rng.randint(20, 400))
        elif kind == "compact":
            self.host.compact()
        elif kind == "drain":  # every member leaves; an admin resets; they come back
            for i, m in enumerate(self.slots):
                if m is not None and m.alive:
                    m.leave()
                    self.slots[i] = None
            self.scheduler.after(rng.randint(100, 400), self._admin_reset)
            for i in range(len(self.slots)):
                self.scheduler.after(rng.randint(500, 1_500), functools.partial(self._restart, i))

    def _restart(self, slot: int) -> None:
        if self.slots[slot] is None:
            self.start_member(slot)

    def _admin_reset(self) -> None:
        """``kraft groups reset-offsets --to-offset N --execute`` on one partition (back or
        forward): the coordinator accepts it only while the group has no members."""
        coord = self.host.coord
        if coord is None or self.host.loading:
            return
        p = self.rng.randrange(self.data.topics["orders"].partitions)
        offset = self.rng.randint(0, self.data.end((self.data.id_of("orders"), p)))
        req = OffsetCommitRequest(
            group_id=GROUP,
            partitions=(OffsetCommitPartition(topic="orders", partition=p, offset=offset),),
        )
        self.host.receive(req, lambda _: None)

    def heal(self) -> None:
        for m in self.all_members:
            m.link.cut_until_ms = -1
            m.paused_until = -1
        for slot, member in enumerate(self.slots):
            if member is None:
                self.start_member(slot)


def run_seed(seed: int) -> GroupSeedResult:
    """Run one seed; never raises for a violation (it is in ``violation``)."""
    r = _Run(seed)
    result = GroupSeedResult(seed=seed, slots=len(r.slots))
    for slot in range(len(r.slots)):
        r.scheduler.at(r.rng.randint(0, 300), functools.partial(r.start_member, slot))
    r.scheduler.at(10, r.produce)
    r.topic_changes()
    r.scheduler.at(FAULTS_START_MS, r.nemesis)
    deadline = PRODUCE_END_MS + LIVENESS_BOUND_MS

    def drained() -> bool:
        ends = {(r.data.name_of(t), p): r.data.end((t, p)) for t, p in r.data.partitions()}
        return r.clock.now_ms >= PRODUCE_END_MS and all(
            r.checker.committed.get(key, 0) >= end for key, end in ends.items()
        )

    def body() -> None:
        r.scheduler.run_until(FAULTS_END_MS)
        r.heal()
        while not drained():
            if r.clock.now_ms >= deadline:
                raise InvariantViolated(
                    "liveness",
                    f"committed offsets did not reach the log end within {LIVENESS_BOUND_MS} ms "
                    f"after producing stopped",
                )
            r.scheduler.run_until(r.clock.now_ms + 50)
        result.drain_ms = r.clock.now_ms - PRODUCE_END_MS
        r.checker.check_drained()

    result.violation = run_guarded(body, r.clock)
    result.faults = r.faults
    result.coordinator_crashes = r.host.crashes
    result.lost_tail_records = r.host.lost_tail_records
    result.compactions = r.host.compactions
    result.incarnations = r.incarnations
    result.fenced = sum(m.fenced for m in r.all_members)
    result.processed = sum(m.processed for m in r.all_members)
    result.produced = sum(r.data.end(tp) for tp in r.data.partitions())
    result.commits = r.checker.commits_accepted
    result.resets = r.checker.resets
    result.events = r.scheduler.events_run
    result.sim_time_ms = r.clock.now_ms
    return result


def run_seeds(
    start: int, count: int, *, processes: int = 1, stop_on_violation: bool = True
) -> GroupSummary:
    t0 = time.perf_counter()
    summary = GroupSummary()

    def take(res: GroupSeedResult) -> None:
        summary.seeds_run += 1
        summary.faults += res.faults
        summary.coordinator_crashes += res.coordinator_crashes
        summary.processed += res.processed
        if res.drain_ms is not None:
            summary.max_drain_ms = max(summary.max_drain_ms, res.drain_ms)
        if res.violation is not None:
            summary.violations.append(res)

    run_seed_jobs(
        list(range(start, start + count)),
        run_seed,
        take,
        processes=processes,
        chunksize=4,
        stop_on_violation=stop_on_violation,
    )
    summary.wall_s = time.perf_counter() - t0
    return summary


def cli_group(argv: Sequence[str] | None = None) -> int:
    """``kraft sim group [--seeds N [--start S] | --seed X] [--processes P]``."""
    p = ArgumentParser(prog="kraft sim group")
    add_seed_arguments(p)
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.seed is not None:
        return report_seed(run_seed(args.seed))
    summary = run_seeds(
        args.start, args.seeds if args.seeds is not None else 100, processes=args.processes
    )
    return report_summary(summary)
