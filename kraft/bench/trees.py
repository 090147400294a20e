"""``kraft bench trees``: one benchmark on two trees of the project, alternated in one run.

A change's effect on speed is a ratio against the tree before it, measured on the same machine
at the same time. For example::

    kraft bench trees --base main --rounds 3 -- produce --records 300000 --acks all

exports ``main`` (``git archive``) into a cache outside the repository, then runs
``kraft bench produce --records 300000 --acks all --json`` in that tree and in this one, in
ABBA order (base, head, head, base, ...), so a drift of the machine's load weighs on both
trees alike. Each run is its own processes, so its cluster's nodes run that tree's code; the
Python environment is this one. It reports the median of every figure the bench prints that
matches ``--keys``, per tree, and head/base, with the load average before and after.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraft.arguments import positive_int

DEFAULT_KEYS = r"per_s|mb_s|us_per_record|p50|p99|ratio"
"""The figures reported unless ``--keys`` says otherwise: rates, CPU per record, latencies,
ratios."""


class TreesError(Exception):
    """A tree that cannot be had, or a bench run that failed (its message: one line)."""


@dataclass(frozen=True, slots=True)
class Row:
    key: str
    base: float
    head: float

    @property
    def ratio(self) -> float | None:
        return None if self.base == 0 else self.head / self.base


def abba(rounds: int) -> list[str]:
    """The run order: ``base, head`` then ``head, base``, and so on."""
    order: list[str] = []
    for i in range(rounds):
        order += ["base", "head"] if i % 2 == 0 else ["head", "base"]
    return order


def numeric_leaves(obj: Any, prefix: str = "") -> dict[str, float]:
    """Every number in a bench's JSON, by its dotted path (lists and booleans left out)."""
    out: dict[str, float] = {}
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            out |= numeric_leaves(value, f"{prefix}{key}.")
    elif isinstance(obj, int | float) and not isinstance(obj, bool):
        out[prefix.rstrip(".")] = float(obj)
    return out


def compare(runs: Mapping[str, Sequence[Mapping[str, Any]]], keys: re.Pattern[str]) -> list[Row]:
    """The median of each figure matching ``keys`` that every run of both trees printed."""
    leaves = {tree: [numeric_leaves(r) for r in rs] for tree, rs in runs.items()}
    common = set.intersection(*(set(lv) for rs in leaves.values() for lv in rs))
    return [
        Row(
            key,
            statistics.median(lv[key] for lv in leaves["base"]),
            statistics.median(lv[key] for lv in leaves["head"]),
        )
        for key in sorted(common)
        if keys.search(key)
    ]


def export_tree(repo: Path, rev: str, cache: Path) -> tuple[str, Path]:
    """``rev`` of ``repo`` as files under ``cache`` (once per commit): its commit and path."""
    try:
        sha = _git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}").decode().strip()
    except TreesError as e:
        raise TreesError(f"no commit {rev!r} in {repo}: {e}") from None
    tree = cache / sha[:12]
    if not (tree / "kraft" / "cli").is_dir():
        archive = _git(repo, "archive", "--format=tar", sha)
        tree.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
    return sha, tree


def run_bench(tree: Path, bench: Sequence[str], timeout_s: float) -> dict[str, Any]:
    """``kraft bench BENCH... --json`` with ``tree``'s code; its JSON object."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-m", "kraft.cli", "bench", *bench, "--json"]
    try:
        done = subprocess.run(
            command, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        raise TreesError(
            f"kraft bench {' '.join(bench)} in {tree}: over {timeout_s:.0f} s"
        ) from None
    start = done.stdout.find("{")
    if done.returncode != 0 or start < 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise TreesError(f"kraft bench {' '.join(bench)} in {tree} failed: {last}")
    result: dict[str, Any] = json.loads(done.stdout[start:])
    return result


def _git(repo: Path, *args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    if done.returncode != 0:
        raise TreesError(done.stderr.decode(errors="replace").strip() or "git failed")
    return done.stdout


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kraft bench trees",
        description="One benchmark on a base commit's tree and on this one, alternated.",
        epilog="example: kraft bench trees --base main --rounds 3 -- produce --records 300000",
    )
    p.add_argument("--base", required=True, help="the commit to compare against (e.g. main)")
    p.add_argument("--rounds", type=positive_int, default=2, help="runs of each tree (ABBA)")
    p.add_argument("--keys", default=DEFAULT_KEYS, help="regex of the figures to report")
    p.add_argument(
        "--cache",
        default=str(Path.home() / ".cache" / "kraft" / "trees"),
        help="where base trees are exported (default: ~/.cache/kraft/trees)",
    )
    p.add_argument("--timeout-s", type=float, default=1800.0, help="per bench run")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("bench", nargs=argparse.REMAINDER, help="-- BENCH [its options]")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    bench = args.bench[1:] if args.bench[:1] == ["--"] else args.bench
    if not bench or bench[0] == "trees":
        print("kraft bench trees: name the bench after --, e.g. -- produce --records 300000")
        return 2
    head = Path(__file__).resolve().parents[2]
    try:
        sha, base = export_tree(head, args.base, Path(args.cache))
        load_before = os.getloadavg()
        runs: dict[str, list[dict[str, Any]]] = {"base": [], "head": []}
        for i, tree in enumerate(abba(args.rounds), 1):
            if not args.json:
                print(f"run {i}/{2 * args.rounds}: {tree}", flush=True)
            runs[tree].append(run_bench(base if tree == "base" else head, bench, args.timeout_s))
    except TreesError as e:
        print(f"kraft bench trees: {e}")
        return 1
    rows = compare(runs, re.compile(args.keys))
    load = {"before": [round(x, 2) for x in load_before], "after": list(os.getloadavg())}
    if args.json:
        print(
            json.dumps(
                {
                    "base": args.base,
                    "base_commit": sha,
                    "bench": bench,
                    "rounds": args.rounds,
                    "load_average": load,
                    "figures": {r.key: {"base": r.base, "head": r.head} for r in rows},
                    "runs": runs,
                }
            )
        )
        return 0
    print(f"base {args.base} ({sha[:12]}) against this tree, {args.rounds} runs each (ABBA)")
    width = max((len(r.key) for r in rows), default=10)
    print(f"{'figure':<{width}}  {'base':>12}  {'head':>12}  head/base")
    for r in rows:
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}"
        print(f"{r.key:<{width}}  {r.base:>12,.2f}  {r.head:>12,.2f}  {ratio}")
    print(f"load average before {load['before']}, after {[round(x, 2) for x in load['after']]}")
    return 0


__all__ = ["Row", "TreesError", "abba", "compare", "export_tree", "main", "numeric_leaves"]
