"""One node of ``kraft bench raft``: a kraft `RaftServer` or a PySyncObj ``SyncObj``, alone in
its process, driven by `kraft.bench.raft` over a line protocol.

    python -m kraft.bench.raft_node --impl kraft --id 1 \\
        --peers 1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003 --data-dir /tmp/n1

The load is generated inside the node (the leader), as a PySyncObj application does with its
in-process client. Commands arrive one per line on stdin; every answer is one JSON line on
stdout (anything else the process prints goes to stderr):

- ``leader?`` -> ``{"leader": bool, "leader_id": int | null, "epoch": int}``
- ``throughput N [G [W]]`` -> propose N 100-byte entries, G per proposal (default 1: one
  future per entry), at most W entries in flight; the time runs from the first proposal to
  the last commit: ``{"entries", "group", "window", "seconds", "failed"}``
- ``latency M`` -> M proposals one at a time (propose, wait for the commit, next):
  ``{"ops", "p50_ms", "p99_ms", "p999_ms", "mean_ms", "max_ms"}``
- ``ping-commit`` -> one proposal: ``{"offset", "ms", "at"}``
- ``failover-watch`` -> ``{"watching": true}`` at once; then, once this node leads and one of
  its proposals committed: ``{"failover_commit_at": t, "node": id, "epoch": e}``
- ``stats`` (kraft) -> ``{"max_loop_lag_ms", "stalls_over_50ms"}``: the event loop's longest
  stall since the last ``stats`` (a stall past ``fetch_timeout_ms`` costs an election);
- ``quit`` -> stop and exit.

Times such as ``at`` are ``time.monotonic()``: CLOCK_MONOTONIC is one clock for the whole
machine on Linux, so the driver can compare them with its own.

SIGUSR1 dumps every thread's stack to stderr (the driver sends it when an answer is late).
Set ``KRAFT_BENCH_PROFILE=DIR`` to cProfile each ``throughput`` and ``latency`` command into
``DIR/<impl>-<id>-<command>.pstats``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import faulthandler
import json
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from kraft.gc_tuning import tune_gc

ENTRY_BYTES = 100
PROFILE_ENV = "KRAFT_BENCH_PROFILE"
STALL_S = 10.0
"""PySyncObj: give up on a throughput run once no callback fired for this long."""
YIELD_EVERY = 512
"""The kraft load generator yields to the event loop after this many proposals in a row."""


# --- shared helpers ------------------------------------------------------------------------------


class Output:
    """The protocol channel: the original stdout, one JSON object per line, thread-safe."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj) + "\n"
        with self._lock:
            self._stream.write(line)
            self._stream.flush()


def claim_stdout() -> Output:
    """Keep fd 1 for the protocol and point everything else that writes to it at stderr."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return Output(proto)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of an already sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, round(q / 100 * len(sorted_values) + 0.5 - 1e-9))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def latency_summary(samples_s: list[float]) -> dict[str, Any]:
    ms = sorted(s * 1000 for s in samples_s)
    return {
        "ops": len(ms),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "p999_ms": percentile(ms, 99.9),
        "mean_ms": sum(ms) / len(ms) if ms else float("nan"),
        "max_ms": ms[-1] if ms else float("nan"),
    }


@contextmanager
def maybe_profile(impl: str, node_id: int, command: str) -> Iterator[None]:
    directory = os.environ.get(PROFILE_ENV)
    if not directory:
        yield
        return
    prof = cProfile.Profile()
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
        Path(directory).mkdir(parents=True, exist_ok=True)
        prof.dump_stats(str(Path(directory) / f"{impl}-{node_id}-{command}.pstats"))


def parse_peers(text: str) -> dict[int, str]:
    peers: dict[int, str] = {}
    for part in text.split(","):
        node_id, _, address = part.partition("=")
        peers[int(node_id)] = address
    return peers


def entry() -> bytes:
    return b"x" * ENTRY_BYTES


# --- kraft ---------------------------------------------------------------------------------------


class CountingStateMachine:
    """Counts applied entries; its snapshot is the count."""

    def __init__(self) -> None:
        self.applied = 0
        self.last_offset = -1

    def apply(self, offset: int, data: bytes) -> None:
        self.applied += 1
        self.last_offset = offset

    def snapshot(self) -> bytes:
        return str(self.applied).encode()

    def restore(self, data: bytes) -> None:
        self.applied = int(data or b"0")


class KraftNode:
    def __init__(
        self,
        node_id: int,
        peers: dict[int, str],
        data_dir: str,
        out: Output,
        properties: dict[str, str] | None = None,
        tls_dir: str | None = None,
    ) -> None:
        from kraft.logs import configure_logging
        from kraft.raft import RaftConfig
        from kraft.raft_shell import RaftServer
        from kraft.security.tls import node_tls

        configure_logging("info", json=True)  # elections and leader changes, to the log file

        self.node_id = node_id
        self.out = out
        self.server = RaftServer(
            node_id,
            peers,
            data_dir,
            listen=peers[node_id],
            # The loopback defaults unless overridden; the same for every command.
            config=RaftConfig.from_properties(properties or {}),
            state_machine=CountingStateMachine(),
            # --tls-dir: mTLS between the nodes, as a TLS controller quorum runs it.
            tls=node_tls(
                {
                    "listeners": f"SSL://{peers[node_id]}",
                    "ssl.keystore.location": f"{tls_dir}/node-{node_id}-keystore.pem",
                    "ssl.truststore.location": f"{tls_dir}/ca.pem",
                    "ssl.client.auth": "required",
                }
            )
            if tls_dir
            else None,
        )
        self._leader_changed = asyncio.Event()
        self.server.add_leader_listener(lambda _leader, _epoch: self._leader_changed.set())
        self._watch: asyncio.Task[None] | None = None
        self._lag_task: asyncio.Task[None] | None = None
        self.max_lag_ms = 0.0
        self.stalls = 0

    async def _watch_loop_lag(self, period: float = 0.005, report_ms: float = 50.0) -> None:
        """Track how late a short sleep wakes up: the event loop's longest stall."""
        while True:
            t0 = time.monotonic()
            await asyncio.sleep(period)
            lag_ms = (time.monotonic() - t0 - period) * 1000
            if lag_ms > self.max_lag_ms:
                self.max_lag_ms = lag_ms
            if lag_ms > report_ms:
                self.stalls += 1
                print(f"loop stalled {lag_ms:.0f} ms at {time.time():.3f}", file=sys.stderr)

    async def run(self) -> None:
        await self.server.start()
        self._lag_task = asyncio.create_task(self._watch_loop_lag())
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        self.out.send({"ready": True, "impl": "kraft", "id": self.node_id})
        try:
            while line := (await reader.readline()).decode():
                cmd, *args = line.split() or [""]
                if cmd == "quit":
                    break
                try:
                    self.out.send(await self.handle(cmd, args))
                except Exception as e:  # answer, never die: the driver decides
                    self.out.send({"error": f"{type(e).__name__}: {e}"})
        finally:
            await self.server.stop(graceful=False)

    async def handle(self, cmd: str, args: list[str]) -> dict[str, Any]:
        s = self.server
        if cmd == "leader?":
            return {"leader": s.is_leader, "leader_id": s.leader_id, "epoch": s.epoch}
        if cmd == "stats":  # since the last "stats"
            stats = {"max_loop_lag_ms": self.max_lag_ms, "stalls_over_50ms": self.stalls}
            self.max_lag_ms, self.stalls = 0.0, 0
            return stats
        if cmd == "throughput":
            n = int(args[0])
            group = int(args[1]) if len(args) > 1 else 1
            window = int(args[2]) if len(args) > 2 else 10_000
            with maybe_profile("kraft", self.node_id, "throughput"):
                return await self.throughput(n, group, window)
        if cmd == "latency":
            with maybe_profile("kraft", self.node_id, "latency"):
                return await self.latency(int(args[0]))
        if cmd == "ping-commit":
            t0 = time.monotonic()
            offset = await s.propose(entry())
            at = time.monotonic()
            return {"offset": offset, "ms": (at - t0) * 1000, "at": at}
        if cmd == "failover-watch":
            self._watch = asyncio.create_task(self.failover_watch())
            return {"watching": True}
        return {"error": f"unknown command {cmd!r}"}

    async def throughput(self, n: int, group: int, window: int) -> dict[str, Any]:
        """Keep up to ``window`` entries in flight, ``group`` per `propose_nowait` call."""
        from storage.errors import KraftError

        s = self.server
        data = entry()
        full = [data] * group
        max_pending = max(1, window // group)
        pending: deque[asyncio.Future[int]] = deque()
        failed = 0
        sent = 0
        t0 = time.perf_counter()
        try:
            while sent < n:
                if len(pending) >= max_pending:
                    try:
                        await pending.popleft()  # returns at once (no yield) when already done
                    except KraftError:
                        failed += group
                k = min(group, n - sent)
                pending.append(s.propose_nowait(full if k == group else [data] * k))
                sent += k
                if len(pending) % YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # let the Raft loop and the RPCs run between bursts
            while pending:
                try:
                    await pending.popleft()
                except KraftError:
                    failed += group
        finally:  # on an early exit, retrieve what is left (no "exception never retrieved")
            for fut in pending:
                fut.add_done_callback(_consume)
        seconds = time.perf_counter() - t0
        return {
            "entries": n,
            "group": group,
            "window": window,
            "seconds": seconds,
            "failed": failed,
        }

    async def latency(self, ops: int) -> dict[str, Any]:
        s = self.server
        data = entry()
        samples: list[float] = []
        for _ in range(ops):
            t0 = time.perf_counter()
            await s.propose(data)
            samples.append(time.perf_counter() - t0)
        return latency_summary(samples)

    async def failover_watch(self) -> None:
        """Propose as soon as this node leads; report the first commit's time."""
        from storage.errors import KraftError

        s = self.server
        data = entry()
        while True:
            if s.is_leader:
                try:
                    await s.propose(data)
                except KraftError:  # lost the lead again, or the entry was truncated
                    continue
                at = time.monotonic()
                self.out.send({"failover_commit_at": at, "node": self.node_id, "epoch": s.epoch})
                return
            self._leader_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._leader_changed.wait(), 0.005)


def _consume(fut: asyncio.Future[int]) -> None:
    if not fut.cancelled():
        fut.exception()


# --- PySyncObj -----------------------------------------------------------------------------------


def pysyncobj_conf(name: str) -> Any:
    """``default``: SyncObjConf's defaults. ``tuned``: the tuned setup of docs/benchmarks.md:
    5 ms tick, 10 ms append period, 0.2-0.4 s election timeouts (the defaults are 0.4-1.4 s)."""
    from pysyncobj import SyncObjConf

    if name == "default":
        return SyncObjConf()
    if name == "tuned":
        return SyncObjConf(
            autoTickPeriod=0.005,
            appendEntriesPeriod=0.01,
            raftMinTimeout=0.2,
            raftMaxTimeout=0.4,
        )
    raise ValueError(f"unknown PySyncObj config {name!r}")


def make_pysyncobj(self_addr: str, partners: list[str], conf: Any) -> Any:
    from pysyncobj import SyncObj, replicated

    class Counter(SyncObj):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(self_addr, partners, conf)
            self.applied = 0

        @replicated  # type: ignore[untyped-decorator]
        def add(self, data: bytes) -> int:
            self.applied += 1
            return self.applied

    return Counter()


class PySyncObjNode:
    def __init__(self, node_id: int, peers: dict[int, str], conf_name: str, out: Output) -> None:
        self.node_id = node_id
        self.peers = peers
        self.out = out
        self.conf_name = conf_name
        partners = [addr for i, addr in sorted(peers.items()) if i != node_id]
        self.obj = make_pysyncobj(peers[node_id], partners, pysyncobj_conf(conf_name))
        self._by_address = {addr: i for i, addr in peers.items()}

    def run(self) -> None:
        self.out.send({"ready": True, "impl": "pysyncobj", "id": self.node_id})
        try:
            for line in sys.stdin:
                cmd, *args = line.split() or [""]
                if cmd == "quit":
                    break
                try:
                    self.out.send(self.handle(cmd, args))
                except Exception as e:
                    self.out.send({"error": f"{type(e).__name__}: {e}"})
        finally:
            self.obj.destroy()

    def handle(self, cmd: str, args: list[str]) -> dict[str, Any]:
        obj = self.obj
        if cmd == "leader?":
            leader = obj._getLeader()
            leader_id = None if leader is None else self._by_address.get(leader.address)
            return {"leader": obj._isLeader(), "leader_id": leader_id, "epoch": obj.raftCurrentTerm}
        if cmd == "throughput":
            n = int(args[0])
            window = int(args[2]) if len(args) > 2 else 10_000
            with maybe_profile("pysyncobj", self.node_id, "throughput"):
                return self.throughput(n, window)
        if cmd == "latency":
            with maybe_profile("pysyncobj", self.node_id, "latency"):
                return self.latency(int(args[0]))
        if cmd == "ping-commit":
            t0 = time.monotonic()
            offset = obj.add(entry(), sync=True, timeout=5)
            at = time.monotonic()
            return {"offset": offset, "ms": (at - t0) * 1000, "at": at}
        if cmd == "failover-watch":
            threading.Thread(target=self.failover_watch, daemon=True).start()
            return {"watching": True}
        return {"error": f"unknown command {cmd!r}"}

    def throughput(self, n: int, window: int) -> dict[str, Any]:
        """Async calls with ``callback=``, at most ``window`` in flight (PySyncObj's own queue
        holds 100,000 by default)."""
        from pysyncobj import FAIL_REASON

        slots = threading.Semaphore(window)
        done = threading.Event()
        state = {"completed": 0, "failed": 0}

        def callback(_result: Any, error: Any) -> None:  # runs on PySyncObj's thread
            if error != FAIL_REASON.SUCCESS:
                state["failed"] += 1
            state["completed"] += 1
            slots.release()
            if state["completed"] == n:
                done.set()

        add: Callable[..., Any] = self.obj.add
        data = entry()
        term = self.obj.raftCurrentTerm
        t0 = time.perf_counter()
        for _ in range(n):
            if not slots.acquire(timeout=STALL_S):
                break
            add(data, callback=callback)
        seen = -1
        while not done.wait(timeout=STALL_S) and state["completed"] != seen:
            seen = state["completed"]  # still moving: wait on
        if not done.is_set():
            return {
                "error": f"callbacks stopped: only {state['completed']} of {n} fired in "
                f"{STALL_S:.0f}s (term {term} -> {self.obj.raftCurrentTerm})"
            }
        seconds = time.perf_counter() - t0
        return {
            "entries": n,
            "group": 1,
            "window": window,
            "seconds": seconds,
            "failed": state["failed"],
        }

    def latency(self, ops: int) -> dict[str, Any]:
        add: Callable[..., Any] = self.obj.add
        data = entry()
        samples: list[float] = []
        for _ in range(ops):
            t0 = time.perf_counter()
            add(data, sync=True, timeout=10)
            samples.append(time.perf_counter() - t0)
        return latency_summary(samples)

    def failover_watch(self) -> None:
        from pysyncobj import SyncObjException

        obj = self.obj
        data = entry()
        while True:
            if obj._isLeader():
                try:
                    obj.add(data, sync=True, timeout=2)
                except SyncObjException:
                    continue
                at = time.monotonic()
                self.out.send(
                    {"failover_commit_at": at, "node": self.node_id, "epoch": obj.raftCurrentTerm}
                )
                return
            time.sleep(0.001)


# --- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One node of `kraft bench raft`.")
    parser.add_argument("--impl", choices=["kraft", "pysyncobj"], required=True)
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--peers", required=True, help="1=host:port,2=host:port,3=host:port")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--pysyncobj-conf", choices=["default", "tuned"], default="default")
    parser.add_argument(
        "--raft-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="kraft only: a controller.quorum.* override (repeatable)",
    )
    parser.add_argument(
        "--tls-dir",
        default=None,
        help="kraft only: mTLS with DIR/ca.pem and DIR/node-<id>-keystore.pem",
    )
    args = parser.parse_args(argv)
    out = claim_stdout()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the driver's "where are you?"
    tune_gc()  # as kraft's processes run; PySyncObj's nodes too, so the comparison stays fair
    peers = parse_peers(args.peers)
    properties = dict(p.split("=", 1) for p in args.raft_property)
    if args.impl == "kraft":
        Path(args.data_dir).mkdir(parents=True, exist_ok=True)

        async def run_kraft() -> None:
            await KraftNode(args.id, peers, args.data_dir, out, properties, args.tls_dir).run()

        asyncio.run(run_kraft())
    else:
        PySyncObjNode(args.id, peers, args.pysyncobj_conf, out).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
