"""Where a benchmark run's CPU went: user + system seconds of this process (per thread, from
/proc) and of a local cluster's brokers during a timed block, as µs per record; and, under
``KRAFT_PROFILE_DIR``, cProfile of the client's threads with a SIGUSR2 dump of each broker's
profile around the block. Used by ``kraft bench produce/consume`` and the benches built on it.
And, for the side-by-side benches (``--against kafka``, ``kraft compare``), `nodes_cpu`: the
CPU per record of every node of a kraft or Apache Kafka cluster (`kraft_pids`, `kafka_pids`)
and their resident memory.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import pstats
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kraft.profiling import PROFILE_DIR_ENV


class ClientProfile:
    """cProfile of every thread of this process (the caller, the producer's sender, gRPC's
    callback threads) while a timed run lasts; written as ``client-<name>.pstats``."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _hook(self, *_: object) -> None:
        # The first profile event of a new thread: give the thread its own profiler.
        profile = cProfile.Profile()
        with self._lock:
            self._profiles.append(profile)
        profile.enable()

    @contextlib.contextmanager
    def run(self, name: str) -> Iterator[None]:
        self._profiles = []
        threading.setprofile(self._hook)
        main = cProfile.Profile()
        self._profiles.append(main)
        main.enable()
        try:
            yield
        finally:
            main.disable()
            threading.setprofile(None)
            self._directory.mkdir(parents=True, exist_ok=True)
            with self._lock:
                profiles = list(self._profiles)
            stats = pstats.Stats(profiles[0])
            for other in profiles[1:]:
                with contextlib.suppress(TypeError):  # a thread that never called anything
                    stats.add(other)
            stats.dump_stats(self._directory / f"client-{name}.pstats")


def signal_brokers(cluster: Any) -> None:
    """SIGUSR2 to every broker of a local cluster run under KRAFT_PROFILE_DIR: each writes
    the profile since its previous dump and starts a fresh one."""
    for broker_id in cluster.broker_ids:
        pid = cluster.broker(broker_id).pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR2)
    time.sleep(0.5)


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc), None if unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _thread_cpu_s() -> dict[int, tuple[str, float]]:
    """tid -> (name, user + system CPU seconds) of every thread of this process (Linux
    /proc/self/task; empty elsewhere). Python threads are named by their ``threading`` name,
    native ones (gRPC's C core) by their kernel name."""
    names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    main = threading.main_thread().native_id
    out: dict[int, tuple[str, float]] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    tick = os.sysconf("SC_CLK_TCK")
    for tid_text in tids:
        try:
            stat = Path(f"/proc/self/task/{tid_text}/stat").read_text()
        except OSError:
            continue
        tid = int(tid_text)
        comm, _, rest = stat.partition("(")[2].rpartition(")")
        fields = rest.split()
        name = "main (send + harness)" if tid == main else names.get(tid, f"native: {comm}")
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return out


def _thread_figures(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> dict[str, float]:
    """CPU seconds per thread name (threads of one name summed) from ``before`` to ``after``
    (`_thread_cpu_s` snapshots; a thread that ended in between is not counted)."""
    spent: dict[str, float] = {}
    for tid, (name, cpu) in after.items():
        base = before.get(tid, (name, 0.0))[1]
        if name.startswith("Thread-") or name.startswith("ThreadPoolExecutor"):
            name = "python threads (gRPC callbacks)"
        spent[name] = round(spent.get(name, 0.0) + cpu - base, 3)
    return {k: v for k, v in sorted(spent.items(), key=lambda kv: -kv[1]) if v > 0}


@contextlib.contextmanager
def cpu_time(out: dict[str, Any], cluster: Any) -> Iterator[None]:
    """CPU seconds spent during the block by this process (the client, all its threads) and
    by every broker of a local cluster; stored into ``out["cpu_s"]``. On a shared, loaded
    machine these are steadier than records/s: they are what a record costs, not how much
    of the cores the run got."""
    pids = {}
    if cluster is not None:
        for broker_id in cluster.broker_ids:
            pid = cluster.broker(broker_id).pid
            if pid is not None:
                pids[f"broker-{broker_id}"] = pid
    before_client = os.times()
    before_threads = _thread_cpu_s()
    before = {name: process_cpu_s(pid) for name, pid in pids.items()}
    yield
    after_client = os.times()
    out["client_threads_before"] = before_threads
    cpu: dict[str, float] = {
        "client": round(
            after_client.user + after_client.system - before_client.user - before_client.system, 3
        )
    }
    for name, pid in pids.items():
        start, end = before[name], process_cpu_s(pid)
        if start is not None and end is not None:
            cpu[name] = round(end - start, 3)
    out["cpu_s"] = cpu


@contextlib.contextmanager
def profiled(name: str, cluster: Any) -> Iterator[None]:
    """Profile the client and (local cluster) the brokers for the duration of a timed run."""
    directory = os.environ.get(PROFILE_DIR_ENV)
    if not directory:
        yield
        return
    if cluster is not None:
        signal_brokers(cluster)  # everything before the run goes into the previous dump
    with ClientProfile(Path(directory)).run(name):
        yield
    if cluster is not None:
        signal_brokers(cluster)


def _cpu_figures(cpu: dict[str, Any], records: int, run: dict[str, Any]) -> dict[str, Any]:
    """CPU µs per record: the client's (also per thread), and the brokers' summed (all three
    replicas)."""
    spent = cpu.get("cpu_s", {})
    brokers = sum(v for k, v in spent.items() if k.startswith("broker-"))
    end = run.pop("_threads_at_end", None)
    threads = _thread_figures(cpu["client_threads_before"], end) if end else {}
    return {
        "cpu_s": spent,
        "client_threads_cpu_us_per_record": {
            k: round(v / records * 1e6, 2) for k, v in threads.items()
        },
        "client_cpu_us_per_record": round(spent.get("client", 0.0) / records * 1e6, 2),
        "brokers_cpu_us_per_record": round(brokers / records * 1e6, 2) if brokers else None,
    }


# -- every node of a cluster: kraft's or Apache Kafka's -------------------------------------------


def kraft_pids(cluster: Any) -> dict[str, int]:
    """``controller-N`` / ``broker-N`` -> pid of every running node of a `LocalCluster`."""
    pids = {}
    for node_id in cluster.controller_ids:
        pid = cluster.controller(node_id).pid
        if pid is not None:
            pids[f"controller-{node_id}"] = pid
    for broker_id in cluster.broker_ids:
        pid = cluster.broker(broker_id).pid
        if pid is not None:
            pids[f"broker-{broker_id}"] = pid
    return pids


def kafka_pids(cluster: Any) -> dict[str, int]:
    """The same for an Apache Kafka `kraft.peer.KafkaCluster` (its JVMs)."""
    return {cluster.node_name(i): pid for i, pid in cluster.pids().items()}


def rss_mib(pid: int, field: str = "VmRSS") -> float | None:
    """Resident memory of ``pid`` in MiB, None if unknown: now (``VmRSS``), or another memory
    line of ``/proc/PID/status`` (``VmHWM``: its peak)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


@contextlib.contextmanager
def nodes_cpu(out: dict[str, Any], pids: dict[str, int], records: int) -> Iterator[None]:
    """CPU seconds of every node in ``pids`` together and of this process (its children
    included) during the block, as µs per record (``servers_cpu_us_per_record``,
    ``client_cpu_us_per_record``), and each node's resident memory after it (``rss_mib``)."""
    before = {name: process_cpu_s(pid) for name, pid in pids.items()}
    client_before = os.times()
    yield
    client_after = os.times()
    spent = {}
    for name, pid in pids.items():
        start, end = before[name], process_cpu_s(pid)
        if start is not None and end is not None:
            spent[name] = round(end - start, 3)
    # NB: children too: a perf test's JVM is a child, waited for within the block.
    client = sum(client_after[:4]) - sum(client_before[:4])
    out["cpu_s"] = spent | {"client": round(client, 3)}
    out["servers_cpu_us_per_record"] = round(sum(spent.values()) / records * 1e6, 2)
    out["client_cpu_us_per_record"] = round(client / records * 1e6, 2)
    out["rss_mib"] = {name: rss_mib(pid) for name, pid in pids.items()}
