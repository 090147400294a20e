"""The replication modes ``kraft compare`` puts side by side, and the cluster they run on.

A mode is a name and the topic configs that make it: ISR with ``min.insync.replicas`` 2 (the
usual production setting), ISR with 1, and quorum (``replication.mode=quorum``: every
partition a Raft group of its replicas). The quorum mode is used when the cluster accepts it:
`Arena.probe_quorum` creates a throw-away quorum topic, and a cluster whose config registry
refuses the mode (INVALID_CONFIG) leaves it out, and the report says the column is pending.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kraft.bench.read_back import read_topic
from kraft.compare.workload import Clock, LibrdkafkaProbe, ProbeProducer

if TYPE_CHECKING:
    from kraft.cluster import LocalCluster
    from kraft.cluster.netns_cluster import NetnsCluster


@dataclass(frozen=True, slots=True)
class Mode:
    name: str
    label: str
    config: Mapping[str, str]
    quorum: bool = False


ISR_MIN2 = Mode("isr-min2", "ISR, min.insync.replicas=2", {"min.insync.replicas": "2"})
ISR_MIN1 = Mode("isr-min1", "ISR, min.insync.replicas=1", {"min.insync.replicas": "1"})
QUORUM = Mode("quorum", "quorum (Raft per partition)", {"replication.mode": "quorum"}, True)
ALL_MODES = (ISR_MIN2, ISR_MIN1, QUORUM)


def isr_config(mode: Mode, replication_factor: int) -> dict[str, str]:
    """``mode``'s topic configs; for RF=5 the ISR min2 mode asks a majority (3), as a quorum
    does, so the two tolerate the same number of failures on acks=all writes."""
    config = dict(mode.config)
    if mode is ISR_MIN2 and replication_factor == 5:
        config["min.insync.replicas"] = "3"
    return config


class Arena:
    """A `LocalCluster` (or a `NetnsCluster`: a host per node) of ``replication_factor``
    brokers (so every broker holds a replica of every partition) and the topics of one run."""

    def __init__(
        self, cluster: LocalCluster | NetnsCluster, replication_factor: int, client: str = "kraft"
    ) -> None:
        self.cluster = cluster
        self.replication_factor = replication_factor
        self.client = client
        """Who drives the probes and the steady load: kraft's own client (gRPC) or
        ``confluent-kafka`` (librdkafka, to the brokers' Kafka listeners). The data-loss
        cases (`kraft.compare.losses`) always use kraft's."""
        self._names = itertools.count(1)
        self.modes: dict[str, Mode] = {}
        """The mode of each topic created."""

    @property
    def bootstrap(self) -> str:
        """Where `client` connects: the gRPC addresses, or the Kafka listeners."""
        return self.cluster.bootstrap if self.client == "kraft" else self.cluster.kafka_bootstrap

    def probe(self, topic: str, clock: Clock, **options: Any) -> ProbeProducer:
        """A paced probe producer on ``topic``, through `client`."""
        kind = ProbeProducer if self.client == "kraft" else LibrdkafkaProbe
        return kind(self.bootstrap, topic, clock, **options)

    def broker_pids(self) -> dict[str, int]:
        """``broker-N`` -> pid of every running broker (their CPU per record)."""
        pids = {f"broker-{b}": self.cluster.broker(b).pid for b in self.cluster.broker_ids}
        return {name: pid for name, pid in pids.items() if pid is not None}

    def probe_quorum(self) -> str | None:
        """None if the cluster creates quorum topics, else why not (the error's message)."""
        from storage.errors import KraftError

        try:
            self.create("probe-quorum", QUORUM)
        except KraftError as e:
            return e.message
        return None

    def create(
        self,
        prefix: str,
        mode: Mode,
        extra: Mapping[str, str] | None = None,
        *,
        leader: int | None = None,
    ) -> str:
        """A fresh one-partition topic in ``mode``; ``leader`` (a broker id) first in its
        replica list, so an ISR topic starts led there (a quorum topic elects its own)."""
        name = f"{prefix}-{mode.name}-{next(self._names)}"
        config = {**isr_config(mode, self.replication_factor), **(extra or {})}
        assignments: tuple[tuple[int, ...], ...] = ()
        if leader is not None:
            others = [b for b in self.cluster.broker_ids if b != leader]
            assignments = ((leader, *others[: self.replication_factor - 1]),)
        self._controllers().create_topic(
            name,
            1 if not assignments else -1,
            self.replication_factor if not assignments else -1,
            configs=config,
            assignments=assignments,
            timeout=30,
        )
        self.modes[name] = mode
        self.wait_led(name)
        return name

    def _controllers(self) -> Any:
        """The cluster's one controllers' client (it closes it)."""
        from kraft.cluster.netns_cluster import NetnsCluster

        if isinstance(self.cluster, NetnsCluster):
            return self.cluster.shared_controller_client()
        return self.cluster.controller_client()

    def describe(self, topic: str) -> Any:
        return self.cluster.describe_topic(topic, timeout=5).partitions[0]

    def produce_once(self, topic: str) -> str:
        """One acks=all Produce to partition 0's leader through the brokers' Kafka listeners,
        the same request the Kafka column sends (`kafka_wire.produce_once`): its error name,
        ``NONE`` when written."""
        from kraft.compare.kafka_wire import produce_once

        if not self.cluster.kafka_bootstrap:
            return "-"  # a cluster without Kafka listeners
        return produce_once(self.cluster.kafka_bootstrap, topic)

    def read_back(self, topic: str) -> list[bytes]:
        """Every value of partition 0 of ``topic``, to the high watermark (a loss check's
        final read; kraft's own client)."""
        return read_topic(self.cluster.bootstrap, topic, 1)

    def start_broker(self, broker: int) -> None:
        """Start one killed broker and return (others may still be down)."""
        self.cluster.start_broker(broker)

    def leader(self, topic: str) -> int:
        return int(self.describe(topic).leader)

    def wait_led(self, topic: str, timeout: float = 60.0, *, not_on: int | None = None) -> int:
        """The leader of ``topic`` once it has one (other than ``not_on``)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                leader = self.leader(topic)
            except Exception:
                leader = -1
            if leader >= 0 and leader != not_on:
                return leader
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} had no leader within {timeout:.0f}s")
            time.sleep(0.05)

    def wait_full_isr(self, topics: list[str], timeout: float = 90.0) -> None:
        """Until every replica of each ISR topic is in its ISR again (after a restart), and
        each quorum topic has a leader (its followers catch up by Raft, not by an ISR)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                full = all(
                    (p := self.describe(t)).leader >= 0
                    and (self.modes[t].quorum or len(p.isr) == len(p.replicas))
                    for t in topics
                )
            except Exception:
                full = False
            if full:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the ISR of {topics} was not full within {timeout:.0f}s")
            time.sleep(0.1)

    def restart(self, brokers: list[int], timeout: float = 90.0) -> None:
        for b in brokers:
            self.cluster.start_broker(b)
        self.cluster.wait_until_healthy(timeout=timeout)


__all__ = ["ALL_MODES", "ISR_MIN1", "ISR_MIN2", "QUORUM", "Arena", "Mode", "isr_config"]
