"""One seed of the Raft simulation, a range of seeds, and the ``kraft sim raft`` command.

A run: a quorum of ``voters`` (+ ``observers``) starts empty; a workload proposes values to
the leader; from ``FAULTS_START_MS`` to ``faults_end_ms`` the nemesis injects faults; then
everything heals and the run must show liveness: within ``LIVENESS_BOUND_MS`` of simulated
time a leader exists, a value proposed after the heal commits, and every node (observers
too) applies it. Safety invariants are checked after every event (`RaftChecker`). A failure
names the invariant and the one command that replays it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kraft.arguments import ArgumentParser, non_negative_int, positive_int
from kraft.raft import RaftConfig, UnsafeOptions
from kraft.sim.checker import InvariantViolated
from kraft.sim.cluster import DiskProfile, SimCluster
from kraft.sim.faults import Nemesis, Workload
from kraft.sim.membership import MembershipChanger
from kraft.sim.network import LinkProfile
from kraft.sim.seeds import (
    add_seed_arguments,
    report_seed,
    report_summary,
    run_guarded,
    run_seed_jobs,
)

FAULTS_START_MS = 300
FAULTS_END_MS = 4000
LIVENESS_BOUND_MS = 4000
"""After the final heal, a new proposal commits on every node within this much sim time."""
SETTLE_STEP_MS = 100


def replay_command(seed: int, voters: int, observers: int, membership: bool = False) -> str:
    extra = " --membership" if membership else ""
    return f"kraft sim raft --seed {seed:#x} --voters {voters} --observers {observers}{extra}"


@dataclass(slots=True, kw_only=True)
class SeedResult:
    seed: int
    voters: int
    observers: int
    events: int = 0
    sim_time_ms: int = 0
    faults: int = 0
    proposals: int = 0
    commits: int = 0
    elections: int = 0
    recovery_ms: int | None = None
    violation: str | None = None
    membership: bool = False
    voter_changes: int = 0
    """KIP-853: VotersRecords the leaders appended (``--membership`` runs)."""

    @property
    def replay(self) -> str:
        return replay_command(self.seed, self.voters, self.observers, self.membership)

    def line(self) -> str:
        return (
            f"seed={self.seed:#x} voters={self.voters} observers={self.observers} "
            f"faults={self.faults} commits={self.commits} elections={self.elections} "
            f"voter_changes={self.voter_changes} "
            f"events={self.events} sim_time_ms={self.sim_time_ms} "
            f"recovery_ms={self.recovery_ms} violation={self.violation or 'none'}"
        )


@dataclass(slots=True, kw_only=True)
class Summary:
    seeds_run: int = 0
    faults: int = 0
    commits: int = 0
    events: int = 0
    elections: int = 0
    voter_changes: int = 0
    violations: list[SeedResult] = field(default_factory=list)
    wall_s: float = 0.0

    def line(self) -> str:
        return (
            f"seeds={self.seeds_run} faults={self.faults} commits={self.commits} "
            f"elections={self.elections} voter_changes={self.voter_changes} "
            f"events={self.events} violations={len(self.violations)} wall={self.wall_s:.1f}s"
        )


def run_seed(
    seed: int,
    *,
    voters: int = 3,
    observers: int = 1,
    faults_end_ms: int = FAULTS_END_MS,
    unsafe: UnsafeOptions | None = None,
    disk: DiskProfile | None = None,
    log_level: int = logging.CRITICAL,
    membership: bool = False,
) -> SeedResult:
    """Run one seed; never raises for a violation (it is in ``SeedResult.violation``).

    ``membership``: KIP-853: the voter set lives in the log, and a `MembershipChanger` adds
    and removes voters (among all ``voters + observers`` nodes) while the nemesis runs.
    """
    rng = random.Random(seed ^ 0x5EED)
    link = LinkProfile(
        delay_min_ms=1,
        delay_max_ms=rng.choice((2, 5, 10)),
        loss=rng.choice((0.0, 0.0, 0.01, 0.05)),
        duplicate=rng.choice((0.0, 0.01, 0.05)),
    )
    cluster = SimCluster(
        seed=seed,
        voters=voters,
        observers=observers,
        link=link,
        snapshot_every_records=rng.choice((50, 200, 1 << 30)),
        unsafe=unsafe,
        disk=disk,
        log_level=log_level,
        dynamic_voters=membership,
    )
    workload = Workload(cluster, random.Random(rng.getrandbits(64)), interval_ms=(5, 40))
    nemesis = Nemesis(
        cluster, random.Random(rng.getrandbits(64)), start_ms=FAULTS_START_MS, end_ms=faults_end_ms
    )
    result = SeedResult(seed=seed, voters=voters, observers=observers, membership=membership)
    deadline = faults_end_ms + LIVENESS_BOUND_MS
    workload.start(50, deadline)
    nemesis.start()
    changer: MembershipChanger | None = None
    if membership:
        changer = MembershipChanger(
            cluster,
            random.Random(rng.getrandbits(64)),
            start_ms=FAULTS_START_MS // 2,
            end_ms=faults_end_ms,
            max_voters=min(5, voters + observers),
        )
        changer.start()

    def run() -> None:
        cluster.scheduler.run_until(faults_end_ms)
        # Liveness: after the heal, a fresh proposal commits and reaches every node.
        while cluster.clock.now_ms < deadline:
            cluster.scheduler.run_until(cluster.clock.now_ms + SETTLE_STEP_MS)
            value = workload.first_commit_proposed_after(faults_end_ms)
            if value is not None and all(
                n.app.applied > workload.offsets[value] for n in cluster.nodes.values()
            ):
                result.recovery_ms = workload.committed[value] - faults_end_ms
                return
        raise InvariantViolated(
            "liveness",
            f"no proposal made after the heal at {faults_end_ms} ms was applied by every "
            f"node within {LIVENESS_BOUND_MS} ms",
        )

    result.violation = run_guarded(run, cluster.clock)
    result.events = cluster.scheduler.events_run
    result.sim_time_ms = cluster.clock.now_ms
    result.faults = nemesis.total
    result.proposals = len(workload.proposed)
    result.commits = len(workload.committed)
    result.elections = len(cluster.checker.leaders_by_epoch)
    result.voter_changes = changer.stats.appended if changer is not None else 0
    return result


def failover_ms(seed: int, *, voters: int = 3, config: RaftConfig | None = None) -> int:
    """Simulated time from killing a healthy leader to a new leader committing an entry,
    on a loopback-like network (1-2 ms per message, 0-1 ms fsync)."""
    cluster = SimCluster(
        seed=seed,
        voters=voters,
        observers=0,
        config=config,
        link=LinkProfile(delay_min_ms=1, delay_max_ms=2),
        disk=DiskProfile(sync_latency_max_ms=1),
        snapshot_every_records=1 << 30,
    )
    cluster.scheduler.run_until(1000)
    old = cluster.leader()
    assert old is not None and old.node is not None, "no leader in a healthy cluster"
    epoch = old.node.epoch
    cluster.crash(old)
    killed_at = cluster.clock.now_ms
    while cluster.clock.now_ms < killed_at + 10_000:
        cluster.scheduler.run_until(cluster.clock.now_ms + 1)
        new = cluster.leader()
        if (
            new is not None
            and new.node is not None
            and new.node.epoch > epoch
            and new.node.high_watermark > new.node.raft_log.epoch_start_offsets()[-1][1]
        ):
            return cluster.clock.now_ms - killed_at
    raise AssertionError(f"seed {seed}: no new leader within 10 s")


def _run_one(args: tuple[int, int, int, bool]) -> SeedResult:
    seed, voters, observers, membership = args
    return run_seed(seed, voters=voters, observers=observers, membership=membership)


def run_seeds(
    start: int,
    count: int,
    *,
    voters: int | None = None,
    observers: int = 1,
    processes: int = 1,
    stop_on_violation: bool = True,
    membership: bool = False,
) -> Summary:
    """Run ``count`` seeds from ``start``; ``voters=None`` alternates 3 and 5 by seed (with
    ``membership``, 1 and 3: the changer grows and shrinks the set among all the nodes)."""
    t0 = time.perf_counter()
    sizes = (1, 3) if membership else (3, 5)
    jobs = [
        (s, voters if voters is not None else sizes[s % 2], observers, membership)
        for s in range(start, start + count)
    ]
    summary = Summary()

    def take(r: SeedResult) -> None:
        summary.seeds_run += 1
        summary.faults += r.faults
        summary.commits += r.commits
        summary.events += r.events
        summary.elections += r.elections
        summary.voter_changes += r.voter_changes
        if r.violation is not None:
            summary.violations.append(r)

    run_seed_jobs(
        jobs,
        _run_one,
        take,
        processes=processes,
        chunksize=8,
        stop_on_violation=stop_on_violation,
    )
    summary.wall_s = time.perf_counter() - t0
    return summary


def cli_raft(argv: Sequence[str] | None = None) -> int:
    """``kraft sim raft [--seeds N [--start S] | --seed X] [--voters V] [--observers O]``.

    Prints a one-line summary; on a violation prints it with the replay command and
    returns 1.
    """
    p = ArgumentParser(prog="kraft sim raft")
    add_seed_arguments(p)
    p.add_argument("--voters", type=positive_int, default=None)
    p.add_argument("--observers", type=non_negative_int, default=1)
    p.add_argument("--verbose", action="store_true", help="print the nodes' log events")
    p.add_argument(
        "--membership",
        action="store_true",
        help="KIP-853: add and remove voters (among voters + observers) during the faults",
    )
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.seed is not None:
        voters = args.voters if args.voters is not None else 3
        level = logging.INFO if args.verbose else logging.CRITICAL
        r = run_seed(
            args.seed,
            voters=voters,
            observers=args.observers,
            log_level=level,
            membership=args.membership,
        )
        return report_seed(r)
    summary = run_seeds(
        args.start,
        args.seeds if args.seeds is not None else 100,
        voters=args.voters,
        observers=args.observers,
        processes=args.processes,
        membership=args.membership,
    )
    return report_summary(summary)


__all__ = [
    "SeedResult",
    "Summary",
    "cli_raft",
    "failover_ms",
    "replay_command",
    "run_seed",
    "run_seeds",
]
