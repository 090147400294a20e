"""`run_soak`: a long steady load with a fault every N seconds, watched from /proc (issue 29).

1. Start a cluster (``netns``: one network namespace per node, `NetnsCluster`; ``local``:
   loopback with fault proxies, `LocalCluster`), create the topic (RF 3,
   ``min.insync.replicas=2``, ``partitions`` of them).
2. Run a steady idempotent acks=all producer (``rate`` records/s, values ``<sequence>``, to
   partition ``sequence % partitions``; it remembers the offset of each acknowledged record)
   and a consumer group member that reads and commits (KIP-848).
3. Once a second sample the records acknowledged and consumed so far and, from /proc, each
   node's resident memory, open descriptors and threads (its data directory's size every
   10 s).
4. Every ``fault_every_s`` seconds inject one fault drawn from ``seed`` (the nemesis's kinds
   and `FaultPlayer`), lasting ``fault_seconds``, then heal it.
5. At the end: heal, stop the producer (what stays unacknowledged is not checked), read
   every partition back and check that every acknowledged record is at its offset with its
   value. Write ``samples.jsonl``, ``summary.json`` and ``soak.png`` (`plot_soak`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import structlog

from kraft.cluster.local import LocalCluster
from kraft.cluster.netns_cluster import NetnsCluster
from kraft.types import TopicPartition
from replication.clients.consumer import Consumer
from replication.clients.producer import Producer
from replication.nemesis.faults import draw_fault
from replication.nemesis.history import History
from replication.nemesis.links import fault_cluster, links_of
from replication.nemesis.player import FaultPlayer
from replication.nemesis.run import sleep_until
from replication.nemesis.soak_report import (
    FaultSpan,
    NodeSample,
    Sample,
    memory_by_fault,
    node_slopes,
    plot_soak,
    rates,
    recoveries,
    stalled_seconds,
    steady_rate,
)

TOPIC: Final = "soak"
GROUP: Final = "soak"
MAX_OUTSTANDING: Final = 5_000
"""Records the producer lets wait for their acknowledgement before it pauses sending."""
DISK_EVERY_S: Final = 10.0
READ_CHUNK: Final = 100
"""Partitions read back at once at the end (memory stays bounded by a chunk's records)."""

_logger = structlog.get_logger("replication.nemesis.soak")


@dataclass(frozen=True, slots=True, kw_only=True)
class SoakConfig:
    network: str = "netns"
    minutes: float = 30.0
    partitions: int = 1000
    fault_every_s: float = 30.0
    fault_seconds: float = 10.0
    rate: float = 1000.0
    """Records/s the producer offers."""
    faults: tuple[str, ...] = ("partition", "loss", "delay", "bandwidth", "kill", "pause")
    seed: int = 0
    controllers: int = 3
    brokers: int = 3
    warmup_s: float = 60.0
    """What the slopes leave out (the cluster and the clients settling)."""
    out: Path = Path("soak-out")
    broker_config: dict[str, str] = field(default_factory=dict)
    controller_config: dict[str, str] = field(default_factory=dict)
    """Properties for every node of that role (over the soak's own broker settings)."""


@dataclass(slots=True, kw_only=True)
class SoakResult:
    config: dict[str, Any]
    seconds: float
    acknowledged: int
    lost: int
    lost_examples: list[str]
    consumed: int
    faults: list[dict[str, Any]]
    steady_records_per_s: float
    recovery_s: list[float | None]
    stalled_s: int = 0
    """Seconds after the warm-up with nothing acknowledged (during faults or not)."""
    slopes: dict[str, dict[str, float]] = field(default_factory=dict)
    """Host -> {rss, fds} in percent per 10 minutes after the warm-up, the same over the
    second half (``rss_late``, ``fds_late``), its descriptors (``fds_start``, ``fds_end``,
    ``fds_max``) and its ``restarts`` (`node_slopes`)."""
    memory_by_fault: dict[str, dict[str, float]] = field(default_factory=dict)
    """Fault kind -> {role: mean change of a node's resident MiB over a fault and the quiet
    time after it, ``faults``: how many} (`memory_by_fault`)."""
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)
    unhealthy_at_end: str = ""
    """Why the cluster was not healthy 120 s after the last heal ("": it was); the records
    are read back all the same."""

    @property
    def valid(self) -> bool:
        return self.lost == 0


class _SteadyProducer(threading.Thread):
    """Sends ``rate`` records/s; per partition, the (offset, sequence) of each acknowledged
    record, in compact arrays."""

    def __init__(self, bootstrap: str, partitions: int, rate: float) -> None:
        super().__init__(name="soak-producer", daemon=True)
        self.partitions = partitions
        self.interval_s = 1.0 / rate
        self.stopping = threading.Event()
        self.outstanding = threading.Semaphore(MAX_OUTSTANDING)
        self.acknowledged = 0
        self.failed = 0
        self.offsets = [array("q") for _ in range(partitions)]
        self.sequences = [array("q") for _ in range(partitions)]
        self.producer = Producer(
            bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=5_000,
            delivery_timeout_ms=120_000,
        )

    def run(self) -> None:
        sequence = 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            delay = next_at - time.monotonic()
            if delay > 0 and self.stopping.wait(delay):
                break
            next_at = max(next_at + self.interval_s, time.monotonic() - 1.0)
            if not self.outstanding.acquire(timeout=0.5):
                continue
            partition = sequence % self.partitions
            try:
                future = self.producer.send(TOPIC, str(sequence).encode(), partition=partition)
            except Exception:  # a full buffer, a closed producer: not sent, not acknowledged
                self.outstanding.release()
                self.failed += 1
                continue
            future.add_done_callback(
                lambda f, s=sequence, p=partition: self._done(f, s, p)  # type: ignore[misc]
            )
            sequence += 1

    def _done(self, future: Any, sequence: int, partition: int) -> None:
        self.outstanding.release()
        if future.exception() is not None:
            self.failed += 1
            return
        self.offsets[partition].append(future.result().offset)
        self.sequences[partition].append(sequence)
        self.acknowledged += 1

    def stop(self) -> None:
        self.stopping.set()
        self.join(10)
        with contextlib.suppress(Exception):
            self.producer.flush(120)
        self.producer.close(10)


class _GroupReader(threading.Thread):
    """One consumer-group member reading the topic and committing every few seconds; it
    starts a new consumer when one fails."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="soak-group", daemon=True)
        self.bootstrap = bootstrap
        self.stopping = threading.Event()
        self.consumed = 0
        self.restarts = 0

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                with Consumer(
                    self.bootstrap,
                    group_id=GROUP,
                    enable_auto_commit=False,
                    auto_offset_reset="earliest",
                ) as consumer:
                    consumer.subscribe([TOPIC])
                    committed = time.monotonic()
                    while not self.stopping.is_set():
                        self.consumed += len(consumer.poll(0.5))
                        if time.monotonic() - committed > 5:
                            consumer.commit(asynchronous=True)
                            committed = time.monotonic()
            except Exception as e:
                self.restarts += 1
                _logger.warning("soak_group_reader_restarts", error=str(e)[:200])
                self.stopping.wait(1.0)

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)


def _proc_figures(pid: int) -> tuple[int, int, int] | None:
    """(resident bytes, open descriptors, threads) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        rss = int(fields["VmRSS"].split()[0]) * 1024
        threads = int(fields["Threads"])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, KeyError, ValueError):
        return None
    return rss, fds, threads


def _disk_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, name)).st_size
    return total


class _Sampler(threading.Thread):
    def __init__(
        self,
        started: float,
        nodes: Callable[[], dict[str, tuple[int | None, Path]]],
        producer: _SteadyProducer,
        reader: _GroupReader,
        out: Path,
    ) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.started, self.nodes, self.producer, self.reader = started, nodes, producer, reader
        self.samples: list[Sample] = []
        self.stopping = threading.Event()
        self._file = out.open("w")

    def run(self) -> None:
        disk: dict[str, int] = {}
        disk_at = 0.0
        next_at = time.monotonic()
        while not self.stopping.wait(max(0.0, next_at - time.monotonic())):
            next_at += 1.0
            now = time.monotonic()
            nodes = self.nodes()
            if now - disk_at >= DISK_EVERY_S:
                disk = {host: _disk_bytes(path) for host, (_, path) in nodes.items()}
                disk_at = now
            figures: dict[str, NodeSample] = {}
            for host, (pid, _) in nodes.items():
                got = _proc_figures(pid) if pid else None
                if pid and got is not None:
                    rss, fds, threads = got
                    figures[host] = NodeSample(
                        pid=pid,
                        rss_bytes=rss,
                        fds=fds,
                        threads=threads,
                        disk_bytes=disk.get(host, 0),
                    )
            sample = Sample(
                t_s=round(now - self.started, 3),
                acknowledged=self.producer.acknowledged,
                consumed=self.reader.consumed,
                nodes=figures,
            )
            self.samples.append(sample)
            self._file.write(json.dumps(asdict(sample)) + "\n")
            self._file.flush()

    def stop(self) -> None:
        self.stopping.set()
        self.join(10)
        self._file.close()


def _check_acknowledged(
    bootstrap: str, producer: _SteadyProducer, partitions: int
) -> tuple[int, list[str]]:
    """Read every partition back; the acknowledged records not at their offset with their
    value (count, first examples)."""
    lost = 0
    examples: list[str] = []
    for first in range(0, partitions, READ_CHUNK):
        tps = [TopicPartition(TOPIC, p) for p in range(first, min(partitions, first + READ_CHUNK))]
        with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=20_000) as c:
            c.assign(tps)
            c.seek_to_end(tps)
            ends = {tp: c.position(tp, timeout=60) for tp in tps}
            c.seek_to_beginning(tps)
            read: dict[int, dict[int, bytes]] = {tp.partition: {} for tp in tps}
            remaining = {tp for tp in tps if c.position(tp, timeout=60) < ends[tp]}
            deadline = time.monotonic() + 300
            while remaining:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"final read incomplete: {sorted(map(str, remaining))[:5]}")
                for r in c.poll(1.0):
                    read[r.partition][r.offset] = r.value or b""
                remaining = {tp for tp in remaining if c.position(tp) < ends[tp]}
        for tp in tps:
            got = read[tp.partition]
            offsets, sequences = producer.offsets[tp.partition], producer.sequences[tp.partition]
            for offset, sequence in zip(offsets, sequences, strict=True):
                if got.get(offset) != str(sequence).encode():
                    lost += 1
                    if len(examples) < 10:
                        examples.append(
                            f"{tp}@{offset}: acknowledged {sequence}, read {got.get(offset)!r}"
                        )
    return lost, examples


def run_soak(config: SoakConfig, progress: Callable[[str], None] = lambda _: None) -> SoakResult:
    """Run the soak (see the module docstring)."""
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    broker_config = {
        "replica.lag.time.max.ms": "5000",
        "group.consumer.session.timeout.ms": "10000",
        "group.consumer.heartbeat.interval.ms": "1000",
    }
    cluster = fault_cluster(
        config.network,
        controllers=config.controllers,
        brokers=config.brokers,
        data_dir=out / "cluster",
        broker_config={**broker_config, **config.broker_config},
        controller_config=config.controller_config,
    )
    duration_s = config.minutes * 60
    rng = random.Random(config.seed)
    applied: list[FaultSpan] = []
    with cluster:
        cluster.wait_until_healthy(timeout=120)
        if isinstance(cluster, LocalCluster):
            cluster.use_fault_network()
        progress(f"creating {TOPIC} with {config.partitions} partitions")
        cluster.create_topic(
            TOPIC, config.partitions, 3, config={"min.insync.replicas": "2"}, timeout=300
        )
        producer = _SteadyProducer(cluster.bootstrap, config.partitions, config.rate)
        reader = _GroupReader(cluster.bootstrap)
        started = time.monotonic()
        sampler = _Sampler(
            started, lambda: _nodes(cluster), producer, reader, out / "samples.jsonl"
        )
        for thread in (producer, reader, sampler):
            thread.start()
        player = FaultPlayer(
            cluster, History(), links_of(cluster, config.seed), unclean=False, topic=TOPIC
        )
        k = 1
        while (at := k * config.fault_every_s) + config.fault_seconds < duration_s:
            sleep_until(started, at)
            fault = draw_fault(
                rng,
                rng.choice(list(config.faults)),
                at,
                at + config.fault_seconds,
                cluster.controller_ids,
                cluster.broker_ids,
            )
            begin = time.monotonic() - started
            progress(
                f"{begin:7.1f}s  {fault.label}  ({producer.acknowledged:,} acknowledged, "
                f"{reader.consumed:,} consumed)"
            )
            label = fault.label
            try:
                nodes = player.apply(fault)
                label += "".join(f" {n}" for n in nodes if n.startswith("by:"))
                sleep_until(started, at + config.fault_seconds)
                player.undo(fault, nodes)
            except Exception as e:
                label += f" (failed: {type(e).__name__})"
                _logger.warning("soak_fault_failed", fault=fault.label, error=str(e)[:200])
            applied.append(FaultSpan(label=label, start_s=begin, end_s=time.monotonic() - started))
            k += 1
        sleep_until(started, duration_s)
        progress(f"{time.monotonic() - started:7.1f}s  healing, stopping the load")
        player.heal_all()
        unhealthy = ""
        try:
            cluster.wait_until_healthy(timeout=120)
        except TimeoutError as e:  # read back all the same: the figures are still the run's
            unhealthy = str(e)[:500]
            progress(f"not healthy after the heal; reading back all the same: {unhealthy}")
        sampler.stop()
        producer.stop()
        reader.stop()
        progress(f"reading {config.partitions} partitions back")
        lost, examples = _check_acknowledged(cluster.bootstrap, producer, config.partitions)
    samples = sampler.samples
    series = [(t, a) for t, a, _ in rates(samples)]
    steady = steady_rate(series, applied, config.warmup_s)
    slopes = node_slopes(samples, config.warmup_s)
    result = SoakResult(
        config={**asdict(config), "out": str(out)},
        seconds=round(samples[-1].t_s if samples else 0.0, 1),
        acknowledged=producer.acknowledged,
        lost=lost,
        lost_examples=examples,
        consumed=reader.consumed,
        faults=[asdict(f) for f in applied],
        steady_records_per_s=round(steady, 1),
        recovery_s=recoveries(series, applied, steady),
        stalled_s=stalled_seconds(series, config.warmup_s),
        slopes=slopes,
        memory_by_fault=memory_by_fault(samples, applied, config.warmup_s),
        load_average=os.getloadavg(),
        unhealthy_at_end=unhealthy,
    )
    (out / "summary.json").write_text(json.dumps(asdict(result), indent=2))
    try:
        title = (
            f"kraft soak: {config.network}, {config.partitions} partitions, {config.rate:g} "
            f"records/s offered, a fault every {config.fault_every_s:g} s (shaded); "
            f"load average at the end {result.load_average[1]:.1f}"
        )
        plot_soak(samples, applied, out / "soak.png", title)
    except ImportError:
        _logger.warning("soak_plot_skipped", reason="matplotlib not installed")
    return result


def _nodes(cluster: LocalCluster | NetnsCluster) -> dict[str, tuple[int | None, Path]]:
    """Host name -> (pid of its process, its data directory)."""
    if isinstance(cluster, NetnsCluster):
        return {
            cluster.host_name(i): (p.pid if p.is_running() else None, cluster.data_path(i))
            for i, p in cluster.processes.items()
        }
    nodes: dict[str, tuple[int | None, Path]] = {}
    for i in cluster.controller_ids:
        p = cluster.controller(i)
        nodes[f"controller-{i}"] = (
            p.pid if p.is_running() else None,
            cluster.controller_data_dir(i),
        )
    for b in cluster.broker_ids:
        p = cluster.broker(b)
        nodes[f"broker-{b}"] = (p.pid if p.is_running() else None, cluster.broker_data_dir(b))
    return nodes


__all__ = ["GROUP", "TOPIC", "SoakConfig", "SoakResult", "run_soak"]
