"""`run_nemesis`: a fault run on a `LocalCluster` of real processes, checked end to end.

1. Start the cluster with a fault proxy on every link (`LocalCluster(fault_network=True)`),
   create the topic (RF 3, ``min.insync.replicas=2`` unless told otherwise), and start the
   workloads (`replication.nemesis.workload`; with ``metadata_workers`` topics are created,
   deleted and reconfigured alongside, `replication.nemesis.metadata`; with
   ``group_members`` a consumer group reads the topic, members joining and leaving,
   `replication.nemesis.groups`; with ``workload="txn"`` transactional producers and
   read_committed readers over the Kafka listener write and read two topics instead,
   `replication.nemesis.txn_workload`), which record every operation into the `History`
   (``history.jsonl``). With a group, the faults start once it has formed; with
   transactions, once the first one has ended.
2. Play the schedule `plan_faults` drew from the seed: kills, pauses, controlled shutdowns,
   rolling restarts, network partitions, delayed and throttled links, one at a time, each
   healed before the next.
3. Heal everything, wait until the cluster is healthy, stop the producers (what stays
   unacknowledged is indeterminate) and the readers, then read every partition back from its
   log start to its high watermark (`FinalRead`).
4. Record the final metadata and the group's committed offsets, check the history
   (`check_history`, `check_metadata`, `check_groups`, `check_txn_history`), then stop the
   brokers and compare every replica's log below the high watermark, batch for batch
   (``replicas_identical``).

The result goes to ``summary.json`` and a timeline (``timeline.png``); the exit code of
``kraft nemesis`` is non-zero on any violation, and the summary names the seed to replay.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from kraft.cluster.local import LocalCluster
from kraft.types import TopicPartition
from replication.clients.consumer import Consumer
from replication.nemesis.faults import plan_faults
from replication.nemesis.groups import (
    GroupAssign,
    GroupReport,
    GroupWorker,
    check_groups,
    read_final_offsets,
)
from replication.nemesis.history import FinalRead, History, HistoryReport, check_history
from replication.nemesis.links import fault_cluster, links_of
from replication.nemesis.metadata import (
    MetadataReport,
    MetadataWorker,
    MetaOp,
    check_metadata,
    read_final_metadata,
)
from replication.nemesis.player import TOPIC, FaultPlayer
from replication.nemesis.replicas import compare_replica_logs
from replication.nemesis.txn_history import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TxnEnd,
    TxnFinalRead,
    TxnReport,
    check_txn_history,
)
from replication.nemesis.workload import ProducerWorker, ReaderWorker

if TYPE_CHECKING:  # confluent-kafka (a dev extra) is imported only by --workload txn
    from replication.nemesis.txn_copier import TxnCopierWorker
    from replication.nemesis.txn_workload import TxnProducerWorker, TxnReaderWorker

TXN_TOPICS = (TOPIC, f"{TOPIC}-b")
COPY_TOPIC = f"{TOPIC}-copy"
"""Where the transactional workload's copier writes its copies of ``TOPIC``."""
"""The transactional workload's topics (the first is the one partition-0 faults look up)."""
WORKLOADS = ("plain", "txn")

_logger = structlog.get_logger("replication.nemesis")


@dataclass(frozen=True, slots=True, kw_only=True)
class NemesisConfig:
    seed: int = 0
    duration_s: float = 60.0
    faults: tuple[str, ...] = ("kill", "pause", "partition")
    controllers: int = 3
    brokers: int = 3
    partitions: int = 6
    replication_factor: int = 3
    min_insync_replicas: int = 2
    producers: int = 3
    readers: int = 2
    rate_per_producer: float = 200.0
    acks: str = "all"
    unclean: bool = False
    metadata_workers: int = 0
    """Threads creating, deleting and reconfiguring topics (`replication.nemesis.metadata`)."""
    group_members: int = 0
    """Member slots of a consumer group reading the topic (`replication.nemesis.groups`)."""
    workload: str = "plain"
    """``plain``: idempotent producers (kraft's clients, gRPC); ``txn``: transactional
    producers and read_committed readers (confluent-kafka over the Kafka listener,
    `replication.nemesis.txn_workload`), the readers one of ``readers`` read_uncommitted."""
    network: str = "local"
    """``local``: every node on loopback, faults by TCP proxies; ``netns``: every node on a
    host of its own (a network namespace: root only), faults on the hosts' links
    (`replication.nemesis.links`)."""
    out: Path = Path("nemesis-out")


@dataclass(slots=True, kw_only=True)
class AppliedFault:
    """A fault as it happened: when (seconds after the start) and on which nodes."""

    label: str
    kind: str
    start_s: float
    end_s: float = 0.0
    nodes: list[str] = field(default_factory=list)
    error: str = ""


@dataclass(slots=True, kw_only=True)
class NemesisResult:
    config: dict[str, Any]
    faults: list[AppliedFault]
    report: HistoryReport
    metadata: MetadataReport
    groups: GroupReport
    replicas_identical: bool
    replica_problems: list[str]
    seconds: float
    txn: TxnReport = field(default_factory=TxnReport)

    @property
    def valid(self) -> bool:
        return (
            self.report.valid
            and self.txn.valid
            and self.metadata.valid
            and self.groups.valid
            and self.replicas_identical
        )

    def summary(self) -> dict[str, Any]:
        by_kind: dict[str, int] = {}
        for fault in self.faults:
            by_kind[fault.kind] = by_kind.get(fault.kind, 0) + 1
        return {
            "valid": self.valid,
            "seed": self.config["seed"],
            "replay": replay_command(self.config),
            "seconds": round(self.seconds, 1),
            "faults_by_kind": by_kind,
            "faults": [asdict(f) for f in self.faults],
            "history": self.report.as_dict(),
            **({"txn": self.txn.as_dict()} if self.config.get("workload") == "txn" else {}),
            "metadata": self.metadata.as_dict(),
            "groups": self.groups.as_dict(),
            "replicas_identical": self.replicas_identical,
            "replica_problems": self.replica_problems[:20],
            "config": self.config,
        }


def replay_command(config: dict[str, Any]) -> str:
    """The ``kraft nemesis`` command line that replays the schedule of ``config``."""
    defaults = asdict(NemesisConfig())
    flags = {
        "duration_s": "--duration",
        "brokers": "--brokers",
        "partitions": "--partitions",
        "producers": "--producers",
        "readers": "--readers",
        "rate_per_producer": "--rate",
        "acks": "--acks",
        "min_insync_replicas": "--min-insync-replicas",
        "metadata_workers": "--metadata-workers",
        "group_members": "--group-members",
        "workload": "--workload",
        "network": "--network",
    }
    parts = [f"kraft nemesis --seed {config['seed']}", f"--faults {','.join(config['faults'])}"]
    parts += [
        f"{flag} {config[name]:g}" if isinstance(config[name], float) else f"{flag} {config[name]}"
        for name, flag in flags.items()
        if config.get(name, defaults[name]) != defaults[name] or name == "duration_s"
    ]
    if config["unclean"]:
        parts.append("--unclean")
    return " ".join(parts)


def run_nemesis(
    config: NemesisConfig, progress: Callable[[str], None] = lambda _: None
) -> NemesisResult:
    """Run the faults on a fresh cluster and check the history (see the module docstring)."""
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def clock_ms() -> int:
        return int((time.monotonic() - started) * 1000)

    broker_config = {
        "replica.lag.time.max.ms": "3000",
        "unclean.leader.election.enable": "true" if config.unclean else "false",
        # a member cut off by a fault is replaced within seconds, not Kafka's 45 s
        "group.consumer.session.timeout.ms": "6000",
        "group.consumer.heartbeat.interval.ms": "500",
    }
    # NB: --unclean shows what an unclean election of a stale replica loses, as Kafka before
    # 4.0 did it: with eligible leader replicas (KIP-966, on by default) the fenced ISR
    # members stay eligible and the stale replica is never elected.
    controller_config = {"eligible.leader.replicas.enable": "false"} if config.unclean else None
    cluster = fault_cluster(
        config.network,
        controllers=config.controllers,
        brokers=config.brokers,
        data_dir=out / "cluster",
        broker_config=broker_config,
        controller_config=controller_config,
    )
    applied: list[AppliedFault] = []
    with (out / "history.jsonl").open("w") as history_file, cluster:
        history = History(history_file)
        cluster.wait_until_healthy(timeout=60)
        if isinstance(cluster, LocalCluster):
            cluster.use_fault_network()
        txn = config.workload == "txn"
        for topic in (*TXN_TOPICS, COPY_TOPIC) if txn else (TOPIC,):
            cluster.create_topic(
                topic,
                config.partitions,
                config.replication_factor,
                config={
                    "min.insync.replicas": str(config.min_insync_replicas),
                    "unclean.leader.election.enable": "true" if config.unclean else "false",
                },
            )
        producers: list[ProducerWorker | TxnProducerWorker | TxnCopierWorker] = [
            ProducerWorker(
                f"p{i}",
                cluster.bootstrap,
                TOPIC,
                config.partitions,
                history,
                clock_ms,
                rate_per_s=config.rate_per_producer,
                acks=config.acks,
            )
            for i in range(config.producers)
            if not txn
        ]
        readers: list[ReaderWorker | TxnReaderWorker] = [
            ReaderWorker(f"r{i}", cluster.bootstrap, TOPIC, config.partitions, history, clock_ms)
            for i in range(config.readers)
            if not txn
        ]
        kafka_bootstrap = cluster.kafka_bootstrap
        if txn:
            producers, readers = _txn_workers(config, kafka_bootstrap, history, clock_ms)
        history_record: Callable[[Any], None] = history.record
        metadata_workers = [
            MetadataWorker(
                f"m{i}",
                cluster.bootstrap,
                history_record,
                clock_ms,
                seed=config.seed * 1000 + i,
                replication_factor=min(config.replication_factor, config.brokers),
            )
            for i in range(config.metadata_workers)
        ]
        group_workers = [
            GroupWorker(
                f"g{i}",
                cluster.bootstrap,
                TOPIC,
                history_record,
                clock_ms,
                seed=config.seed * 1000 + 500 + i,
            )
            for i in range(config.group_members)
        ]
        for worker in (*producers, *readers, *metadata_workers, *group_workers):
            worker.start()
        # The faults start once the group has formed (its coordinator loads the first time a
        # member asks; that took ~30 s on 2 loaded cores), or the first transaction ended (the
        # transaction coordinators likewise): the schedule is shifted by it.
        offset_s = 0.0
        if group_workers:
            offset_s = _wait_for_first(
                history, GroupAssign, "the consumer group to form", started, progress
            )
        elif txn:
            offset_s = _wait_for_first(history, TxnEnd, "a first transaction", started, progress)
        links = links_of(cluster, config.seed)
        player = FaultPlayer(cluster, history, links, unclean=config.unclean)
        schedule = plan_faults(
            config.seed,
            config.duration_s,
            config.faults,
            controllers=cluster.controller_ids,
            brokers=cluster.broker_ids,
        )
        for fault in schedule:
            sleep_until(started, offset_s + fault.start_s)
            record = AppliedFault(label=fault.label, kind=fault.kind, start_s=_since(started))
            progress(f"{record.start_s:6.1f}s  {fault.label}")
            try:
                record.nodes = player.apply(fault)
                sleep_until(started, offset_s + fault.end_s)
                player.undo(fault, record.nodes)
            except Exception as e:
                record.error = f"{type(e).__name__}: {str(e)[:200]}"
                _logger.warning("nemesis_fault_failed", fault=fault.label, error=record.error)
            record.end_s = _since(started)
            applied.append(record)
        sleep_until(started, offset_s + config.duration_s)
        progress(f"{_since(started):6.1f}s  healing everything")
        player.heal_all()
        cluster.wait_until_healthy(timeout=90)
        for producer in producers:
            producer.stop(flush_timeout_s=60)
        for reader in readers:
            reader.stop()
        for group_worker in group_workers:
            group_worker.stop()
        for metadata_worker in metadata_workers:
            metadata_worker.stop()
        progress(f"{_since(started):6.1f}s  reading every partition back")
        finals: list[FinalRead] | list[TxnFinalRead] = (
            _final_txn_reads(kafka_bootstrap, config.partitions, clock_ms)
            if txn
            else _final_reads(cluster.bootstrap, config.partitions, clock_ms)
        )
        for final in finals:
            history.record(final)
        if metadata_workers:
            created = [op.topic for op in history.operations if isinstance(op, MetaOp)]
            history.record(read_final_metadata(cluster.bootstrap, created, clock_ms))
        if group_workers:
            history.record(read_final_offsets(cluster.bootstrap, TOPIC, clock_ms))
        if txn:
            from replication.nemesis.txn_copier import read_group_offsets

            history.record(read_group_offsets(kafka_bootstrap, TOPIC, config.partitions, clock_ms))
        history_file.flush()
        report = check_history(history.operations)
        metadata_report = check_metadata(history.operations)
        group_report = check_groups(history.operations, TOPIC)
        txn_report = check_txn_history(history.operations)
        high_watermarks: dict[str, dict[int, int]] = {}
        for op in history.operations:
            if isinstance(op, FinalRead):
                high_watermarks.setdefault(op.topic, {})[op.partition] = op.high_watermark
            elif isinstance(op, TxnFinalRead):
                high_watermarks.setdefault(op.topic, {})[op.partition] = op.end_offset
        for broker in cluster.broker_ids:
            cluster.stop_broker(broker)
        problems = [
            problem
            for topic, ends in high_watermarks.items()
            for problem in compare_replica_logs(
                {b: cluster.broker_data_dir(b) for b in cluster.broker_ids}, topic, ends
            )
        ]
    result = NemesisResult(
        config={**asdict(config), "out": str(config.out)},
        faults=applied,
        report=report,
        metadata=metadata_report,
        groups=group_report,
        replicas_identical=not problems,
        replica_problems=problems,
        seconds=time.monotonic() - started,
        txn=txn_report,
    )
    (out / "summary.json").write_text(json.dumps(result.summary(), indent=2, default=str))
    try:
        from replication.nemesis.timeline import plot_timeline

        plot_timeline(history.operations, applied, out / "timeline.png")
    except ImportError:  # matplotlib is an optional extra
        _logger.warning("nemesis_timeline_skipped", reason="matplotlib not installed")
    return result


def _txn_workers(
    config: NemesisConfig, kafka_bootstrap: str, history: History, clock_ms: Callable[[], int]
) -> tuple[
    list[ProducerWorker | TxnProducerWorker | TxnCopierWorker],
    list[ReaderWorker | TxnReaderWorker],
]:
    """The transactional workload's producers and readers (the last reader read_uncommitted,
    as a contrast, when there are two or more)."""
    from replication.nemesis.txn_copier import TxnCopierWorker
    from replication.nemesis.txn_workload import TxnProducerWorker, TxnReaderWorker

    producers: list[ProducerWorker | TxnProducerWorker | TxnCopierWorker] = [
        TxnProducerWorker(
            f"t{i}",
            kafka_bootstrap,
            TXN_TOPICS,
            config.partitions,
            history,
            clock_ms,
            seed=config.seed * 1000 + 700 + i,
            rate_per_s=config.rate_per_producer,
        )
        for i in range(config.producers)
    ]
    producers.append(TxnCopierWorker("c0", kafka_bootstrap, TOPIC, COPY_TOPIC, history, clock_ms))
    readers: list[ReaderWorker | TxnReaderWorker] = [
        TxnReaderWorker(
            f"{'ru' if i == config.readers - 1 and i > 0 else 'rc'}{i}",
            kafka_bootstrap,
            TXN_TOPICS,
            config.partitions,
            history,
            clock_ms,
            isolation=READ_UNCOMMITTED if i == config.readers - 1 and i > 0 else READ_COMMITTED,
        )
        for i in range(config.readers)
    ]
    return producers, readers


def _final_txn_reads(
    kafka_bootstrap: str, partitions: int, clock_ms: Callable[[], int]
) -> list[TxnFinalRead]:
    from replication.nemesis.txn_workload import final_txn_reads

    return final_txn_reads(kafka_bootstrap, (*TXN_TOPICS, COPY_TOPIC), partitions, clock_ms)


def _final_reads(bootstrap: str, partitions: int, clock_ms: Callable[[], int]) -> list[FinalRead]:
    """Every partition from its log start to its high watermark."""
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    finals: list[FinalRead] = []
    with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=20_000) as consumer:
        consumer.assign(tps)
        consumer.seek_to_end(tps)
        ends = {tp: consumer.position(tp, timeout=60) for tp in tps}
        consumer.seek_to_beginning(tps)
        starts = {tp: consumer.position(tp, timeout=60) for tp in tps}
        records: dict[TopicPartition, list[tuple[int, str]]] = {tp: [] for tp in tps}
        deadline = time.monotonic() + 120
        remaining = {tp for tp in tps if starts[tp] < ends[tp]}
        while remaining:
            if time.monotonic() > deadline:
                raise TimeoutError(f"final read incomplete: {sorted(map(str, remaining))}")
            for r in consumer.poll(timeout=1.0):
                tp = TopicPartition(r.topic, r.partition)
                if r.offset < ends[tp]:
                    records[tp].append((r.offset, (r.value or b"").decode(errors="replace")))
            for tp in list(remaining):
                if consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
        now = clock_ms()
        for tp in tps:
            finals.append(
                FinalRead(
                    time_ms=now,
                    topic=TOPIC,
                    partition=tp.partition,
                    log_start_offset=starts[tp],
                    high_watermark=ends[tp],
                    records=tuple(records[tp]),
                )
            )
    return finals


def _wait_for_first(
    history: History,
    kind: type[GroupAssign | TxnEnd],
    what: str,
    started: float,
    progress: Callable[[str], None],
    timeout_s: float = 90.0,
) -> float:
    """Wait until the history holds an operation of ``kind`` (at most ``timeout_s``); the
    seconds since ``started``."""
    progress(f"{_since(started):6.1f}s  waiting for {what}")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(isinstance(op, kind) for op in history.operations):
            break
        threading.Event().wait(0.2)
    else:
        _logger.warning("nemesis_workload_not_started", waited_for=what, timeout_s=timeout_s)
    return _since(started)


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def sleep_until(started: float, at_s: float) -> None:
    delay = started + at_s - time.monotonic()
    if delay > 0:
        threading.Event().wait(delay)


__all__ = [
    "TOPIC",
    "AppliedFault",
    "NemesisConfig",
    "NemesisResult",
    "run_nemesis",
    "sleep_until",
]
