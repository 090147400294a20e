"""The simulators' power figure: how many seeds each deliberately unsafe switch survives.

A simulator earns trust by finding known bugs fast. Each switch below turns one known bug on
(a Raft leader that commits alone, a shell that skips fsync or never syncs its vote, Kafka's
pre-KIP-101 truncation to the high watermark, a controller that answers from its uncommitted
image, quorum partitions that acknowledge before the fsync); ``kraft sim power`` runs the same
seeds with each one and reports, per switch, the first seed that fails (its seeds-to-failure),
how many of the seeds fail, and the mean seeds per failure. It exits non-zero if a switch
survives every seed (the default: 10 seeds, the issue's bar).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Final

from kraft.arguments import ArgumentParser, positive_int, seed_int

SWITCHES: Final = (
    "raft:commit-without-majority",
    "raft:skip-fsync",
    "raft:volatile-vote",
    "cluster:hw-truncation",
    "cluster:answer-uncommitted-reads",
    "cluster:quorum-write-caching",
)


def run_switch_seed(job: tuple[str, int, str]) -> str | None:
    """One seed with one switch on, under the cluster nemesis ``schedule``: the violation, or
    None (module-level: it is pickled)."""
    switch, seed, schedule = job
    if switch.startswith("cluster:"):
        return _RUNNERS[switch](seed, schedule)
    return _RUNNERS[switch](seed)


def _raft(seed: int, **kw: object) -> str | None:
    from kraft.sim import run_seed

    voters = 3 if seed % 2 == 0 else 5
    return run_seed(seed, voters=voters, **kw).violation  # type: ignore[arg-type]


def _raft_commit_without_majority(seed: int) -> str | None:
    from kraft.raft import UnsafeOptions

    return _raft(seed, unsafe=UnsafeOptions(commit_without_majority=True))


def _raft_skip_fsync(seed: int) -> str | None:
    from kraft.sim.cluster import DiskProfile

    return _raft(seed, disk=DiskProfile(unsafe_skip_sync=True))


def _raft_volatile_vote(seed: int) -> str | None:
    from kraft.sim.cluster import DiskProfile

    return _raft(seed, disk=DiskProfile(unsafe_volatile_hard_state=True))


def _cluster_hw_truncation(seed: int, schedule: str = "mixed") -> str | None:
    from replication.sim.run import run_seed

    return run_seed(seed, hw_truncation=True, schedule=schedule).violation


def _cluster_answer_uncommitted_reads(seed: int, schedule: str = "mixed") -> str | None:
    from replication.sim.run import run_seed

    return run_seed(seed, unsafe_answer_uncommitted_reads=True, schedule=schedule).violation


def _cluster_quorum_write_caching(seed: int, schedule: str = "mixed") -> str | None:
    from replication.sim.run import run_seed

    return run_seed(seed, mode="quorum", quorum_write_caching=True, schedule=schedule).violation


_RUNNERS: Final[dict[str, Callable[..., str | None]]] = {
    "raft:commit-without-majority": _raft_commit_without_majority,
    "raft:skip-fsync": _raft_skip_fsync,
    "raft:volatile-vote": _raft_volatile_vote,
    "cluster:hw-truncation": _cluster_hw_truncation,
    "cluster:answer-uncommitted-reads": _cluster_answer_uncommitted_reads,
    "cluster:quorum-write-caching": _cluster_quorum_write_caching,
}

REPLAY: Final = {
    "raft:commit-without-majority": "",
    "raft:skip-fsync": "",
    "raft:volatile-vote": "",
    "cluster:hw-truncation": "kraft sim cluster --seed {seed:#x} --unsafe-hw-truncation",
    "cluster:answer-uncommitted-reads": (
        "kraft sim cluster --seed {seed:#x} --unsafe-answer-uncommitted-reads"
    ),
    "cluster:quorum-write-caching": (
        "kraft sim cluster --seed {seed:#x} --mode quorum --quorum-write-caching"
    ),
}
"""How to replay a failing seed from the command line (the Raft switches have no flag: they
are `UnsafeOptions` and `DiskProfile` fields for tests)."""


@dataclass(slots=True, kw_only=True)
class SwitchPower:
    switch: str
    seeds: int = 0
    failures: list[tuple[int, str]] = field(default_factory=list)

    start: int = 0

    @property
    def first_failure(self) -> int | None:
        return self.failures[0][0] if self.failures else None

    @property
    def longest_clean_run(self) -> int:
        """The most seeds in a row that passed: the worst seeds-to-failure of the range."""
        edges = [self.start - 1, *(seed for seed, _ in self.failures), self.start + self.seeds]
        return max(b - a - 1 for a, b in itertools.pairwise(edges))

    def line(self, start: int) -> str:
        first = self.first_failure
        to_failure = "never" if first is None else str(first - start + 1)
        mean = f"{self.seeds / len(self.failures):.1f}" if self.failures else "inf"
        invariants = sorted({v.split(":", 1)[0] for _, v in self.failures})
        return (
            f"{self.switch:34} seeds_to_failure={to_failure:>5} "
            f"caught={len(self.failures)}/{self.seeds} mean_seeds_per_failure={mean:>5} "
            f"longest_clean_run={self.longest_clean_run:>3} "
            f"invariants={','.join(invariants) or '-'}"
        )


def measure_power(
    switches: Sequence[str],
    start: int,
    seeds: int,
    *,
    processes: int = 1,
    schedule: str = "mixed",
) -> list[SwitchPower]:
    """Run seeds ``start .. start + seeds - 1`` with each switch (every seed, not only to the
    first failure, so the caught fraction is measured too); ``schedule`` is the cluster
    nemesis's (``mixed``, ``random``, ``targeted``)."""
    jobs = [(switch, seed, schedule) for switch in switches for seed in range(start, start + seeds)]
    if processes > 1:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(processes, mp_context=context) as pool:
            outcomes = list(pool.map(run_switch_seed, jobs, chunksize=2))
    else:
        outcomes = [run_switch_seed(job) for job in jobs]
    powers = {switch: SwitchPower(switch=switch, start=start) for switch in switches}
    for (switch, seed, _), violation in zip(jobs, outcomes, strict=True):
        power = powers[switch]
        power.seeds += 1
        if violation is not None:
            power.failures.append((seed, violation))
    return [powers[s] for s in switches]


def cli_power(argv: Sequence[str] | None = None) -> int:
    """``kraft sim power [--seeds N] [--start S] [--switch NAME ...] [--schedule S]
    [--processes P]``: one line per switch; exit 1 if a switch survived every seed."""
    p = ArgumentParser(prog="kraft sim power")
    p.add_argument("--seeds", type=positive_int, default=10, help="seeds per switch")
    p.add_argument("--start", type=seed_int, default=0, help="first seed")
    p.add_argument("--processes", type=positive_int, default=1, help="worker processes")
    p.add_argument(
        "--switch", action="append", choices=SWITCHES, help="only this switch (repeatable)"
    )
    p.add_argument(
        "--schedule",
        choices=("mixed", "random", "targeted"),
        default="mixed",
        help="the cluster nemesis (random alone shows what the targeted faults add)",
    )
    args = p.parse_args(list(argv) if argv is not None else None)
    switches = tuple(args.switch) if args.switch else SWITCHES
    t0 = time.perf_counter()
    powers = measure_power(
        switches, args.start, args.seeds, processes=args.processes, schedule=args.schedule
    )
    missed = []
    for power in powers:
        print(power.line(args.start))
        if power.first_failure is None:
            missed.append(power.switch)
        elif REPLAY[power.switch]:
            replay = REPLAY[power.switch].format(seed=power.first_failure)
            if args.schedule != "mixed":
                replay += f" --schedule {args.schedule}"
            print("    replay: " + replay)
    print(f"wall={time.perf_counter() - t0:.1f}s")
    if missed:
        print(f"not caught in {args.seeds} seeds: {', '.join(missed)}")
        return 1
    return 0


__all__ = ["SWITCHES", "SwitchPower", "cli_power", "measure_power", "run_switch_seed"]
