"""The admin clients of the broker simulation, through the controller quorum
(`ControllerRouter`: the active controller, NOT_CONTROLLER hints, timeouts).

- `TopicCreator` creates topics, retrying until they exist (as a registered broker for an
  internal topic, which only a broker may create).
- `Reassigner` moves partitions (KIP-455) while the nemesis runs.
"""

from __future__ import annotations

import random
from typing import final

from kraft.controller.messages import (
    AlterPartitionReassignmentsRequest,
    CreatableTopic,
    CreateTopicsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kraft.sim.cluster_network import Envelope
from replication.sim.cluster import BrokerCluster
from replication.sim.controller import TOPIC, ControllerRouter
from replication.sim.messages import CreateTopicsReq, CreateTopicsResp, ReassignReq, ReassignResp
from storage.errors import ErrorCode


@final
class TopicCreator:
    """The admin client: CreateTopics through the controller quorum until the topics exist
    (``topics``: name -> partitions; the workload's topic by default). ``as_broker``: sent as
    a registered broker creating an internal topic on first use (only a broker may)."""

    def __init__(
        self,
        cluster: BrokerCluster,
        rng: random.Random,
        *,
        node_id: int,
        topics: dict[str, int] | None = None,
        as_broker: bool = False,
    ) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.topics = topics if topics is not None else {TOPIC: cluster.config.partitions}
        self.as_broker = as_broker
        self.router = ControllerRouter(cluster.controller_ids, rng)
        self.rpc = -1
        self.deadline_ms = 0
        self.done = False
        cluster.clients[node_id] = self.deliver

    def start(self, at_ms: int) -> None:
        self.cluster.scheduler.at(at_ms, self._tick)

    def _tick(self) -> None:
        if self.done:
            return
        cluster = self.cluster
        now = cluster.clock.now_ms
        cluster.scheduler.after(50, self._tick)
        if self.rpc != -1 and now < self.deadline_ms:
            return
        if self.rpc != -1:
            self.router.failed()
        config = cluster.config
        broker = next(
            (b for _, b in sorted(cluster.brokers.items()) if b.up and b.broker_epoch is not None),
            None,
        )
        if self.as_broker and broker is None:
            return  # no broker registered yet
        request = CreateTopicsRequest(
            broker_id=broker.node_id if self.as_broker and broker else None,
            broker_epoch=broker.broker_epoch if self.as_broker and broker else None,
            topics=tuple(
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=config.replication_factor,
                    configs={"min.insync.replicas": str(config.min_insync_replicas)},
                )
                for name, partitions in self.topics.items()
            ),
        )
        self.rpc = cluster.next_rpc()
        self.deadline_ms = now + config.controller_request_timeout_ms
        target = self.router.target()
        cluster.notify("create_topics_sent", target)
        cluster.network.send(self.node_id, target, CreateTopicsReq(request, self.rpc))

    def deliver(self, envelope: Envelope) -> None:
        msg = envelope.payload
        if not isinstance(msg, CreateTopicsResp) or msg.rpc != self.rpc:
            return
        self.rpc = -1
        codes = {t.error_code for t in msg.response.topics}
        if ErrorCode.NOT_CONTROLLER in codes:
            self.router.redirect(envelope.source, msg.leader)
        elif codes <= {ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS}:
            self.done = True
        # else (too few unfenced brokers yet): retry on the next tick


class Reassigner:
    """An operator moving partitions (KIP-455) while the nemesis runs: every ``interval_ms``
    it asks the controller quorum to move each partition to ``replication_factor`` brokers
    drawn at random (or, one time in five, to cancel its reassignment), retrying an
    unanswered or misrouted request. Per-partition refusals (a cancel that would shrink the
    ISR below min.insync.replicas) are fine: the next round tries again."""

    def __init__(
        self,
        cluster: BrokerCluster,
        rng: random.Random,
        *,
        node_id: int,
        start_ms: int,
        end_ms: int,
        interval_ms: tuple[int, int] = (150, 500),
    ) -> None:
        self.cluster = cluster
        self.rng = rng
        self.node_id = node_id
        self.start_ms, self.end_ms = start_ms, end_ms
        self.interval_ms = interval_ms
        self.router = ControllerRouter(cluster.controller_ids, rng)
        self.rpc = -1
        self.deadline_ms = 0
        self.request: AlterPartitionReassignmentsRequest | None = None
        self.started = 0
        """Partition reassignments the controller accepted (started, replaced or cancelled)."""
        cluster.clients[node_id] = self.deliver

    def start(self) -> None:
        self.cluster.scheduler.at(self.start_ms, self._next_round)

    def _next_round(self) -> None:
        if self.cluster.clock.now_ms >= self.end_ms:
            return
        config = self.cluster.config
        brokers = list(range(1, config.brokers + 1))
        partitions = []
        for tp in self.cluster.topic_partitions():
            target: tuple[int, ...] | None = None
            if self.rng.random() >= 0.2:
                target = tuple(self.rng.sample(brokers, config.replication_factor))
            partitions.append(ReassignablePartition(partition_index=tp.partition, replicas=target))
        self.request = AlterPartitionReassignmentsRequest(
            topics=(ReassignableTopic(name=TOPIC, partitions=tuple(partitions)),)
        )
        self._send()

    def _send(self) -> None:
        cluster = self.cluster
        assert self.request is not None
        self.rpc = cluster.next_rpc()
        self.deadline_ms = cluster.clock.now_ms + cluster.config.controller_request_timeout_ms
        cluster.network.send(
            self.node_id, self.router.target(), ReassignReq(self.request, self.rpc)
        )
        rpc = self.rpc
        cluster.scheduler.at(self.deadline_ms, lambda: self._timeout(rpc))

    def _timeout(self, rpc: int) -> None:
        if rpc == self.rpc:
            self.router.failed()
            self._send()

    def _schedule_next(self) -> None:
        self.rpc = -1
        self.cluster.scheduler.after(self.rng.randint(*self.interval_ms), self._next_round)

    def deliver(self, envelope: Envelope) -> None:
        msg = envelope.payload
        if not isinstance(msg, ReassignResp) or msg.rpc != self.rpc:
            return
        if msg.response.error_code is ErrorCode.NOT_CONTROLLER:
            self.router.redirect(envelope.source, msg.leader)
            self._send()
            return
        self.router.confirmed(envelope.source)
        for topic in msg.response.responses:
            self.started += sum(p.error_code is ErrorCode.NONE for p in topic.partitions)
        self._schedule_next()


__all__ = ["Reassigner", "TopicCreator"]
