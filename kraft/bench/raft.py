"""``kraft bench raft``: the embeddable Raft log on 3 processes, beside PySyncObj in the same run.

Each implementation gets 3 node processes (`kraft.bench.raft_node`) on free loopback ports.
The load is generated inside the leader process, as PySyncObj's in-process client does:

- throughput: N 100-byte entries with many in flight (kraft: one `propose_nowait([entry])`
  and one future per entry, up to ``--window`` entries in flight; PySyncObj: one async call
  with ``callback=`` per entry), timed from the first proposal to the last commit;
- latency: one proposal at a time (propose, wait for the commit, next): p50/p99/p99.9;
- failover: SIGKILL the leader, time until the first proposal commits on the new leader
  (the survivors propose in a loop as soon as they lead and report ``time.monotonic()``).

kraft runs with `RaftConfig`'s loopback defaults and fdatasyncs its log (group commit);
PySyncObj keeps its log in memory (no journal file) with either its defaults or the "tuned"
setup in docs/benchmarks.md (5 ms tick, 10 ms append period, 0.2-0.4 s election timeouts).

    python -m kraft.bench.raft --entries 200000 --latency-ops 500 --failover-runs 10 --json
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import json
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kraft.arguments import ArgumentParser, non_negative_int, positive_int
from kraft.cluster.ports import free_ports

_PR_SET_PDEATHSIG = 1
_live: set[subprocess.Popen[str]] = set()

PYSYNCOBJ_DEFAULT_LATENCY_OPS = 50
"""PySyncObj's defaults commit ~10 ops/s one at a time (a 100 ms append period): cap the run."""


def _die_with_parent() -> None:  # in the child, between fork and exec
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setpgrp()


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_live):
        with contextlib.suppress(OSError):
            proc.kill()


class BenchError(Exception):
    """A node did not answer in time, answered with an error, or died."""


# --- node processes ------------------------------------------------------------------------------


@dataclass
class NodeProcess:
    """A `kraft.bench.raft_node` child; its stdout (JSON lines) is read by a thread."""

    impl: str
    node_id: int
    argv: list[str]
    log_path: Path
    proc: subprocess.Popen[str] | None = None
    lines: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kraft.bench.raft_node", *self.argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                preexec_fn=_die_with_parent,
            )
        _live.add(self.proc)
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                self.lines.put({"error": f"not JSON: {line.strip()!r}"})
        self.lines.put({"eof": True})

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, command: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def expect(self, timeout: float, what: str) -> dict[str, Any]:
        try:
            msg = self.lines.get(timeout=timeout)
        except queue.Empty:
            if self.alive():
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGUSR1)  # faulthandler: stacks into its log
            raise BenchError(
                f"{self}: no answer to {what!r} within {timeout:.0f}s (log: {self.log_path})"
            ) from None
        if "error" in msg or "eof" in msg:
            raise BenchError(f"{self}: {what!r} -> {msg} (log: {self.log_path})")
        return msg

    def ask(self, command: str, timeout: float) -> dict[str, Any]:
        self.send(command)
        return self.expect(timeout, command)

    def kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            self.proc.wait()
            _live.discard(self.proc)

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.send("quit")
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)
        self.kill()

    def __str__(self) -> str:
        return f"{self.impl} node {self.node_id}"


@dataclass(frozen=True)
class ClusterSpec:
    """What to start: ``impl`` with a PySyncObj ``conf`` or kraft ``properties``."""

    impl: str
    conf: str = "default"
    properties: tuple[tuple[str, str], ...] = ()
    tls_dir: str = ""
    """kraft: mTLS between the nodes with the certificates there (``--tls``)."""

    @property
    def label(self) -> str:
        if self.impl == "kraft":
            return "kraft TLS" if self.tls_dir else "kraft"
        return f"PySyncObj {self.conf}"


@contextlib.contextmanager
def cluster(spec: ClusterSpec, workdir: Path) -> Iterator[list[NodeProcess]]:
    """3 fresh nodes on free loopback ports, each ready; all gone on exit."""
    ports = free_ports(3)
    peers = ",".join(f"{i}=127.0.0.1:{p}" for i, p in enumerate(ports, start=1))
    workdir.mkdir(parents=True, exist_ok=True)
    nodes: list[NodeProcess] = []
    for i in (1, 2, 3):
        argv = ["--impl", spec.impl, "--id", str(i), "--peers", peers]
        argv += ["--data-dir", str(workdir / f"node-{i}"), "--pysyncobj-conf", spec.conf]
        for key, value in spec.properties:
            argv += ["--raft-property", f"{key}={value}"]
        if spec.tls_dir:
            argv += ["--tls-dir", spec.tls_dir]
        nodes.append(NodeProcess(spec.impl, i, argv, workdir / f"node-{i}.log"))
    try:
        for node in nodes:
            node.start()
        for node in nodes:
            node.expect(60, "ready")
        yield nodes
    finally:
        for node in nodes:
            with contextlib.suppress(OSError):
                if node.alive():
                    node.send("quit")
        for node in nodes:
            node.stop()


def find_leader(nodes: list[NodeProcess], timeout: float = 30.0) -> NodeProcess:
    """The node that says it leads and that every other live node names as the leader."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answers = {n.node_id: n.ask("leader?", 10) for n in nodes if n.alive()}
        leaders = [n for n in nodes if answers.get(n.node_id, {}).get("leader")]
        if len(leaders) == 1:
            lid = leaders[0].node_id
            if all(a.get("leader_id") == lid for a in answers.values()):
                return leaders[0]
        time.sleep(0.05)
    raise BenchError(f"no single leader among {[str(n) for n in nodes]} after {timeout:.0f}s")


# --- measurements --------------------------------------------------------------------------------

_LOST_LEADERSHIP = ("NotControllerError", "SyncObjException", "callbacks stopped")
"""Answers that mean an election under load disturbed the run: run it again."""


def on_leader(
    nodes: list[NodeProcess], command: str, timeout: float, attempts: int = 3
) -> dict[str, Any]:
    """Run ``command`` on the leader; if leadership moves meanwhile (an election under load;
    for PySyncObj also callbacks that stop firing), run it again on the current leader, up to
    ``attempts`` times. The answer carries
    ``leader_changes`` (0 when the first attempt succeeded) and, after the last failed
    attempt, ``error`` instead of figures."""
    errors: list[str] = []
    for _ in range(attempts):
        leader = find_leader(nodes)
        try:
            answer = leader.ask(command, timeout)
        except BenchError as e:
            if not any(k in str(e) for k in _LOST_LEADERSHIP):
                raise
            errors.append(str(e))
            continue
        answer["leader_changes"] = len(errors)
        answer["node"] = leader.node_id
        return answer
    return {"error": errors[-1], "leader_changes": len(errors)}


def throughput(nodes: list[NodeProcess], entries: int, group: int, window: int) -> dict[str, Any]:
    r = on_leader(nodes, f"throughput {entries} {group} {window}", max(120.0, entries / 500))
    if "error" not in r:
        r["per_s"] = r["entries"] / r["seconds"]
    return r


def latency(nodes: list[NodeProcess], ops: int) -> dict[str, Any]:
    return on_leader(nodes, f"latency {ops}", 60 + ops * 1.0)


def failover_run(nodes: list[NodeProcess], rng: random.Random) -> dict[str, Any]:
    """Kill the leader of a steady cluster; seconds until a survivor commits as the leader."""
    leader = find_leader(nodes)
    leader.ask("ping-commit", 30)  # the cluster commits; the followers are caught up
    time.sleep(rng.uniform(0.1, 0.4))  # kill at a random point of the heartbeat cycle
    leader = find_leader(nodes)
    survivors = [n for n in nodes if n is not leader]
    for n in survivors:
        n.ask("failover-watch", 10)
    killed_at = time.monotonic()
    os.kill(leader.pid, signal.SIGKILL)
    leader.kill()  # reap it
    deadline = killed_at + 15
    while time.monotonic() < deadline:
        for n in survivors:
            try:
                msg = n.lines.get(timeout=0.005)
            except queue.Empty:
                continue
            if "failover_commit_at" not in msg:
                raise BenchError(f"{n}: unexpected {msg} while watching the failover")
            return {
                "seconds": msg["failover_commit_at"] - killed_at,
                "killed": leader.node_id,
                "new_leader": msg["node"],
                "epoch": msg["epoch"],
            }
    raise BenchError("no survivor committed within 15 s of the leader's SIGKILL")


def failover(spec: ClusterSpec, runs: int, workdir: Path, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    results = []
    for i in range(runs):
        with cluster(spec, workdir / f"run-{i}") as nodes:
            results.append(failover_run(nodes, rng))
    seconds = [r["seconds"] for r in results]
    return {
        "runs": results,
        "runs_s": seconds,
        "median_s": statistics.median(seconds),
        "max_s": max(seconds),
    }


def bench_cluster(
    spec: ClusterSpec,
    workdir: Path,
    *,
    entries: int,
    latency_ops: int,
    window: int,
    group: int,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Throughput, then one-at-a-time latency, on one 3-node cluster."""
    out: dict[str, Any] = {}
    with cluster(spec, workdir) as nodes:

        def stats(into: dict[str, Any]) -> None:  # kraft: each node's longest loop stall
            if spec.impl == "kraft":
                into["loop_stalls"] = {str(n.node_id): n.ask("stats", 10) for n in nodes}

        say(f"  {spec.label}: node {find_leader(nodes).node_id} leads; warming up")
        throughput(nodes, min(entries, 5_000), 1, window)
        stats({})
        out["throughput"] = r = throughput(nodes, entries, 1, window)
        stats(r)
        say(f"  {spec.label}: {_fmt(r.get('per_s'), ',.0f')} entries/s {_changes(r)}")
        if group > 1:
            out["throughput_grouped"] = r = throughput(nodes, entries, group, window)
            stats(r)
            say(f"  {spec.label}: {_fmt(r.get('per_s'), ',.0f')} entries/s in groups of {group}")
        out["latency"] = r = latency(nodes, latency_ops)
        stats(r)
        say(f"  {spec.label}: one at a time p50 {_fmt(r.get('p50_ms'), '.2f')} ms {_changes(r)}")
    return out


def _changes(r: dict[str, Any]) -> str:
    n = r.get("leader_changes", 0)
    err = f"; FAILED: {r['error']}" if "error" in r else ""
    return (f"({n} leader change(s) forced a rerun{err})" if n else "") + (err if not n else "")


# --- report --------------------------------------------------------------------------------------


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _get(d: dict[str, Any] | None, *path: str) -> Any:
    cur: Any = d
    for key in path:
        if not isinstance(cur, dict) or key not in cur:
            return None
        cur = cur[key]
    return cur


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Ratios against the best PySyncObj figure of either config, and the issue's targets
    (None where a figure is missing)."""
    kraft = result["kraft"]
    pso = result["pysyncobj"] or {}
    tputs = [t for v in pso.values() if (t := _get(v, "throughput", "per_s")) is not None]
    p99s = [p for v in pso.values() if (p := _get(v, "latency", "p99_ms")) is not None]
    best_tput = max(tputs) if tputs else None
    best_p99 = min(p99s) if p99s else None
    k_tput = _get(kraft, "throughput", "per_s")
    k_p50 = _get(kraft, "latency", "p50_ms")
    k_p99 = _get(kraft, "latency", "p99_ms")
    fo_median = _get(kraft, "failover", "median_s")
    fo_max = _get(kraft, "failover", "max_s")

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b == 0 else a / b

    tput_ratio = ratio(k_tput, best_tput)
    p99_ratio = ratio(k_p99, best_p99)
    ratios = {"throughput_vs_best_pysyncobj": tput_ratio, "p99_vs_best_pysyncobj": p99_ratio}
    targets = {
        "throughput_3x_pysyncobj": None if tput_ratio is None else tput_ratio >= 3.0,
        "p50_le_2ms": None if k_p50 is None else k_p50 <= 2.0,
        "p99_below_pysyncobj": None if p99_ratio is None else p99_ratio < 1.0,
        "failover_median_lt_0_5s": None if fo_median is None else fo_median < 0.5,
        "failover_max_lt_1s": None if fo_max is None else fo_max < 1.0,
    }
    return {
        "best_pysyncobj": {"throughput_per_s": best_tput, "p99_ms": best_p99},
        "ratios": ratios,
        "targets": targets,
    }


_ROWS: list[tuple[str, tuple[str, ...], str]] = [
    ("committed entries/s, many in flight", ("throughput", "per_s"), ",.0f"),
    ("  reruns after an election", ("throughput", "leader_changes"), "d"),
    ("  kraft, in groups per proposal", ("throughput_grouped", "per_s"), ",.0f"),
    ("one at a time: p50 ms", ("latency", "p50_ms"), ".2f"),
    ("one at a time: p99 ms", ("latency", "p99_ms"), ".2f"),
    ("one at a time: p99.9 ms", ("latency", "p999_ms"), ".2f"),
    ("one at a time: ops", ("latency", "ops"), "d"),
    ("failover: median s", ("failover", "median_s"), ".3f"),
    ("failover: max s", ("failover", "max_s"), ".3f"),
]


def render(result: dict[str, Any]) -> str:
    pso: dict[str, Any] = result["pysyncobj"] or {}
    cols: list[tuple[str, dict[str, Any] | None]] = [("kraft", result["kraft"])]
    if result.get("kraft_tls") is not None:
        cols.append(("kraft TLS", result["kraft_tls"]))
    cols += [(f"PySyncObj {name}", v) for name, v in pso.items()]
    width = 20
    lines = [
        f"kraft bench raft: 3 processes on 127.0.0.1, {result['entry_bytes']}-byte entries, "
        "load generated in the leader process",
        "kraft fdatasyncs its log (group commit); PySyncObj keeps its log in memory",
        "kraft config: RaftConfig defaults"
        + (
            f" with {result['kraft_config']['overrides']}"
            if result["kraft_config"]["overrides"]
            else ""
        )
        + ", linger {append_linger_ms} ms, fetch timeout {fetch_timeout_ms} ms, election timeout "
        "{election_timeout_ms} ms, fetch max {fetch_max_bytes} B".format(**result["kraft_config"]),
        f"in flight: kraft {result['window']} entries (one propose_nowait and one future per "
        f"entry{'; also groups of ' + str(result['group']) if result['group'] > 1 else ''}), "
        f"PySyncObj {result['pysyncobj_window']} async calls (one callback per entry)",
        "",
        f"{'':38}" + "".join(f"{name:>{width}}" for name, _ in cols),
    ]
    for label, path, spec in _ROWS:
        values = [_get(v, *path) for _, v in cols]
        if all(x is None for x in values) or (path[-1] == "leader_changes" and not any(values)):
            continue
        lines.append(f"{label:38}" + "".join(f"{_fmt(x, spec):>{width}}" for x in values))
    for name, v in cols:
        for part in ("throughput", "throughput_grouped", "latency"):
            if (err := _get(v, part, "error")) is not None:
                lines.append(f"{name} {part} FAILED: {err}")
    s = result["summary"]
    r, t = s["ratios"], s["targets"]

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("met" if ok else "MISSED")

    lines += [
        "",
        "kraft / best PySyncObj: throughput "
        f"{_fmt(r['throughput_vs_best_pysyncobj'], '.2f')}x, one-at-a-time p99 "
        f"{_fmt(r['p99_vs_best_pysyncobj'], '.2f')}x",
        f"targets: throughput >= 3x PySyncObj: {verdict(t['throughput_3x_pysyncobj'])}; "
        f"p50 <= 2 ms: {verdict(t['p50_le_2ms'])}; "
        f"p99 < PySyncObj: {verdict(t['p99_below_pysyncobj'])}",
        f"         failover median < 0.5 s: {verdict(t['failover_median_lt_0_5s'])}; "
        f"max < 1 s: {verdict(t['failover_max_lt_1s'])}",
    ]
    if (tls := s.get("tls")) is not None:
        lines.append(
            f"kraft TLS / kraft plaintext: one-at-a-time p50 {_fmt(tls['p50_ratio'], '.2f')}x "
            f"(target <= 1.5x: {verdict(tls['p50_within_1_5x'])}), p99 "
            f"{_fmt(tls['p99_ratio'], '.2f')}x, throughput {_fmt(tls['throughput_ratio'], '.2f')}x"
        )
    return "\n".join(lines)


# --- main ----------------------------------------------------------------------------------------


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    import dataclasses

    from kraft.raft import RaftConfig

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    properties = tuple((k, v) for k, _, v in (p.partition("=") for p in args.kraft_config))
    kraft_config = RaftConfig.from_properties(dict(properties))  # fails early on a bad key
    overridden = {k: v for k, v in kraft_config.to_properties().items() if k in dict(properties)}
    kraft = ClusterSpec("kraft", properties=properties)
    result: dict[str, Any] = {
        "entry_bytes": 100,
        "entries": args.entries,
        "latency_ops": args.latency_ops,
        "window": args.window,
        "pysyncobj_window": args.pysyncobj_window,
        "group": args.group,
        "failover_runs": args.failover_runs,
        "kraft_config": {"overrides": overridden, **dataclasses.asdict(kraft_config)},
    }
    common: dict[str, Any] = {"entries": args.entries, "say": say}
    say("kraft: throughput and latency")
    result["kraft"] = bench_cluster(
        kraft,
        workdir / "kraft",
        latency_ops=args.latency_ops,
        group=args.group,
        window=args.window,
        **common,
    )
    if args.tls:
        from kraft.security.certs import create_certs

        certs = create_certs(workdir / "certs", nodes=["node-1", "node-2", "node-3"])
        say("kraft with mTLS between the nodes: throughput and latency")
        result["kraft_tls"] = bench_cluster(
            dataclasses.replace(kraft, tls_dir=str(certs.cafile.parent)),
            workdir / "kraft-tls",
            latency_ops=args.latency_ops,
            group=args.group,
            window=args.window,
            **common,
        )
    pso: dict[str, Any] | None = None
    if not args.skip_pysyncobj:
        pso = {}
        for conf in ("default", "tuned"):
            ops = args.latency_ops
            if conf == "default":
                ops = min(ops, PYSYNCOBJ_DEFAULT_LATENCY_OPS)
            say(f"PySyncObj {conf}: throughput and latency")
            pso[conf] = bench_cluster(
                ClusterSpec("pysyncobj", conf),
                workdir / f"pysyncobj-{conf}",
                latency_ops=ops,
                group=1,
                window=args.pysyncobj_window,
                **common,
            )
    result["pysyncobj"] = pso
    if args.failover_runs > 0:
        say(f"kraft: {args.failover_runs} failover runs")
        result["kraft"]["failover"] = failover(
            kraft, args.failover_runs, workdir / "failover-kraft", args.seed
        )
        if pso is not None and not args.skip_pysyncobj_failover:
            say(f"PySyncObj tuned: {args.failover_runs} failover runs")
            pso["tuned"]["failover"] = failover(
                ClusterSpec("pysyncobj", "tuned"),
                args.failover_runs,
                workdir / "failover-pysyncobj",
                args.seed,
            )
    result["summary"] = summarize(result)
    if args.tls:
        result["summary"]["tls"] = tls_summary(result)
    return result


def tls_summary(result: dict[str, Any]) -> dict[str, Any]:
    """kraft with mTLS against plaintext, measured in the same run (issue 17's target: the
    one-at-a-time p50 within 1.5x)."""
    plain, tls = result["kraft"], result["kraft_tls"]

    def ratio(path: tuple[str, ...]) -> float | None:
        a, b = _get(tls, *path), _get(plain, *path)
        return None if a is None or not b else round(a / b, 3)

    p50 = ratio(("latency", "p50_ms"))
    return {
        "p50_ratio": p50,
        "p99_ratio": ratio(("latency", "p99_ms")),
        "throughput_ratio": ratio(("throughput", "per_s")),
        "p50_within_1_5x": None if p50 is None else p50 <= 1.5,
    }


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="kraft bench raft",
        description="3-process Raft log: throughput, one-at-a-time latency and failover, "
        "beside PySyncObj in the same run.",
    )
    parser.add_argument(
        "--entries", type=positive_int, default=200_000, help="entries for throughput"
    )
    parser.add_argument(
        "--latency-ops", type=positive_int, default=500, help="one-at-a-time proposals"
    )
    parser.add_argument(
        "--failover-runs", type=non_negative_int, default=10, help="leader SIGKILLs (0: none)"
    )
    parser.add_argument(
        "--window", type=positive_int, default=10_000, help="kraft: entries in flight (throughput)"
    )
    parser.add_argument(
        "--pysyncobj-window",
        type=positive_int,
        default=20_000,
        help="PySyncObj: calls in flight (its best on a 2-core VM; its queue holds 100,000)",
    )
    parser.add_argument(
        "--group",
        type=positive_int,
        default=1,
        help="also measure kraft with G entries per proposal",
    )
    parser.add_argument("--skip-pysyncobj", action="store_true", help="measure kraft only")
    parser.add_argument(
        "--tls",
        action="store_true",
        help="also measure kraft with mTLS between the nodes, beside plaintext in the same run",
    )
    parser.add_argument(
        "--skip-pysyncobj-failover", action="store_true", help="no PySyncObj failover runs"
    )
    parser.add_argument(
        "--kraft-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a controller.quorum.* key of kraft's RaftConfig (repeatable); "
        "the default is RaftConfig's loopback defaults",
    )
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    parser.add_argument("--seed", type=non_negative_int, default=1, help="seed of the kill timing")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        if args.dir:
            result = run(args, Path(args.dir))
        else:
            with tempfile.TemporaryDirectory(prefix="kraft-bench-raft-") as tmp:
                result = run(args, Path(tmp))
    except BenchError as e:
        print(f"kraft bench raft: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
