"""What every seed-driven simulator shares: the guarded run, the seed range, the command line.

``kraft sim raft`` (`kraft.sim.raft_sim`) and ``kraft sim cluster`` (`replication.sim.run`)
run one seed the same way: the body runs until it raises `InvariantViolated` or an assertion
fails (`run_guarded` turns either into the violation text); a range of seeds runs one after
another or in a process pool and stops at the first violation (`run_seed_jobs`); the command
line takes ``--seeds N [--start S] | --seed X [--processes P]`` (`add_seed_arguments`) and
prints the one line to replay a failing seed (`report_seed`, `report_summary`).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Protocol, TypeVar

from kraft.arguments import positive_int, seed_int
from kraft.sim.checker import InvariantViolated
from kraft.sim.scheduler import SimClock


class SeedOutcome(Protocol):
    """What the seed loop and the command line read from one seed's result."""

    @property
    def seed(self) -> int: ...

    @property
    def violation(self) -> str | None: ...

    @property
    def replay(self) -> str:
        """The command that replays this seed."""
        ...

    def line(self) -> str:
        """The one-line report of this seed."""
        ...


class SeedsOutcome(Protocol):
    """What the command line reads from a range's summary."""

    @property
    def violations(self) -> Sequence[SeedOutcome]: ...

    def line(self) -> str:
        """The one-line report of the range."""
        ...


JobT = TypeVar("JobT")
ResultT = TypeVar("ResultT", bound=SeedOutcome)


def run_guarded(body: Callable[[], None], clock: SimClock) -> str | None:
    """Run ``body``; returns the violation it hit (stamped with the sim time), or ``None``.

    An assertion inside a core or a shell is a failure too, reported as ``assertion: ...``.
    """
    try:
        body()
    except InvariantViolated as e:
        return f"{e} at sim_time_ms={clock.now_ms}"
    except AssertionError as e:
        return f"assertion: {e} at sim_time_ms={clock.now_ms}"
    return None


def run_seed_jobs(
    jobs: Sequence[JobT],
    run_one: Callable[[JobT], ResultT],
    take: Callable[[ResultT], None],
    *,
    processes: int,
    chunksize: int,
    stop_on_violation: bool,
) -> None:
    """Run every job (in order, or ``processes`` at a time) and hand each result to ``take``;
    with ``stop_on_violation``, stop after the first result with a violation.

    ``run_one`` must be a module-level function when ``processes > 1`` (it is pickled).
    """

    def stop_after(r: ResultT) -> bool:
        take(r)
        return stop_on_violation and r.violation is not None

    if processes <= 1:
        for job in jobs:
            if stop_after(run_one(job)):
                break
    else:
        # NB: "spawn", not Linux's default fork: a caller that holds threads (gRPC's, a
        # running cluster's) would hand its workers locks that no thread will ever release;
        # forked workers of a process that had run gRPC servers span at 40% CPU for minutes.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(processes, mp_context=context) as pool:
            for r in pool.map(run_one, jobs, chunksize=chunksize):
                if stop_after(r):
                    break


def add_seed_arguments(p: argparse.ArgumentParser) -> None:
    """``--seeds N``, ``--start S``, ``--seed X`` (both hex or decimal) and ``--processes P``."""
    p.add_argument("--seeds", type=positive_int, default=None)
    p.add_argument("--start", type=seed_int, default=0)
    p.add_argument("--seed", type=seed_int, default=None)
    p.add_argument("--processes", type=positive_int, default=1)


def report_seed(result: SeedOutcome) -> int:
    """Print one seed's line; on a violation, the replay command too. The exit code."""
    print(result.line())
    if result.violation:
        print(f"replay: {result.replay}", file=sys.stderr)
        return 1
    return 0


def report_summary(summary: SeedsOutcome) -> int:
    """Print a range's summary line; on a violation, the first one and how to replay it."""
    print(summary.line())
    if summary.violations:
        bad = summary.violations[0]
        print(f"violation: seed={bad.seed:#x}: {bad.violation}", file=sys.stderr)
        print(f"replay: {bad.replay}", file=sys.stderr)
        return 1
    return 0


__all__ = [
    "SeedOutcome",
    "SeedsOutcome",
    "add_seed_arguments",
    "report_seed",
    "report_summary",
    "run_guarded",
    "run_seed_jobs",
]
