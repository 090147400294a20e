"""The clients and the nemesis of the broker simulation.

Producers (one pair per partition): an idempotent acks=all producer (KIP-98: producer id,
epoch 0, per-partition sequences, one batch in flight, retried with its sequence until it
succeeds) and a plain acks=1 producer that never retries. Consumers (one per partition) fetch
from the leader below its high watermark, mostly moving forward and now and then seeking back
to re-read; the checker remembers every (partition, offset) -> value ever read. Clients find
the leader in the newest committed metadata image (a metadata refresh, without the lag). The
admin clients (creating the topic, moving partitions) are in `replication.sim.admin`.

The nemesis picks a fault every 100-500 ms of its window, each healing itself later:
broker crashes and restarts, power losses (the broker also loses its unflushed log tail),
controller crashes (a controller's `SimDisk` always loses its unsynced writes) and restarts,
paused brokers and controllers, symmetric and one-way partitions (controllers included), an
isolated partition leader or active controller, packet loss with duplication, and slow links
(long, reordering delays).

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
from typing import Protocol, final

from kraft.sim.cluster_network import Envelope
from kraft.sim.network import LinkProfile
from kraft.types import TopicPartition
from replication.core import ACKS_ALL
from replication.messages import (
    BrokerFetchRequest,
    FetchPartition,
    FetchPartitionData,
    FetchTopic,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
)
from replication.messages.broker import READ_UNCOMMITTED
from replication.sim.broker import SimBroker
from replication.sim.cluster import BrokerCluster
from replication.sim.controller import SimController
from replication.sim.messages import (
    FetchReq,
    FetchResp,
    ProduceReq,
    ProduceResp,
)
from storage.errors import ErrorCode
from storage.file_region import records_bytes
from storage.records import build_batch, iter_batches, offset_values, read_header

CLIENT_BASE_ID = 1000
PRODUCE_TIMEOUT_MS = 300
CLIENT_TIMEOUT_MS = 500
RETRY_BACKOFF_MS = 30
CONSUME_MAX_BYTES = 2048


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
            self.cluster.checker.on_produced(self.tp, values)
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
        leader = self.cluster.leader_of(self.tp)
        if leader < 0:
            flight.rpc = -1
            return
        flight.rpc = self.cluster.next_rpc()
        flight.deadline_ms = now + CLIENT_TIMEOUT_MS
        self.sent += 1
        self.cluster.network.send(
            self.node_id,
            leader,
            ProduceReq(
                ProduceRequest(
                    acks=self.acks,
                    timeout_ms=PRODUCE_TIMEOUT_MS,
                    topic_data=(
                        ProduceTopicData(
                            name=self.tp.topic,
                            partition_data=(
                                ProducePartitionData(
                                    index=self.tp.partition, records=flight.records
                                ),
                            ),
                        ),
                    ),
                ),
                flight.rpc,
            ),
        )

    def deliver(self, envelope: Envelope) -> None:
        msg = envelope.payload
        flight = self.in_flight
        if not isinstance(msg, ProduceResp) or flight is None or msg.rpc != flight.rpc:
            return
        (topic,) = msg.response.responses
        (completion,) = topic.partition_responses
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


class _FetchingConsumer(Protocol):
    rpc: int
    position: int


def fetched(consumer: _FetchingConsumer, envelope: Envelope) -> FetchPartitionData | None:
    """The partition a simulated consumer's outstanding Fetch answered, or None: another
    message, a stale answer, or an error (OFFSET_OUT_OF_RANGE moves it to the log start)."""
    msg = envelope.payload
    if not isinstance(msg, FetchResp) or msg.rpc != consumer.rpc:
        return None
    consumer.rpc = -1
    (topic,) = msg.response.responses
    (data,) = topic.partitions
    if data.error_code is ErrorCode.OFFSET_OUT_OF_RANGE:
        consumer.position = data.log_start_offset
        return None
    return data if data.error_code is ErrorCode.NONE else None


def consumer_fetch(
    tp: TopicPartition,
    position: int,
    *,
    max_bytes: int = CONSUME_MAX_BYTES,
    isolation_level: int = READ_UNCOMMITTED,
) -> BrokerFetchRequest:
    """A simulated consumer's Fetch of one partition from ``position``, answered at once."""
    return BrokerFetchRequest(
        max_wait_ms=0,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        topics=(
            FetchTopic(
                topic=tp.topic,
                partitions=(
                    FetchPartition(
                        partition=tp.partition,
                        fetch_offset=position,
                        partition_max_bytes=max_bytes,
                    ),
                ),
            ),
        ),
    )


@final
class Consumer:
    """One partition's consumer: reads from the leader, checks every record it gets."""

    def __init__(
        self, cluster: BrokerCluster, rng: random.Random, *, node_id: int, tp: TopicPartition
    ) -> None:
        self.cluster = cluster
        self.rng = rng
        self.node_id = node_id
        self.tp = tp
        self.position = 0
        self.rpc = -1
        self.deadline_ms = 0
        self.stop_ms = 1 << 62
        self.fetches = 0
        self.records_read = 0
        cluster.clients[node_id] = self.deliver

    def start(self, at_ms: int, stop_ms: int) -> None:
        self.stop_ms = stop_ms
        self.cluster.scheduler.at(at_ms, self._tick)

    def _tick(self) -> None:
        now = self.cluster.clock.now_ms
        if now >= self.stop_ms:
            return
        self.cluster.scheduler.after(self.rng.randint(10, 40), self._tick)
        if self.rpc != -1 and now < self.deadline_ms:
            return
        leader = self.cluster.leader_of(self.tp)
        if leader < 0:
            return
        if self.position > 0 and self.rng.random() < 0.05:
            self.position = self.rng.randint(0, self.position)  # seek back and read again
        self.rpc = self.cluster.next_rpc()
        self.deadline_ms = now + CLIENT_TIMEOUT_MS
        self.fetches += 1
        request = consumer_fetch(self.tp, self.position)
        self.cluster.network.send(self.node_id, leader, FetchReq(request, self.rpc))

    def deliver(self, envelope: Envelope) -> None:
        data = fetched(self, envelope)
        if data is None:
            return
        checker = self.cluster.checker
        records = records_bytes(data.records)  # bytes: the simulator asks for no region
        for pos, header in iter_batches(records):
            batch = records[pos : pos + header.size_bytes]
            # NB: as the real consumer, skip control batches (a quorum leader's leader change)
            for offset, value in () if header.is_control else offset_values(batch):
                checker.on_consumed(self.tp, offset, value, envelope.source)
                self.records_read += 1
            self.position = max(self.position, header.next_offset)


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
            ("controller_crash", self._controller_crash),
            ("controller_pause", self._controller_pause),
            ("isolate_controller", self._isolate_controller),
        ]

    def start(self, *, random_faults: bool = True) -> None:
        """Inject random faults in the window (unless not ``random_faults``: then only the
        targeted nemesis strikes) and heal everything at its end."""
        if random_faults:
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
        if name == "power_loss" and not self.all_quorum() and not self.quiet():
            # NB: an ISR partition survives a power loss only while every other replica is
            # in sync (ISR needs no fsync because a crashed replica rejoins only after
            # catching up); a quorum partition fsyncs before it acknowledges, so power
            # losses strike it at any time, several brokers at once included.
            name, fault = "crash_restart", self._crash_restart
        fault()
        self.stats.injected[name] = self.stats.injected.get(name, 0) + 1

    def later(
        self, low: int, high: int, action: Callable[[], None], rng: random.Random | None = None
    ) -> None:
        """Run ``action`` (a fault's end) ``low..high`` ms from now (drawn from ``rng``, by
        default the nemesis's), by the end of the window at the latest; until then the fault
        counts as active (`quiet` is False)."""
        self._active += 1
        delay = (rng or self.rng).randint(low, high)
        at = min(self.cluster.clock.now_ms + delay, self.end_ms)

        def run() -> None:
            self._active -= 1
            action()

        self.cluster.scheduler.at(at, run)

    def _pick(self) -> SimBroker:
        return self.rng.choice(list(self.cluster.brokers.values()))

    def quiet(self, *, full_isr: bool = True) -> bool:
        """No fault active, every node up, the network healed, every partition led (and,
        with ``full_isr``, every replica in its partition's ISR)."""
        cluster = self.cluster
        if self._active or not cluster.network.is_healed:
            return False
        if any(not self.registered(b) for b in cluster.brokers.values()):
            return False
        if any(not c.up or c.paused for c in cluster.controllers.values()):
            return False
        for tp in cluster.topic_partitions():
            registration = cluster.registration(tp)
            if registration is None or cluster.leader_of(tp) < 0:
                return False
            in_sync = cluster.in_sync(tp)
            if in_sync is None or (full_isr and in_sync != set(registration.replicas)):
                return False
        return True

    def all_quorum(self) -> bool:
        return all(self.cluster.is_quorum(tp) for tp in self.cluster.topic_partitions())

    def registered(self, broker: SimBroker) -> bool:
        """The broker runs and its current incarnation is registered and unfenced in the
        committed metadata. A restarted broker that has not registered yet still holds the ISR
        seats of the incarnation that crashed (until the controller fences it), and KIP-966
        drops it from the eligible leaders once it registers after that unclean shutdown: it
        does not count as a healthy ISR member then, and a power loss on another member would
        strike outside what Kafka promises without fsync."""
        if not broker.up or broker.paused or broker.broker_epoch is None:
            return False
        registration = self.cluster.image.broker(broker.node_id)
        return (
            registration is not None
            and registration.broker_epoch == broker.broker_epoch
            and registration.is_active
        )

    def _back_in_every_isr(self, broker: SimBroker) -> bool:
        if not self.registered(broker):
            return False
        for tp in self.cluster.topic_partitions():
            if self.cluster.registration(tp) is None:
                continue
            in_sync = self.cluster.in_sync(tp)
            if in_sync is None or broker.node_id not in in_sync:
                return False
        return True

    def _crash_restart(self) -> None:
        b = self._pick()
        b.crash(power_loss=False)
        self.later(20, 800, lambda: self._restart(b))

    def _power_loss(self) -> None:
        b = self._pick()
        b.crash(power_loss=True)
        if not self.all_quorum():
            self.tainted = b
        self.later(20, 800, lambda: self._restart(b))

    def _restart(self, b: SimBroker) -> None:
        if not b.up:
            b.start()

    def _pick_controller(self) -> SimController:
        return self.rng.choice(list(self.cluster.controllers.values()))

    def _controller_crash(self) -> None:
        c = self._pick_controller()
        c.crash()
        self.later(20, 800, lambda: self._restart_controller(c))

    def _restart_controller(self, c: SimController) -> None:
        if not c.up:
            c.start()

    def _controller_pause(self) -> None:
        c = self._pick_controller()
        c.pause()
        self.later(20, 800, c.resume)

    def _isolate_controller(self) -> None:
        active = self.cluster.active_controller()
        node = active.node_id if active is not None else self._pick_controller().node_id
        self.cluster.network.isolate(node)
        self.later(100, 1200, self.cluster.network.heal)

    def _groups(self) -> list[int]:
        ids = [*self.cluster.controllers, *self.cluster.brokers]
        self.rng.shuffle(ids)
        return ids

    def _partition(self) -> None:
        ids = self._groups()
        cut = self.rng.randint(1, len(ids) - 1)
        self.cluster.network.partition(frozenset(ids[:cut]), frozenset(ids[cut:]))
        self.later(100, 1200, self.cluster.network.heal)

    def _one_way(self) -> None:
        ids = self._groups()
        src, others = ids[0], ids[1:]
        dests = frozenset(self.rng.sample(others, self.rng.randint(1, len(others))))
        self.cluster.network.block_one_way(src, dests)
        self.later(100, 1200, self.cluster.network.heal)

    def _isolate_leader(self) -> None:
        tps = self.cluster.topic_partitions()
        node = self.cluster.leader_of(self.rng.choice(tps))
        if node < 0:
            node = self._pick().node_id
        self.cluster.network.isolate(node)
        self.later(100, 1200, self.cluster.network.heal)

    def _packet_loss(self) -> None:
        loss = self.rng.uniform(0.05, 0.3)
        self.cluster.network.profile = self.base_profile.lossy(loss, delay_factor=3)
        self.later(100, 800, self._restore_links)

    def _slow_links(self) -> None:
        p = self.base_profile
        self.cluster.network.profile = LinkProfile(
            delay_min_ms=p.delay_min_ms, delay_max_ms=self.rng.choice((50, 150, 400))
        )
        self.later(100, 800, self._restore_links)

    def _restore_links(self) -> None:
        self.cluster.network.profile = self.base_profile

    def _pause(self) -> None:
        b = self._pick()
        b.pause()
        self.later(20, 800, b.resume)

    def heal_all(self) -> None:
        cluster = self.cluster
        cluster.network.heal()
        cluster.network.profile = self.base_profile
        for c in cluster.controllers.values():
            if not c.up:
                c.start()
            elif c.paused:
                c.resume()
        for b in cluster.brokers.values():
            if not b.up:
                b.start()
            elif b.paused:
                b.resume()


__all__ = [
    "CLIENT_BASE_ID",
    "Consumer",
    "Nemesis",
    "NemesisStats",
    "Producer",
]
