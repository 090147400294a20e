"""The producers and the nemesis of the broker simulation.

Producers (one pair per partition): an idempotent acks=all producer (KIP-98: producer id,
epoch 0, per-partition sequences, one batch in flight, retried with its sequence until it
succeeds) and a plain acks=1 producer that never retries. They find the leader in the
controller's committed image (a client's metadata refresh, without the lag).

The nemesis picks a fault every 100-500 ms of its window, each healing itself later:
process crashes and restarts, power losses (the broker also loses its unflushed log tail),
symmetric and one-way partitions (the controller included), an isolated partition leader,
packet loss with duplication, slow links (long, reordering delays) and paused brokers.

Power loss is only injected where Kafka promises durability: acks=all with
``min.insync.replicas`` = 2 survives losing *one* copy, not losing the last in-sync copy
(that is what KIP-966's unclean recovery addresses). So a power loss needs a quiet cluster (no
other fault active, every partition led with a full ISR), and until the broker is back in
every ISR no other fault is injected.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import final

from kraft.sim.cluster_network import Envelope
from kraft.sim.network import LinkProfile
from kraft.types import TopicPartition
from replication.core import ACKS_ALL
from replication.sim.cluster import BrokerCluster, SimBroker
from replication.sim.controller import CONTROLLER_ID
from replication.sim.messages import ProduceReq, ProduceResp
from storage.errors import ErrorCode
from storage.records import build_batch, read_header

CLIENT_BASE_ID = 1000
PRODUCE_TIMEOUT_MS = 300
CLIENT_TIMEOUT_MS = 500
RETRY_BACKOFF_MS = 30


@dataclass(slots=True)
class _InFlight:
    records: bytes
    count: int
    first_sent_ms: int
    rpc: int = -1
    deadline_ms: int = 0


@final
class Producer:
    """One partition's producer: ``acks`` -1 (idempotent) or 1 (plain, no retries)."""

    def __init__(
        self,
        cluster: BrokerCluster,
        rng: random.Random,
        *,
        node_id: int,
        tp: TopicPartition,
        acks: int,
        interval_ms: tuple[int, int],
    ) -> None:
        self.cluster = cluster
        self.rng = rng
        self.node_id = node_id
        self.tp = tp
        self.acks = acks
        self.idempotent = acks == ACKS_ALL
        self.producer_id = node_id if self.idempotent else -1
        self.interval_ms = interval_ms
        self.sequence = 0
        self.in_flight: _InFlight | None = None
        self.stop_ms = 1 << 62
        self.sent = 0
        self.acked = 0
        self.acked_records = 0
        self.acked_sent_after: list[int] = []
        """``first_sent_ms`` of every acknowledged batch."""
        self._counter = 0
        cluster.clients[node_id] = self.deliver

    def start(self, at_ms: int, stop_ms: int) -> None:
        self.stop_ms = stop_ms
        self.cluster.scheduler.at(at_ms, self._tick)

    def _tick(self) -> None:
        now = self.cluster.clock.now_ms
        if now >= self.stop_ms:
            return
        flight = self.in_flight
        if flight is None:
            count = 1 if self.rng.random() < 0.7 else self.rng.randint(2, 4)
            values = []
            for _ in range(count):
                self._counter += 1
                values.append(b"%d:%d:%d" % (self.node_id, self._counter, self.cluster.seed))
            records = build_batch(
                values,
                timestamp_ms=now,
                producer_id=self.producer_id,
                producer_epoch=0 if self.idempotent else -1,
                base_sequence=self.sequence if self.idempotent else -1,
            )
            self.in_flight = flight = _InFlight(records, count, now)
            self._send(flight, now)
        elif flight.rpc == -1 or now >= flight.deadline_ms:
            self._send(flight, now)  # a retry (idempotent) after an error or a timeout
        self.cluster.scheduler.after(self.rng.randint(*self.interval_ms), self._tick)

    def _send(self, flight: _InFlight, now: int) -> None:
        registration = self.cluster.registration(self.tp)
        if registration is None or registration.leader < 0:
            flight.rpc = -1
            return
        flight.rpc = self.cluster.next_rpc()
        flight.deadline_ms = now + CLIENT_TIMEOUT_MS
        self.sent += 1
        self.cluster.network.send(
            self.node_id,
            registration.leader,
            ProduceReq(self.tp, self.acks, PRODUCE_TIMEOUT_MS, flight.records, flight.rpc),
        )

    def deliver(self, envelope: Envelope) -> None:
        msg = envelope.payload
        flight = self.in_flight
        if not isinstance(msg, ProduceResp) or flight is None or msg.rpc != flight.rpc:
            return
        completion = msg.completion
        if completion.error_code is ErrorCode.NONE:
            if self.acks == ACKS_ALL:
                crc = read_header(flight.records).crc
                self.cluster.checker.on_acked(self.tp, completion.base_offset, crc)
            self.acked += 1
            self.acked_records += flight.count
            self.acked_sent_after.append(flight.first_sent_ms)
            self.sequence += flight.count
            self.in_flight = None
        elif not self.idempotent:
            self.in_flight = None  # acks=1 without retries: give up on this batch
        else:
            flight.rpc = -1  # retry the same batch (same sequence) on the next tick


# --- the nemesis --------------------------------------------------------------------------------


@dataclass(slots=True)
class NemesisStats:
    injected: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.injected.values())


@final
class Nemesis:
    """Random faults between ``start_ms`` and ``end_ms``, then a full heal."""

    def __init__(
        self, cluster: BrokerCluster, rng: random.Random, *, start_ms: int, end_ms: int
    ) -> None:
        self.cluster = cluster
        self.rng = rng
        self.start_ms = start_ms
        self.end_ms = end_ms
        self.base_profile = cluster.network.profile
        self.stats = NemesisStats()
        self.tainted: SimBroker | None = None
        """A broker that lost its unflushed log, until it is back in every ISR."""
        self._active = 0
        self._faults: list[tuple[str, Callable[[], None]]] = [
            ("crash_restart", self._crash_restart),
            ("crash_restart", self._crash_restart),
            ("power_loss", self._power_loss),
            ("partition", self._partition),
            ("one_way_partition", self._one_way),
            ("isolate_leader", self._isolate_leader),
            ("packet_loss", self._packet_loss),
            ("slow_links", self._slow_links),
            ("pause", self._pause),
        ]

    def start(self) -> None:
        self.cluster.scheduler.at(self.start_ms, self._next)
        self.cluster.scheduler.at(self.end_ms, self.heal_all)

    def _next(self) -> None:
        now = self.cluster.clock.now_ms
        if now >= self.end_ms:
            return
        self.cluster.scheduler.after(self.rng.randint(100, 500), self._next)
        if self.tainted is not None:
            if not self._back_in_every_isr(self.tainted):
                return
            self.tainted = None
        name, fault = self.rng.choice(self._faults)
        if name == "power_loss" and not self._quiet():
            name, fault = "crash_restart", self._crash_restart
        fault()
        self.stats.injected[name] = self.stats.injected.get(name, 0) + 1

    def _later(self, low: int, high: int, action: Callable[[], None]) -> None:
        self._active += 1
        at = min(self.cluster.clock.now_ms + self.rng.randint(low, high), self.end_ms)

        def run() -> None:
            self._active -= 1
            action()

        self.cluster.scheduler.at(at, run)

    def _pick(self) -> SimBroker:
        return self.rng.choice(list(self.cluster.brokers.values()))

    def _quiet(self) -> bool:
        cluster = self.cluster
        if self._active or not cluster.network.is_healed:
            return False
        if any(not b.up or b.paused for b in cluster.brokers.values()):
            return False
        image = cluster.controller.image
        for tp in cluster.topic_partitions():
            registration = image.partition_by_name(tp)
            if registration is None or registration.leader < 0:
                return False
            if set(registration.isr) != set(registration.replicas):
                return False
        return True

    def _back_in_every_isr(self, broker: SimBroker) -> bool:
        if not broker.up:
            return False
        image = self.cluster.controller.image
        for tp in self.cluster.topic_partitions():
            registration = image.partition_by_name(tp)
            if registration is not None and broker.node_id not in registration.isr:
                return False
        return True

    def _crash_restart(self) -> None:
        b = self._pick()
        b.crash(power_loss=False)
        self._later(20, 800, lambda: self._restart(b))

    def _power_loss(self) -> None:
        b = self._pick()
        b.crash(power_loss=True)
        self.tainted = b
        self._later(20, 800, lambda: self._restart(b))

    def _restart(self, b: SimBroker) -> None:
        if not b.up:
            b.start()

    def _groups(self) -> list[int]:
        ids = [CONTROLLER_ID, *self.cluster.brokers]
        self.rng.shuffle(ids)
        return ids

    def _partition(self) -> None:
        ids = self._groups()
        cut = self.rng.randint(1, len(ids) - 1)
        self.cluster.network.partition(frozenset(ids[:cut]), frozenset(ids[cut:]))
        self._later(100, 1200, self.cluster.network.heal)

    def _one_way(self) -> None:
        ids = self._groups()
        src, others = ids[0], ids[1:]
        dests = frozenset(self.rng.sample(others, self.rng.randint(1, len(others))))
        self.cluster.network.block_one_way(src, dests)
        self._later(100, 1200, self.cluster.network.heal)

    def _isolate_leader(self) -> None:
        tps = self.cluster.topic_partitions()
        registration = self.cluster.registration(self.rng.choice(tps))
        node = registration.leader if registration is not None else -1
        if node < 0:
            node = self._pick().node_id
        self.cluster.network.isolate(node)
        self._later(100, 1200, self.cluster.network.heal)

    def _packet_loss(self) -> None:
        p = self.base_profile
        self.cluster.network.profile = LinkProfile(
            delay_min_ms=p.delay_min_ms,
            delay_max_ms=p.delay_max_ms * 3,
            loss=self.rng.uniform(0.05, 0.3),
            duplicate=max(p.duplicate, 0.05),
        )
        self._later(100, 800, self._restore_links)

    def _slow_links(self) -> None:
        p = self.base_profile
        self.cluster.network.profile = LinkProfile(
            delay_min_ms=p.delay_min_ms, delay_max_ms=self.rng.choice((50, 150, 400))
        )
        self._later(100, 800, self._restore_links)

    def _restore_links(self) -> None:
        self.cluster.network.profile = self.base_profile

    def _pause(self) -> None:
        b = self._pick()
        b.pause()
        self._later(20, 800, b.resume)

    def heal_all(self) -> None:
        cluster = self.cluster
        cluster.network.heal()
        cluster.network.profile = self.base_profile
        for b in cluster.brokers.values():
            if not b.up:
                b.start()
            elif b.paused:
                b.resume()


__all__ = ["CLIENT_BASE_ID", "Nemesis", "NemesisStats", "Producer"]
