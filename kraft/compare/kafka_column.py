"""``kraft compare --with-kafka``: Apache Kafka's ISR replication as a third column.

An Apache Kafka cluster (`kraft.peer.KafkaCluster`: the controllers kraft's column has, as
many brokers as the replication factor, the same ``replica.lag.time.max.ms``) runs every
scenario of kraft's columns but the simulator's power loss, with the same scenario code
(`KafkaArena` is an `Arena` over it), librdkafka (confluent-kafka) as the client, and kio
requests (`kafka_wire`) for what librdkafka does not show: each partition's leader epoch, and
the error code of one acks=all Produce:

- ``steady``: throughput, latency and the brokers' CPU per record of acks=all produce;
- ``slow-follower``: SIGSTOP of a Kafka broker holding a follower replica;
- ``failures``: SIGKILL of 1, then 2 of the 3 replicas, then restarts, with
  ``min.insync.replicas`` 2 (`KAFKA`) and 1 (`KAFKA_MIN1`);
- ``leader-kill``: SIGKILL of the Kafka broker leading the partition, to the next
  acknowledgement;
- ``data-loss``: acks=1 under a leader kill, and the unclean election of a stale replica
  (`kraft.compare.losses.real_process_losses`), read back through librdkafka.

The Kafka column runs after kraft's columns (not at the same moment: two clusters under a fault
at once would share two cores). Its times are shifted so that its fault starts where kraft's
did (`merge`), and the plots draw the three columns on one axis.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from kraft.compare.kafka_wire import PartitionView, describe_partition, produce_once
from kraft.compare.modes import ISR_MIN1, ISR_MIN2, Arena, Mode, isr_config
from kraft.compare.workload import Clock, LibrdkafkaProbe, ProbeProducer

if TYPE_CHECKING:
    from kraft.peer import KafkaCluster

KAFKA = Mode("kafka-isr", "Apache Kafka ISR, min.insync.replicas=2", {"min.insync.replicas": "2"})
KAFKA_MIN1 = Mode(
    "kafka-isr-min1", "Apache Kafka ISR, min.insync.replicas=1", {"min.insync.replicas": "1"}
)
KRAFT_TWIN = {KAFKA.name: ISR_MIN2, KAFKA_MIN1.name: ISR_MIN1}
"""The kraft mode whose topic configs each Kafka mode takes (`isr_config`)."""
KAFKA_SCENARIOS = ("slow-follower", "failures", "leader-kill", "data-loss", "steady")
"""Every scenario of kraft's columns; the data-loss scenario's power loss runs in kraft's
simulator only (a SIGKILLed JVM keeps its page cache, as a Python broker does)."""


RESTART_TIMEOUT_S = 180.0
"""A killed Kafka broker's JVM restarting on two loaded cores: measured over 90 s at load
average 40."""
DESCRIBE_TIMEOUTS_S = (1.0, 5.0)
"""A describe asks every broker with the first timeout (a paused one costs that), then, if
none answered, again with the second: a JVM on two loaded cores can take over a second to
accept a connection and answer."""
WARMUP_PER_STEADY_RECORD = 10
"""``kraft compare --with-kafka`` warms Kafka up with 10 times the steady phase's records."""


def kafka_modes(scenario: str) -> tuple[Mode, ...]:
    """The Kafka modes that take part in ``scenario`` (as kraft's: min.insync.replicas=1 in
    the failures scenario only)."""
    return (KAFKA, KAFKA_MIN1) if scenario == "failures" else (KAFKA,)


class KafkaArena(Arena):
    """The `Arena` of Apache Kafka: topics through its Admin API, faults on its JVMs."""

    def __init__(self, cluster: KafkaCluster, replication_factor: int) -> None:
        super().__init__(cluster, replication_factor, client="confluent-kafka")  # type: ignore[arg-type]
        self.kafka = cluster
        from confluent_kafka.admin import AdminClient

        self._admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 2})
        # NB: a describe under a fault asks the brokers one by one, so a paused one costs a
        # timeout, not the answer
        self._addresses = [cluster.broker_addresses[b] for b in cluster.broker_ids]

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
        twin = KRAFT_TWIN[mode.name]
        config = {**isr_config(twin, self.replication_factor), **(extra or {})}
        brokers = self.kafka.broker_ids
        first = leader if leader is not None else brokers[0]
        replicas = [first, *[b for b in brokers if b != first]][: self.replication_factor]
        new = NewTopic(name, num_partitions=1, replica_assignment=[replicas], config=config)
        self._admin.create_topics([new])[name].result(timeout=60)
        self.modes[name] = mode
        self.wait_led(name)
        return name

    def describe(self, topic: str) -> PartitionView:
        """Partition 0 of ``topic``, with its leader epoch, as the first broker that answers
        a Metadata request in time sees it (`DESCRIBE_TIMEOUTS_S`; the one that answered last
        is asked first).

        Raises:
            TimeoutError: no broker answered.
        """
        for timeout_s in DESCRIBE_TIMEOUTS_S:
            for i, address in enumerate(self._addresses):
                try:
                    view = describe_partition(address, topic, timeout_s=timeout_s)
                except (OSError, LookupError, ConnectionError):
                    continue
                self._addresses.insert(0, self._addresses.pop(i))
                return view
        raise TimeoutError(f"no Kafka broker described {topic}")

    def produce_once(self, topic: str) -> str:
        return produce_once(self.bootstrap, topic)

    def read_back(self, topic: str) -> list[bytes]:
        """Every value of partition 0, from the beginning to the high watermark, through
        librdkafka.

        Raises:
            TimeoutError: not read to the end within a minute.
        """
        return read_to_end(self.bootstrap, topic)

    def start_broker(self, broker: int) -> None:
        """Start one killed broker and wait until it serves (it lists itself and the brokers
        that run; a broker still down is fenced and listed by none)."""
        running = [b for b in self.kafka.broker_ids if b in self.kafka.pids()]
        self.kafka.start_broker(broker, timeout=RESTART_TIMEOUT_S, listing=running)

    def warm_up(self, records: int, say: Any) -> None:
        """Untimed acks=all records through librdkafka: a fresh JVM runs Kafka's code
        interpreted until its JIT has compiled it (`kraft.bench.against_kafka.warm_up`)."""
        from kraft.bench.kafka_clients import fill

        topic = self.create("warm-up", KAFKA)
        say(f"warm-up: {records:,} records (its JIT; not measured)")
        fill(self.bootstrap, topic, records, 100)

    def restart(self, brokers: list[int], timeout: float = RESTART_TIMEOUT_S) -> None:
        """Start ``brokers`` at once (a JVM's start is most of the wait) and wait until each
        lists every broker."""
        with ThreadPoolExecutor(max_workers=max(1, len(brokers))) as pool:
            list(pool.map(lambda b: self.kafka.start_broker(b, timeout=timeout), brokers))


READ_TIMEOUT_S = 60.0


def read_to_end(bootstrap: str, topic: str, timeout_s: float = READ_TIMEOUT_S) -> list[bytes]:
    """Every value of partition 0 of ``topic`` up to its high watermark, through librdkafka
    (read_uncommitted, from the beginning)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"compare-read-{topic}",
            "enable.auto.commit": False,
            "log_level": 2,
        }
    )
    values: list[bytes] = []
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout_s
        position = 0
        while position < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {position} of {end} records of {topic}")
            for m in consumer.consume(5000, 0.5):
                if m.error() is None:
                    values.append(m.value() or b"")
                    position = (m.offset() or 0) + 1
    finally:
        consumer.close()
    return values


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
    with ``warmup_records``): scenario name -> its result (as kraft's, with the modes of
    `kafka_modes`; the data-loss scenario's real-process cases only)."""
    from kraft.compare.losses import real_process_losses
    from kraft.compare.run import SCENARIOS

    arena = KafkaArena(kafka, replication_factor)
    out: dict[str, Any] = {}
    if warmup_records:
        say.scenario = "Apache Kafka"
        arena.warm_up(warmup_records, say)
    for name in selected:
        if name not in KAFKA_SCENARIOS:
            continue
        function = real_process_losses if name == "data-loss" else SCENARIOS[name][0]
        say.scenario = f"{name} (Apache Kafka)"
        try:
            out[name] = function(arena, kafka_modes(name), clock, timing, say)
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
LOSS_CASES = ("acks1_leader_kill", "unclean_election")
"""The data-loss scenario's parts that run on both systems (each with its own ``modes``)."""


def merge(kraft: dict[str, Any], kafka: dict[str, Any], *, annotate: bool = True) -> None:
    """Put each Kafka scenario's mode beside kraft's in ``kraft`` (the ``scenarios`` of the
    results), its times shifted so that its fault starts where kraft's did, and (``annotate``)
    Kafka's own fault, victim and kills beside it as ``kafka_*``; the data-loss scenario case
    by case (its rows are tables of counts: not annotated)."""
    for name, result in kafka.items():
        target = kraft.get(name)
        if target is None:
            continue  # kraft's side did not run it: nothing to stand beside
        if name == "data-loss" and "error" not in result and "error" not in target:
            merge({c: target[c] for c in LOSS_CASES if c in target}, result, annotate=False)
            continue
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
            for key in ("fault", "victim", "kills", "killed"):
                if annotate and key in result:
                    row[f"kafka_{key}"] = result[key]
            target["modes"][mode] = row


def _shift(kraft: dict[str, Any], kafka: dict[str, Any]) -> float:
    """Seconds to add to Kafka's times: its fault (or its first phase) starts where kraft's
    did."""
    if "fault" in kraft and "fault" in kafka:
        return float(kraft["fault"]["start"]) - float(kafka["fault"]["start"])
    if kraft.get("phases") and kafka.get("phases"):
        return float(kraft["phases"][0]["start"]) - float(kafka["phases"][0]["start"])
    return 0.0


__all__ = [
    "KAFKA",
    "KAFKA_MIN1",
    "KAFKA_SCENARIOS",
    "WARMUP_PER_STEADY_RECORD",
    "KafkaArena",
    "PartitionView",
    "kafka_modes",
    "merge",
    "run_kafka_column",
]
