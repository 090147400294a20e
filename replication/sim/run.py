"""One seed of the broker simulation, a range of seeds, and ``kraft sim cluster``.

A run: three controllers (a Raft quorum) and ``brokers`` brokers start empty; the brokers
register with the active controller and follow the metadata log as observers; an admin client
creates one topic (``partitions`` partitions, RF=3, min.insync.replicas=2) through the quorum;
the producers write to every partition and the consumers read it back; from
``FAULTS_START_MS`` to ``faults_end_ms`` the nemesis injects faults into brokers, controllers
and the network; then everything heals and the run must show liveness: within
``LIVENESS_BOUND_MS`` of simulated time a controller is active and every partition
acknowledges an acks=all batch first sent after the heal. Then every batch ever acknowledged
with acks=all must be in that leader's log below its high watermark. Safety invariants are
checked as the state changes (`ClusterChecker` for the brokers and clients, `RaftChecker` for
the metadata log on controllers and observers). A failure names the invariant and the one
command that replays it.

``--scenario NAME`` replaces the random nemesis by a scripted one (`replication.sim.scenarios`:
``last-replica-standing``, KIP-966's case), and ``--no-elr`` turns the controllers'
``eligible.leader.replicas.enable`` off.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kraft.arguments import ArgumentParser, positive_int
from kraft.sim.checker import InvariantViolated
from kraft.sim.network import LinkProfile
from kraft.sim.seeds import (
    add_seed_arguments,
    report_seed,
    report_summary,
    run_guarded,
    run_seed_jobs,
)
from kraft.types import TopicPartition
from replication.core import ACKS_ALL, ACKS_LEADER, TruncationStrategy
from replication.sim.admin import Reassigner, TopicCreator
from replication.sim.checker import ClusterChecker
from replication.sim.cluster import BrokerCluster
from replication.sim.controller import ClusterConfig
from replication.sim.replica import SimReplica
from replication.sim.scenarios import NEVER_FLUSH_MS, SCENARIOS, LastReplicaStanding
from replication.sim.targeted import TargetedNemesis
from replication.sim.workload import CLIENT_BASE_ID, Consumer, Nemesis, Producer
from storage.records import read_header

FAULTS_START_MS = 700
FAULTS_END_MS = 3300
LIVENESS_BOUND_MS = 5000
"""After the final heal, every partition acknowledges a new acks=all batch within this much
simulated time. The slow path: a crashed broker's old session must expire (500 ms) before it
can register again, then it catches up and rejoins the ISR so that acks=all has
min.insync.replicas again; the worst of 1000 seeds took 2300 ms with an instant controller.
A controller failover after the heal adds an election (~300-600 ms)."""
SETTLE_STEP_MS = 50


SCHEDULES = ("mixed", "random", "targeted")
"""``--schedule``: the random nemesis and the targeted one together (the default), or either
alone (`replication.sim.targeted`)."""

WORKLOADS = ("replication", "transactions")
"""``--workload``: this module's producers and consumers, or `replication.sim.txn`'s."""

MODES = ("isr", "quorum", "mixed")
"""``--mode``: every partition ISR, every partition a Raft group (quorum), or both side by
side (even partitions quorum, odd ones ISR)."""


def replay_command(
    seed: int,
    brokers: int,
    partitions: int,
    *,
    hw_truncation: bool,
    mode: str = "isr",
    schedule: str = "mixed",
    unsafe_answer_uncommitted_reads: bool = False,
    quorum_write_caching: bool = False,
    reassign: bool = False,
    scenario: str | None = None,
    elr: bool = True,
) -> str:
    extra = " --unsafe-hw-truncation" if hw_truncation else ""
    if unsafe_answer_uncommitted_reads:
        extra += " --unsafe-answer-uncommitted-reads"
    if quorum_write_caching:
        extra += " --quorum-write-caching"
    if mode != "isr":
        extra += f" --mode {mode}"
    if schedule != "mixed":
        extra += f" --schedule {schedule}"
    if reassign:
        extra += " --reassign"
    if scenario is not None:
        extra += f" --scenario {scenario}"
    if not elr:
        extra += " --no-elr"
    return (
        f"kraft sim cluster --seed {seed:#x} --brokers {brokers} --partitions {partitions}{extra}"
    )


@dataclass(slots=True, kw_only=True)
class ClusterSeedResult:
    seed: int
    brokers: int
    partitions: int
    hw_truncation: bool = False
    unsafe_answer_uncommitted_reads: bool = False
    quorum_write_caching: bool = False
    mode: str = "isr"
    schedule: str = "mixed"
    reassign: bool = False
    reassignments: int = 0
    replicas_removed: int = 0
    scenario: str | None = None
    elr: bool = True
    steps: list[str] = field(default_factory=list)
    """A scenario's steps, as they happened."""
    scenario_state: LastReplicaStanding | None = field(default=None, compare=False, repr=False)
    """The scripted nemesis, for tests to inspect (None in a random run)."""
    events: int = 0
    sim_time_ms: int = 0
    faults: int = 0
    produced: int = 0
    acked_all: int = 0
    acked_one: int = 0
    acked_records: int = 0
    consumed: int = 0
    leader_epochs: int = 0
    controller_epochs: int = 0
    recovery_ms: int | None = None
    violation: str | None = None

    @property
    def replay(self) -> str:
        return replay_command(
            self.seed,
            self.brokers,
            self.partitions,
            hw_truncation=self.hw_truncation,
            mode=self.mode,
            schedule=self.schedule,
            unsafe_answer_uncommitted_reads=self.unsafe_answer_uncommitted_reads,
            quorum_write_caching=self.quorum_write_caching,
            reassign=self.reassign,
            scenario=self.scenario,
            elr=self.elr,
        )

    def line(self) -> str:
        return (
            f"seed={self.seed:#x} brokers={self.brokers} partitions={self.partitions} "
            f"faults={self.faults} produced={self.produced} acked_all={self.acked_all} "
            f"acked_one={self.acked_one} acked_records={self.acked_records} "
            f"consumed={self.consumed} leader_epochs={self.leader_epochs} "
            f"controller_epochs={self.controller_epochs} "
            + (
                f"reassignments={self.reassignments} replicas_removed={self.replicas_removed} "
                if self.reassign
                else ""
            )
            + f"events={self.events} sim_time_ms={self.sim_time_ms} "
            f"recovery_ms={self.recovery_ms} violation={self.violation or 'none'}"
        )


@dataclass(slots=True, kw_only=True)
class ClusterSummary:
    seeds_run: int = 0
    faults: int = 0
    acked_records: int = 0
    events: int = 0
    max_recovery_ms: int = 0
    violations: list[ClusterSeedResult] = field(default_factory=list)
    wall_s: float = 0.0

    def line(self) -> str:
        return (
            f"seeds={self.seeds_run} faults={self.faults} acked_records={self.acked_records} "
            f"events={self.events} max_recovery_ms={self.max_recovery_ms} "
            f"violations={len(self.violations)} wall={self.wall_s:.1f}s"
        )


def run_seed(
    seed: int,
    *,
    brokers: int = 3,
    partitions: int = 2,
    hw_truncation: bool = False,
    faults_end_ms: int = FAULTS_END_MS,
    unsafe_answer_uncommitted_reads: bool = False,
    mode: str = "isr",
    quorum_write_caching: bool = False,
    schedule: str = "mixed",
    reassign: bool = False,
    scenario: str | None = None,
    elr: bool = True,
) -> ClusterSeedResult:
    """Run one seed; never raises for a violation (it is in ``violation``). ``schedule``: the
    random nemesis, the targeted one or both; ``reassign``: an operator moves the partitions
    to random brokers while the faults run (KIP-455); ``scenario``: a scripted nemesis of
    `replication.sim.scenarios` instead of those; ``elr``: the controllers'
    ``eligible.leader.replicas.enable``."""
    assert schedule in SCHEDULES, schedule
    rng = random.Random(seed ^ 0xC1D5)
    strategy = (
        TruncationStrategy.HIGH_WATERMARK if hw_truncation else TruncationStrategy.LEADER_EPOCH
    )
    flush_interval_ms = rng.choice((20, 100, 400))
    config = ClusterConfig(
        brokers=brokers,
        partitions=partitions,
        flush_interval_ms=NEVER_FLUSH_MS if scenario is not None else flush_interval_ms,
        metadata_snapshot_every_records=rng.choice((20, 60, 1 << 30)),
        unsafe_answer_uncommitted_reads=unsafe_answer_uncommitted_reads,
        truncation_strategy=strategy,
        mode=mode,
        quorum_write_caching=quorum_write_caching,
        eligible_leader_replicas=elr,
    )
    link = LinkProfile(
        delay_min_ms=1,
        delay_max_ms=rng.choice((2, 5, 10)),
        loss=rng.choice((0.0, 0.0, 0.01, 0.03)),
        duplicate=rng.choice((0.0, 0.01, 0.03)),
    )
    checker = ClusterChecker()
    cluster = BrokerCluster(seed=seed, config=config, checker=checker, link=link)
    deadline = faults_end_ms + LIVENESS_BOUND_MS
    producers: list[Producer] = []
    for tp in cluster.topic_partitions():
        for acks, interval in ((ACKS_ALL, (5, 25)), (ACKS_LEADER, (20, 60))):
            p = Producer(
                cluster,
                random.Random(rng.getrandbits(64)),
                node_id=CLIENT_BASE_ID + len(producers),
                tp=tp,
                acks=acks,
                interval_ms=interval,
            )
            p.start(100, deadline)
            producers.append(p)
    consumers: list[Consumer] = []
    for tp in cluster.topic_partitions():
        c = Consumer(
            cluster,
            random.Random(rng.getrandbits(64)),
            node_id=CLIENT_BASE_ID + 100 + len(consumers),
            tp=tp,
        )
        c.start(150, deadline)
        consumers.append(c)
    admin = TopicCreator(cluster, random.Random(rng.getrandbits(64)), node_id=CLIENT_BASE_ID - 1)
    admin.start(50)
    nemesis: Nemesis | LastReplicaStanding
    targeted = None
    if scenario is None:
        nemesis = Nemesis(
            cluster,
            random.Random(rng.getrandbits(64)),
            start_ms=FAULTS_START_MS,
            end_ms=faults_end_ms,
        )
    else:
        assert scenario in SCENARIOS, scenario
        nemesis = LastReplicaStanding(cluster, start_ms=FAULTS_START_MS, end_ms=faults_end_ms)
    reassigner = None
    if reassign:
        reassigner = Reassigner(
            cluster,
            random.Random(rng.getrandbits(64)),
            node_id=CLIENT_BASE_ID - 2,
            start_ms=FAULTS_START_MS,
            end_ms=faults_end_ms,
        )
    if isinstance(nemesis, Nemesis):
        # NB: drawn after every other stream, so each of those replays as it did before.
        targeted = TargetedNemesis(cluster, random.Random(rng.getrandbits(64)), base=nemesis)
        nemesis.start(random_faults=schedule != "targeted")
        if schedule != "random":
            targeted.start()
    else:
        nemesis.start()
    if reassigner is not None:
        reassigner.start()
    result = ClusterSeedResult(
        seed=seed,
        brokers=brokers,
        partitions=partitions,
        hw_truncation=hw_truncation,
        unsafe_answer_uncommitted_reads=unsafe_answer_uncommitted_reads,
        quorum_write_caching=quorum_write_caching,
        mode=mode,
        schedule=schedule,
        reassign=reassign,
        scenario=scenario,
        elr=elr,
    )
    acks_all = [p for p in producers if p.acks == ACKS_ALL]

    def run() -> None:
        cluster.scheduler.run_until(faults_end_ms)
        while True:
            if cluster.active_controller() is not None and all(
                any(t >= faults_end_ms for t in p.acked_sent_after) for p in acks_all
            ):
                result.recovery_ms = cluster.clock.now_ms - faults_end_ms
                break
            if cluster.clock.now_ms >= deadline:
                raise InvariantViolated(
                    "liveness",
                    f"no active controller, or not every partition acknowledged an acks=all "
                    f"batch sent after the heal at {faults_end_ms} ms, within "
                    f"{LIVENESS_BOUND_MS} ms",
                )
            cluster.scheduler.run_until(cluster.clock.now_ms + SETTLE_STEP_MS)

        def leader_replicas() -> dict[TopicPartition, SimReplica] | None:
            """Each partition's replica on the broker the metadata names leader, once that
            broker has taken the leadership up (it may not have applied the change yet)."""
            out: dict[TopicPartition, SimReplica] = {}
            for tp in cluster.topic_partitions():
                leader = cluster.leader_of(tp)
                replica = cluster.brokers[leader].replicas.get(tp) if leader >= 0 else None
                if replica is None or not replica.driver.is_leader:
                    return None
                out[tp] = replica
            return out

        def covered(leaders: dict[TopicPartition, SimReplica]) -> bool:
            """Every leader's high watermark has passed every batch acknowledged in its
            partition (a new leader's HW catches up once its followers fetch)."""
            for tp, replica in leaders.items():
                for base in checker.acked.get(tp, {}):
                    batch = replica.log.batch_at(base)
                    end = read_header(batch).next_offset if batch is not None else base + 1
                    if end > replica.high_watermark:
                        return False
            return True

        # Found by seed 0x2b1: a leader elected just before the check had not yet applied the
        # metadata naming it, and a new leader's HW lags until its followers fetch: the check
        # waits for both, within the liveness bound, then judges what it sees.
        while (leaders := leader_replicas()) is None or not covered(leaders):
            if cluster.clock.now_ms >= deadline:
                if leaders is None:
                    raise InvariantViolated(
                        "liveness",
                        f"a partition's metadata leader did not take the leadership up within "
                        f"{LIVENESS_BOUND_MS} ms of the heal",
                    )
                break
            cluster.scheduler.run_until(cluster.clock.now_ms + SETTLE_STEP_MS)
        for tp, replica in leaders.items():
            checker.check_acked_on_leader(tp, replica.log, replica.high_watermark)

        # Liveness of the ISR: with every broker up and the network healed, every follower
        # catches up and its leader brings it back into the ISR. A leader stuck on an ISR
        # change the controller lost (answered from an uncommitted image) never does.
        def lagging() -> list[TopicPartition]:
            out = []
            for tp in cluster.topic_partitions():
                registration = cluster.registration(tp)
                in_sync = cluster.in_sync(tp)
                if registration is None or in_sync != frozenset(registration.replicas):
                    out.append(tp)
            return out

        while behind := lagging():
            if cluster.clock.now_ms >= deadline:
                raise InvariantViolated(
                    "liveness",
                    f"the ISR of {', '.join(map(str, behind))} did not grow back to every "
                    f"replica within {LIVENESS_BOUND_MS} ms of the heal",
                )
            cluster.scheduler.run_until(cluster.clock.now_ms + SETTLE_STEP_MS)

    result.violation = run_guarded(run, cluster.clock)
    result.events = cluster.scheduler.events_run
    result.sim_time_ms = cluster.clock.now_ms
    result.faults = nemesis.stats.total
    if isinstance(nemesis, LastReplicaStanding):
        result.steps = nemesis.steps
        result.scenario_state = nemesis
    result.produced = sum(p.sent for p in producers)
    result.acked_all = sum(p.acked for p in acks_all)
    result.acked_one = sum(p.acked for p in producers if p.acks != ACKS_ALL)
    result.acked_records = sum(p.acked_records for p in producers)
    result.consumed = sum(c.records_read for c in consumers)
    result.leader_epochs = len(checker.writers)
    result.controller_epochs = len(cluster.raft_checker.leaders_by_epoch)
    result.reassignments = 0 if reassigner is None else reassigner.started
    result.replicas_removed = checker.replicas_removed
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedOptions:
    """What a seed range varies besides the seed (`run_seed`'s keyword arguments)."""

    brokers: int = 3
    partitions: int = 2
    hw_truncation: bool = False
    unsafe_answer_uncommitted_reads: bool = False
    quorum_write_caching: bool = False
    mode: str = "isr"
    schedule: str = "mixed"
    reassign: bool = False
    scenario: str | None = None
    elr: bool = True


def _run_one(args: tuple[int, SeedOptions]) -> ClusterSeedResult:
    seed, o = args
    return run_seed(
        seed,
        brokers=o.brokers,
        partitions=o.partitions,
        hw_truncation=o.hw_truncation,
        unsafe_answer_uncommitted_reads=o.unsafe_answer_uncommitted_reads,
        quorum_write_caching=o.quorum_write_caching,
        mode=o.mode,
        schedule=o.schedule,
        reassign=o.reassign,
        scenario=o.scenario,
        elr=o.elr,
    )


def run_seeds(
    start: int,
    count: int,
    *,
    brokers: int = 3,
    partitions: int = 2,
    hw_truncation: bool = False,
    processes: int = 1,
    stop_on_violation: bool = True,
    mode: str = "isr",
    schedule: str = "mixed",
    unsafe_answer_uncommitted_reads: bool = False,
    quorum_write_caching: bool = False,
    reassign: bool = False,
    scenario: str | None = None,
    elr: bool = True,
) -> ClusterSummary:
    """Run seeds ``start .. start + count - 1``."""
    t0 = time.perf_counter()
    options = SeedOptions(
        brokers=brokers,
        partitions=partitions,
        hw_truncation=hw_truncation,
        unsafe_answer_uncommitted_reads=unsafe_answer_uncommitted_reads,
        quorum_write_caching=quorum_write_caching,
        mode=mode,
        schedule=schedule,
        reassign=reassign,
        scenario=scenario,
        elr=elr,
    )
    jobs = [(s, options) for s in range(start, start + count)]
    summary = ClusterSummary()

    def take(r: ClusterSeedResult) -> None:
        summary.seeds_run += 1
        summary.faults += r.faults
        summary.acked_records += r.acked_records
        summary.events += r.events
        if r.recovery_ms is not None:
            summary.max_recovery_ms = max(summary.max_recovery_ms, r.recovery_ms)
        if r.violation is not None:
            summary.violations.append(r)

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


def cli_cluster(argv: Sequence[str] | None = None) -> int:
    """``kraft sim cluster [--seeds N [--start S] | --seed X] [--brokers B] [--partitions P]
    [--mode isr|quorum|mixed] [--schedule mixed|random|targeted] [--reassign]
    [--scenario last-replica-standing] [--no-elr] [--unsafe-...]``.

    Prints a one-line summary; on a violation prints it with the replay command and returns 1.
    """
    p = ArgumentParser(prog="kraft sim cluster")
    add_seed_arguments(p)
    p.add_argument("--brokers", type=positive_int, default=3)
    p.add_argument("--partitions", type=positive_int, default=2)
    p.add_argument(
        "--unsafe-hw-truncation",
        action="store_true",
        help="followers truncate to their high watermark (Kafka before KIP-101): loses data",
    )
    p.add_argument(
        "--unsafe-answer-uncommitted-reads",
        action="store_true",
        help="the active controller answers a decision read from its uncommitted image at "
        "once: a partition can wait forever",
    )
    p.add_argument(
        "--quorum-write-caching",
        action="store_true",
        help="quorum partitions acknowledge before the fsync (quorum.write.caching=true): a "
        "correlated power loss loses acknowledged writes (with --mode quorum)",
    )
    p.add_argument(
        "--mode",
        choices=MODES,
        default="isr",
        help="replication.mode of the partitions: isr, quorum (each a Raft group of its "
        "replicas), or mixed (even partitions quorum, odd ones ISR)",
    )
    p.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default="mixed",
        help="the nemesis: random and targeted faults (mixed), or either alone",
    )
    p.add_argument(
        "--reassign",
        action="store_true",
        help="an operator moves the partitions to random brokers during the faults (KIP-455; "
        "ISR partitions: a quorum partition's reassignment is refused); use --brokers 4 or more",
    )
    p.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default=None,
        help="scripted faults instead of the random and targeted nemesis: "
        "last-replica-standing (KIP-966: the leader alone in the ISR loses power while an "
        "in-sync replica is cut off; it loses acknowledged records without eligible leader "
        "replicas)",
    )
    p.add_argument(
        "--no-elr",
        action="store_true",
        help="eligible.leader.replicas.enable=false on the controllers (Kafka before 4.0)",
    )
    p.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="replication",
        help="the clients: idempotent and acks=1 producers with consumers (replication), or "
        "transactional producers, read_committed consumers and the transaction coordinator "
        "(transactions: with --mode, --brokers and --partitions only)",
    )
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.workload == "transactions":
        from replication.sim.txn_run import cli_transactions  # NB: it imports this module

        return cli_transactions(args)
    if args.scenario is not None and args.mode != "isr":
        p.error("--scenario needs --mode isr (ELR is about ISR partitions)")
    if args.brokers < 3:
        p.error("--brokers must be at least 3 (the topic has replication factor 3)")
    if args.seed is not None:
        r = run_seed(
            args.seed,
            brokers=args.brokers,
            partitions=args.partitions,
            hw_truncation=args.unsafe_hw_truncation,
            unsafe_answer_uncommitted_reads=args.unsafe_answer_uncommitted_reads,
            quorum_write_caching=args.quorum_write_caching,
            mode=args.mode,
            schedule=args.schedule,
            reassign=args.reassign,
            scenario=args.scenario,
            elr=not args.no_elr,
        )
        for step in r.steps:
            print(f"  {step}")
        return report_seed(r)
    summary = run_seeds(
        args.start,
        args.seeds if args.seeds is not None else 100,
        brokers=args.brokers,
        partitions=args.partitions,
        hw_truncation=args.unsafe_hw_truncation,
        unsafe_answer_uncommitted_reads=args.unsafe_answer_uncommitted_reads,
        quorum_write_caching=args.quorum_write_caching,
        processes=args.processes,
        mode=args.mode,
        schedule=args.schedule,
        reassign=args.reassign,
        scenario=args.scenario,
        elr=not args.no_elr,
    )
    return report_summary(summary)


__all__ = [
    "FAULTS_END_MS",
    "LIVENESS_BOUND_MS",
    "MODES",
    "SCHEDULES",
    "ClusterSeedResult",
    "ClusterSummary",
    "SeedOptions",
    "cli_cluster",
    "replay_command",
    "run_seed",
    "run_seeds",
]
