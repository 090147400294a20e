"""One seed of the transactional workload (`replication.sim.txn`), a range of seeds, and
``kraft sim cluster --workload transactions``.

``kraft sim cluster --workload transactions --seeds 100 --start 0 [--mode quorum]`` runs a
range; ``--seed X`` replays one.

A run: the cluster of ``kraft sim cluster`` (three controllers, ``brokers`` brokers, one topic
of ``partitions`` partitions, RF=3, min.insync.replicas=2), the transaction coordinator, three
transactional producers writing to that topic, a copier (``txn_copier.py``) copying it to the
output topic with its group's offsets in ``__consumer_offsets``, and one read_committed
consumer per partition of both topics. From
``FAULTS_START_MS`` to ``faults_end_ms`` the broker nemesis (crashes, power losses, pauses,
partitions, packet loss) and coordinator failovers strike; then everything heals and the run
must show liveness: within ``LIVENESS_BOUND_MS`` every producer ends a transaction after the
heal, every transaction is decided and its markers written, every partition's LSO
reaches its high watermark and the consumers read up to it, and the copier has copied every
committed source record. Then every record of every committed transaction must have been
read, and the copies must agree with the group's committed offsets (`TxnChecker`); the other
invariants are checked as the records are read. The replication invariants
(`ClusterChecker`) hold as in every run.
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass, field

from kraft.sim.checker import InvariantViolated
from kraft.sim.network import LinkProfile
from kraft.sim.seeds import report_seed, report_summary, run_guarded, run_seed_jobs
from kraft.types import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, TopicPartition
from replication.sim.admin import TopicCreator
from replication.sim.checker import ClusterChecker
from replication.sim.cluster import BrokerCluster
from replication.sim.controller import TOPIC, ClusterConfig
from replication.sim.group_offsets import OFFSETS_PARTITIONS, offset_fetch, offsets_partition
from replication.sim.run import FAULTS_END_MS, FAULTS_START_MS, SETTLE_STEP_MS
from replication.sim.txn import TxnChecker, TxnCoordinatorHost, TxnNemesis, leader_lso
from replication.sim.txn_clients import ReadCommittedConsumer, TxnProducer
from replication.sim.txn_copier import COPIES_TOPIC, GROUP_ID, TxnCopier
from replication.sim.workload import CLIENT_BASE_ID, Nemesis
from storage.errors import ErrorCode

LIVENESS_BOUND_MS = 15_000
"""After the heal: a stuck transaction times out (1.5 s), the broker liveness of ``kraft sim
cluster`` (up to ~3 s), then markers, a transaction begun after the heal, and the reads; and
the copier's transactions, which follow the producers' last ones. The link's loss stays on
after the heal, so a client's request may wait out its 400 ms timeout and an append of the
coordinator its 800 ms deadline and a reload: seed 0xf4 (ISR) needed 12.7 s, five of its
coordinator's appends unanswered after the heal."""

PRODUCERS = 3
COORDINATOR_ID = CLIENT_BASE_ID + 50


@dataclass(slots=True, kw_only=True)
class TxnSeedResult:
    seed: int
    brokers: int
    partitions: int
    mode: str = "isr"
    events: int = 0
    sim_time_ms: int = 0
    faults: int = 0
    coordinator_failovers: int = 0
    coordinator_reloads: int = 0
    committed: int = 0
    aborted: int = 0
    decided: int = 0
    committed_records: int = 0
    read: int = 0
    skipped: int = 0
    markers: int = 0
    copies: int = 0
    """Committed copies the copier made (each checked against the group's offsets)."""
    copier_committed: int = 0
    copier_aborted: int = 0
    offset_commits: int = 0
    """TxnOffsetCommits appended to ``__consumer_offsets`` (committed or aborted after)."""
    copier_rewinds: int = 0
    copier_crashes: int = 0
    violation: str | None = None

    @property
    def replay(self) -> str:
        mode = f" --mode {self.mode}" if self.mode != "isr" else ""
        return (
            f"kraft sim cluster --workload transactions --seed {self.seed:#x} "
            f"--brokers {self.brokers} --partitions {self.partitions}{mode}"
        )

    def line(self) -> str:
        return (
            f"seed={self.seed:#x} brokers={self.brokers} partitions={self.partitions} "
            f"faults={self.faults} coordinator_failovers={self.coordinator_failovers} "
            f"coordinator_reloads={self.coordinator_reloads} "
            f"committed={self.committed} aborted={self.aborted} decided={self.decided} "
            f"committed_records={self.committed_records} read={self.read} "
            f"aborted_records_skipped={self.skipped} markers={self.markers} "
            f"copies={self.copies} copier_committed={self.copier_committed} "
            f"copier_aborted={self.copier_aborted} offset_commits={self.offset_commits} "
            f"copier_rewinds={self.copier_rewinds} copier_crashes={self.copier_crashes} "
            f"events={self.events} sim_time_ms={self.sim_time_ms} "
            f"violation={self.violation or 'none'}"
        )


@dataclass(slots=True)
class TxnSummary:
    seeds_run: int = 0
    faults: int = 0
    committed: int = 0
    aborted: int = 0
    committed_records: int = 0
    copies: int = 0
    offset_commits: int = 0
    events: int = 0
    violations: list[TxnSeedResult] = field(default_factory=list)
    wall_s: float = 0.0

    def line(self) -> str:
        return (
            f"seeds={self.seeds_run} faults={self.faults} committed={self.committed} "
            f"aborted={self.aborted} committed_records={self.committed_records} "
            f"copies={self.copies} offset_commits={self.offset_commits} "
            f"events={self.events} violations={len(self.violations)} wall={self.wall_s:.1f}s"
        )


def run_txn_seed(
    seed: int,
    *,
    brokers: int = 3,
    partitions: int = 2,
    mode: str = "isr",
    faults_end_ms: int = FAULTS_END_MS,
) -> TxnSeedResult:
    """Run one seed; never raises for a violation (it is in ``violation``)."""
    rng = random.Random(seed ^ 0x7A11)
    config = ClusterConfig(
        brokers=brokers,
        partitions=partitions,
        flush_interval_ms=rng.choice((20, 100, 400)),
        metadata_snapshot_every_records=rng.choice((20, 60, 1 << 30)),
        mode=mode,
    )
    link = LinkProfile(
        delay_min_ms=1,
        delay_max_ms=rng.choice((2, 5, 10)),
        loss=rng.choice((0.0, 0.0, 0.01, 0.03)),
        duplicate=rng.choice((0.0, 0.01, 0.03)),
    )
    cluster = BrokerCluster(seed=seed, config=config, checker=ClusterChecker(), link=link)
    checker = TxnChecker()
    host = TxnCoordinatorHost(cluster, checker, node_id=COORDINATOR_ID)
    host.start()
    deadline = faults_end_ms + LIVENESS_BOUND_MS
    stop_ms = faults_end_ms + 1000
    producers = []
    for i in range(PRODUCERS):
        p = TxnProducer(
            cluster,
            checker,
            random.Random(rng.getrandbits(64)),
            node_id=CLIENT_BASE_ID + 200 + i,
            coordinator=COORDINATOR_ID,
        )
        p.start(150, stop_ms, heal_ms=faults_end_ms)
        producers.append(p)
    sources = cluster.topic_partitions()
    outputs = [TopicPartition(COPIES_TOPIC, tp.partition) for tp in sources]
    consumers = []
    for i, tp in enumerate(sources + outputs):
        c = ReadCommittedConsumer(
            cluster,
            checker,
            random.Random(rng.getrandbits(64)),
            node_id=CLIENT_BASE_ID + 300 + i,
            tp=tp,
        )
        c.start(150)
        consumers.append(c)
    copier = TxnCopier(
        cluster,
        checker,
        random.Random(rng.getrandbits(64)),
        node_id=CLIENT_BASE_ID + 250,
        coordinator=COORDINATOR_ID,
        sources=sources,
        outputs=outputs,
    )
    copier.start(150, calm_ms=faults_end_ms)
    TopicCreator(
        cluster,
        random.Random(rng.getrandbits(64)),
        node_id=CLIENT_BASE_ID - 1,
        topics={TOPIC: partitions, COPIES_TOPIC: partitions},
    ).start(50)
    TopicCreator(  # as the brokers hosting the coordinators do on first use
        cluster,
        random.Random(rng.getrandbits(64)),
        node_id=CLIENT_BASE_ID - 2,
        topics={TRANSACTION_STATE_TOPIC: 1, OFFSETS_TOPIC: OFFSETS_PARTITIONS},
        as_broker=True,
    ).start(50)
    nemesis = Nemesis(
        cluster, random.Random(rng.getrandbits(64)), start_ms=FAULTS_START_MS, end_ms=faults_end_ms
    )
    nemesis.start()
    txn_nemesis = TxnNemesis(
        host, random.Random(rng.getrandbits(64)), start_ms=FAULTS_START_MS, end_ms=faults_end_ms
    )
    txn_nemesis.start()
    result = TxnSeedResult(seed=seed, brokers=brokers, partitions=partitions, mode=mode)

    def settled() -> bool:
        if not all(p.done for p in producers):
            return False
        if not host.up or host.busy():
            return False
        ends: dict[TopicPartition, int] = {}
        for c in consumers:
            lso = leader_lso(cluster, c.tp)
            if lso is None or lso[0] != lso[1] or c.position < lso[1]:
                return False
            ends[c.tp] = lso[1]
        return copier.caught_up({tp: ends[tp] for tp in sources}) and (
            group_offsets(cluster, GROUP_ID) is not None
        )

    def run() -> None:
        cluster.scheduler.run_until(faults_end_ms)
        while not settled():
            if cluster.clock.now_ms >= deadline:
                raise InvariantViolated(
                    "liveness",
                    f"within {LIVENESS_BOUND_MS} ms of the heal: the producers did not stop, a "
                    f"transaction stayed open or unmarked, a partition's LSO or its "
                    f"read_committed consumer did not reach the high watermark, or the copier "
                    f"did not catch up",
                )
            cluster.scheduler.run_until(cluster.clock.now_ms + SETTLE_STEP_MS)
        late = [p for p in producers if not any(t >= faults_end_ms for t in p.ended_at)]
        if late:
            raise InvariantViolated(
                "liveness",
                f"producers {[p.node_id for p in late]} ended no transaction after the heal at "
                f"{faults_end_ms} ms",
            )
        result.committed_records = checker.check_committed_read()
        offsets = group_offsets(cluster, GROUP_ID)
        assert offsets is not None
        result.copies = checker.check_copies(sources, outputs, offsets)

    result.violation = run_guarded(run, cluster.clock)
    result.events = cluster.scheduler.events_run
    result.sim_time_ms = cluster.clock.now_ms
    result.faults = nemesis.stats.total + txn_nemesis.failovers
    result.coordinator_failovers = txn_nemesis.failovers
    result.coordinator_reloads = host.reloads
    result.committed = sum(p.committed for p in producers)
    result.aborted = sum(p.aborted for p in producers)
    result.decided = len(checker.decided)
    result.read = sum(c.records_read for c in consumers)
    result.skipped = sum(c.skipped for c in consumers)
    result.markers = host.markers_written
    result.copier_committed = copier.committed
    result.copier_aborted = copier.aborted
    result.offset_commits = copier.offset_commits
    result.copier_rewinds = copier.rewinds
    result.copier_crashes = copier.crashes
    return result


def group_offsets(cluster: BrokerCluster, group_id: str) -> dict[TopicPartition, int] | None:
    """The group's committed offsets as its coordinator would answer them now, else None."""
    tp = offsets_partition(group_id)
    broker = cluster.brokers.get(cluster.leader_of(tp))
    replica = None if broker is None or not broker.up else broker.replicas.get(tp)
    code, offsets = offset_fetch(replica, group_id)
    return offsets if code is ErrorCode.NONE else None


def _run_one(args: tuple[int, int, int, str]) -> TxnSeedResult:
    seed, brokers, partitions, mode = args
    return run_txn_seed(seed, brokers=brokers, partitions=partitions, mode=mode)


def run_txn_seeds(
    start: int,
    count: int,
    *,
    brokers: int = 3,
    partitions: int = 2,
    mode: str = "isr",
    processes: int = 1,
    stop_on_violation: bool = True,
) -> TxnSummary:
    """Run seeds ``start .. start + count - 1``."""
    t0 = time.perf_counter()
    summary = TxnSummary()

    def take(r: TxnSeedResult) -> None:
        summary.seeds_run += 1
        summary.faults += r.faults
        summary.committed += r.committed
        summary.aborted += r.aborted
        summary.committed_records += r.committed_records
        summary.copies += r.copies
        summary.offset_commits += r.offset_commits
        summary.events += r.events
        if r.violation is not None:
            summary.violations.append(r)

    jobs = [(s, brokers, partitions, mode) for s in range(start, start + count)]
    run_seed_jobs(
        jobs,
        _run_one,
        take,
        processes=processes,
        chunksize=4,
        stop_on_violation=stop_on_violation,
    )
    summary.wall_s = time.perf_counter() - t0
    return summary


def cli_transactions(args: argparse.Namespace) -> int:
    """``kraft sim cluster --workload transactions``, with ``cli_cluster``'s parsed arguments
    (the transactional workload runs the random nemesis, without reassignments or scenarios)."""
    if args.brokers < 3:
        raise SystemExit("--brokers must be at least 3 (the topic has replication factor 3)")
    others = [
        name
        for name, on in (
            ("--reassign", args.reassign),
            ("--scenario", args.scenario is not None),
            ("--schedule", args.schedule != "mixed"),
            ("--no-elr", args.no_elr),
            ("--unsafe-hw-truncation", args.unsafe_hw_truncation),
            ("--unsafe-answer-uncommitted-reads", args.unsafe_answer_uncommitted_reads),
            ("--quorum-write-caching", args.quorum_write_caching),
        )
        if on
    ]
    if others:
        raise SystemExit(f"--workload transactions does not take {', '.join(others)}")
    if args.seed is not None:
        r = run_txn_seed(
            args.seed, brokers=args.brokers, partitions=args.partitions, mode=args.mode
        )
        return report_seed(r)
    summary = run_txn_seeds(
        args.start,
        args.seeds if args.seeds is not None else 100,
        brokers=args.brokers,
        partitions=args.partitions,
        mode=args.mode,
        processes=args.processes,
    )
    return report_summary(summary)


__all__ = ["TxnSeedResult", "TxnSummary", "cli_transactions", "run_txn_seed", "run_txn_seeds"]
