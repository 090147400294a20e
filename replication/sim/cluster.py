"""`BrokerCluster`: a controller quorum and N brokers on the simulator's harness, one seed.

The controllers are `SimController`s (``controller.py``): three Raft voters running the
controller's core. The brokers are `SimBroker`s (``broker.py``): the broker shell's
registration, metadata observer, reconciliation and partition drivers on the simulator.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, final

from kraft.metadata.image import MetadataImage, PartitionRegistration
from kraft.raft.messages import RaftMessage
from kraft.sim.checker import RaftChecker
from kraft.sim.cluster import sim_raft_config
from kraft.sim.cluster_network import Envelope, EnvelopeNetwork
from kraft.sim.cluster_raft import RaftEnv
from kraft.sim.network import LinkProfile
from kraft.sim.scheduler import Scheduler, SimClock
from kraft.types import NodeId, TopicPartition
from replication.driver import ReplicationMode
from replication.sim.broker import SimBroker
from replication.sim.controller import (
    QUIET,
    TOPIC,
    ClusterConfig,
    SimController,
)

if TYPE_CHECKING:
    from replication.sim.checker import ClusterChecker


@final
class BrokerCluster:
    """Controllers ``101..100+config.controllers`` (a Raft quorum) and brokers
    ``1..config.brokers`` (its observers) on one scheduler and network."""

    def __init__(
        self,
        *,
        seed: int,
        config: ClusterConfig,
        checker: ClusterChecker,
        link: LinkProfile | None = None,
    ) -> None:
        self.seed = seed
        self.config = config
        self.replication = config.replication()
        self.rng = random.Random(seed)
        self.clock = SimClock()
        self.scheduler = Scheduler(self.clock)
        self.checker = checker
        self.clients: dict[int, Callable[[Envelope], None]] = {}
        self.on_event: Callable[[str, int, TopicPartition | None], None] | None = None
        """The targeted nemesis's trigger (`notify`)."""
        self.network = EnvelopeNetwork(
            scheduler=self.scheduler,
            rng=random.Random(self.rng.getrandbits(64)),
            deliver=self._deliver,
            profile=link or LinkProfile(),
        )
        self._rpc = 0
        self.image = MetadataImage.empty()
        """The newest committed metadata image any node has replayed: the truth that clients'
        metadata refreshes see without lag (committed images agree offset by offset, which
        `RaftChecker` checks)."""
        self.controller_ids = config.controller_ids()
        voters = frozenset(self.controller_ids)
        self.raft_checker = RaftChecker(voters)
        self.raft_env = RaftEnv(
            scheduler=self.scheduler,
            clock=self.clock,
            rng=random.Random(self.rng.getrandbits(64)),
            checker=self.raft_checker,
            nodes={},
            send=self._send_raft,
            config=sim_raft_config(fetch_snapshot_max_bytes=2048),
            voters=voters,
            logger=QUIET,
            snapshot_every_records=config.metadata_snapshot_every_records,
        )
        self.partition_raft_config = sim_raft_config()
        """The Raft timeouts of quorum-mode partitions (the simulators' `SIM_TIMEOUTS`, as the
        metadata quorum's)."""
        self.quorum_leaders: dict[TopicPartition, tuple[int, int]] = {}
        """tp -> (epoch, broker) of the newest leader a quorum group reported: what the
        controller records and Metadata shows (the controller elects no quorum leaders)."""
        self.controllers = {i: SimController(self, i) for i in self.controller_ids}
        self.brokers = {i: SimBroker(self, i) for i in range(1, config.brokers + 1)}
        for controller in self.controllers.values():
            controller.start()
        for broker in self.brokers.values():
            broker.start()

    def next_rpc(self) -> int:
        self._rpc += 1
        return self._rpc

    def _send_raft(self, msg: RaftMessage) -> None:
        self.network.send(msg.source, msg.destination, msg)

    def _deliver(self, envelope: Envelope) -> None:
        destination = envelope.destination
        if destination in self.brokers:
            self.brokers[destination].deliver(envelope)
        elif destination in self.controllers:
            self.controllers[NodeId(destination)].deliver(envelope)
        else:
            self.clients[destination](envelope)

    def on_committed_image(self, image: MetadataImage) -> None:
        """A controller replayed a committed batch; the cluster checker sees each new one."""
        if image.last_offset > self.image.last_offset:
            self.image = image
            self.checker.on_metadata(image)
            self.notify("metadata", -1)

    def notify(self, kind: str, node: int, tp: TopicPartition | None = None) -> None:
        """Tell the targeted nemesis (`replication.sim.targeted`), if any, that ``kind``
        (``high_watermark_advanced`` on a leader, ``alter_sent`` just before a broker sends an
        AlterPartition, ``create_topics_sent`` just before the admin client sends CreateTopics
        to ``node``, ``metadata`` as a new image commits) happened on ``node``."""
        if self.on_event is not None:
            self.on_event(kind, node, tp)

    def active_controller(self) -> SimController | None:
        active = [c for c in self.controllers.values() if c.is_active and not c.paused]
        return max(active, key=lambda c: c.core.epoch, default=None)

    def topic_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(TOPIC, p) for p in range(self.config.partitions)]

    def registration(self, tp: TopicPartition) -> PartitionRegistration | None:
        return self.image.partition_by_name(tp)

    def is_quorum(self, tp: TopicPartition) -> bool:
        return self.config.replication_mode(tp.partition) is ReplicationMode.QUORUM

    def on_quorum_leader(self, tp: TopicPartition, broker_id: int, epoch: int) -> None:
        """A quorum group's new leader reported itself (``quorum_leader_elected``): record it
        if it is the newest epoch, as the controller records it in the metadata log."""
        self.checker.on_quorum_leader(tp, broker_id, epoch)
        if epoch > self.quorum_leaders.get(tp, (-1, -1))[0]:
            self.quorum_leaders[tp] = (epoch, broker_id)

    def leader_of(self, tp: TopicPartition) -> int:
        """Where clients send: the metadata's leader of an ISR partition, the newest reported
        leader of a quorum partition (-1: none known)."""
        if self.is_quorum(tp):
            return self.quorum_leaders.get(tp, (-1, -1))[1]
        registration = self.registration(tp)
        return -1 if registration is None else registration.leader

    def in_sync(self, tp: TopicPartition) -> frozenset[int] | None:
        """The replicas caught up: an ISR partition's committed ISR; a quorum partition's
        voters at its leader's commit offset (None: no leader known)."""
        registration = self.registration(tp)
        if registration is None:
            return None
        if not self.is_quorum(tp):
            return frozenset(registration.isr)
        leader = self.brokers.get(self.leader_of(tp))
        replica = None if leader is None or not leader.up else leader.replicas.get(tp)
        if replica is None or not replica.driver.is_leader:
            return None
        return replica.driver.in_sync_replicas()


__all__ = ["BrokerCluster", "SimBroker"]
