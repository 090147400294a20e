"""``kraft compare --with-kafka``: Apache Kafka's ISR replication as a third column.

An Apache Kafka cluster (`kraft.peer.KafkaCluster`: the controllers kraft's column has, as
many brokers as the replication factor, the same ``replica.lag.time.max.ms``) runs the phases
that apply to a JVM Kafka, with the same scenario code as kraft's columns (`KafkaArena` is an
`Arena` over it) and librdkafka (confluent-kafka) as the client:

- ``steady``: throughput, latency and the brokers' CPU per record of acks=all produce;
- ``slow-follower``: SIGSTOP of a Kafka broker holding a follower replica;
- ``leader-kill``: SIGKILL of the Kafka broker leading the partition, to the next
  acknowledgement.

The Kafka column runs after kraft's columns (not at the same moment: two clusters under a fault
at once would share two cores). Its times are shifted so that its fault starts where kraft's
did (`merge`), and the plots draw the three columns on one axis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kraft.compare.modes import ISR_MIN2, Arena, Mode, isr_config
from kraft.compare.workload import Clock, LibrdkafkaProbe, ProbeProducer

if TYPE_CHECKING:
    from kraft.peer import KafkaCluster

KAFKA = Mode("kafka-isr", "Apache Kafka ISR, min.insync.replicas=2", {"min.insync.replicas": "2"})
KAFKA_SCENARIOS = ("slow-follower", "leader-kill", "steady")
"""The phases that apply to a JVM Kafka here (the data-loss cases read kraft's logs; the
failures phase may follow)."""


RESTART_TIMEOUT_S = 180.0
"""A killed Kafka broker's JVM restarting on two loaded cores: measured over 90 s at load
average 40."""
WARMUP_PER_STEADY_RECORD = 10
"""``kraft compare --with-kafka`` warms Kafka up with 10 times the steady phase's records."""


@dataclass(frozen=True, slots=True)
class PartitionView:
    """What the scenarios read of a partition (Kafka's metadata has no leader epoch: -1)."""

    leader: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    leader_epoch: int = -1


class KafkaArena(Arena):
    """The `Arena` of Apache Kafka: topics through its Admin API, faults on its JVMs."""

    def __init__(self, cluster: KafkaCluster, replication_factor: int) -> None:
        super().__init__(cluster, replication_factor, client="confluent-kafka")  # type: ignore[arg-type]
        self.kafka = cluster
        from confluent_kafka.admin import AdminClient

        self._admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 2})
        # NB: one client per broker, each bootstrapped to it alone: a describe under a fault
        # asks the brokers one by one, so a paused one costs a timeout, not the answer
        self._per_broker = [
            AdminClient({"bootstrap.servers": cluster.broker_addresses[b], "log_level": 2})
            for b in cluster.broker_ids
        ]

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    def probe(self, topic: str, clock: Clock, **options: Any) -> ProbeProducer:
        return LibrdkafkaProbe(self.bootstrap, topic, clock, **options)

    def broker_pids(self) -> dict[str, int]:
        pids = self.kafka.pids()
        return {f"broker-{b}": pids[b] for b in self.kafka.broker_ids if b in pids}

    def probe_quorum(self) -> str | None:
        return "Apache Kafka has no quorum topics"

    def create(
        self,
        prefix: str,
        mode: Mode,
        extra: Mapping[str, str] | None = None,
        *,
        leader: int | None = None,
    ) -> str:
        from confluent_kafka.cimpl import NewTopic

        name = f"{prefix}-{mode.name}-{next(self._names)}"
        config = {**isr_config(ISR_MIN2, self.replication_factor), **(extra or {})}
        brokers = self.kafka.broker_ids
        first = leader if leader is not None else brokers[0]
        replicas = [first, *[b for b in brokers if b != first]][: self.replication_factor]
        new = NewTopic(name, num_partitions=1, replica_assignment=[replicas], config=config)
        self._admin.create_topics([new])[name].result(timeout=60)
        self.modes[name] = mode
        self.wait_led(name)
        return name

    def describe(self, topic: str) -> PartitionView:
        """Partition 0 of ``topic`` as the first broker that answers within a second sees it
        (the one that answered last is asked first).

        Raises:
            TimeoutError: no broker answered.
        """
        for i, admin in enumerate(self._per_broker):
            try:
                p = admin.list_topics(topic, timeout=1).topics[topic].partitions[0]
            except Exception:
                continue
            self._per_broker.insert(0, self._per_broker.pop(i))
            return PartitionView(leader=p.leader, isr=tuple(p.isrs), replicas=tuple(p.replicas))
        raise TimeoutError(f"no Kafka broker described {topic}")

    def warm_up(self, records: int, say: Any) -> None:
        """Untimed acks=all records through librdkafka: a fresh JVM runs Kafka's code
        interpreted until its JIT has compiled it (`kraft.bench.against_kafka.warm_up`)."""
        from kraft.bench.kafka_clients import fill

        topic = self.create("warm-up", KAFKA)
        say(f"warm-up: {records:,} records (its JIT; not measured)")
        fill(self.bootstrap, topic, records, 100)

    def restart(self, brokers: list[int], timeout: float = RESTART_TIMEOUT_S) -> None:
        for b in brokers:
            self.kafka.start_broker(b, timeout=timeout)


def run_kafka_column(
    kafka: KafkaCluster,
    replication_factor: int,
    selected: Sequence[str],
    clock: Clock,
    timing: Any,
    say: Any,
    warmup_records: int = 0,
) -> dict[str, Any]:
    """Each scenario of ``selected`` that applies to Kafka, on ``kafka`` (first warmed up
    with ``warmup_records``): scenario name -> its result (as kraft's, with the one mode
    `KAFKA`)."""
    from kraft.compare.run import SCENARIOS

    arena = KafkaArena(kafka, replication_factor)
    out: dict[str, Any] = {}
    if warmup_records:
        say.scenario = "Apache Kafka"
        arena.warm_up(warmup_records, say)
    for name in selected:
        if name not in KAFKA_SCENARIOS:
            continue
        function, _ = SCENARIOS[name]
        say.scenario = f"{name} (Apache Kafka)"
        try:
            out[name] = function(arena, [KAFKA], clock, timing, say)
        except Exception as e:  # reported; the other scenarios still run
            out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
        _heal(arena)
    return out


def _heal(arena: KafkaArena) -> None:
    for b in arena.kafka.broker_ids:
        arena.kafka.resume_broker(b)
    dead = [b for b in arena.kafka.broker_ids if b not in arena.kafka.pids()]
    arena.restart(dead)


_TIMED_KEYS = ("latency_series", "isr_events")


def merge(kraft: dict[str, Any], kafka: dict[str, Any]) -> None:
    """Put each Kafka scenario's mode beside kraft's in ``kraft`` (the ``scenarios`` of the
    results), its times shifted so that its fault starts where kraft's did."""
    for name, result in kafka.items():
        target = kraft.get(name)
        if target is None:
            continue  # kraft's side did not run it: nothing to stand beside
        if "modes" not in result or "modes" not in target:
            target.setdefault("kafka_error", result.get("error", "no Kafka result"))
            continue
        shift = _shift(target, result)
        for mode, row in result["modes"].items():
            row = dict(row)
            for key in _TIMED_KEYS:
                if key in row:
                    row[key] = [{**p, "t": round(p["t"] + shift, 3)} for p in row[key]]
            if "throughput_series" in row:
                row["throughput_series"] = [
                    [round(t + shift, 3), v] for t, v in row["throughput_series"]
                ]
            for key in ("fault", "victim", "kills"):
                if key in result:
                    row[f"kafka_{key}"] = result[key]
            target["modes"][mode] = row


def _shift(kraft: dict[str, Any], kafka: dict[str, Any]) -> float:
    if "fault" in kraft and "fault" in kafka:
        return float(kraft["fault"]["start"]) - float(kafka["fault"]["start"])
    return 0.0


__all__ = [
    "KAFKA",
    "KAFKA_SCENARIOS",
    "WARMUP_PER_STEADY_RECORD",
    "KafkaArena",
    "merge",
    "run_kafka_column",
]
