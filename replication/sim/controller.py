"""The simulated controller and the cluster's settings.

`SimController` is a `ControllerCore` whose records commit as soon as it makes them (a
one-voter quorum that never fails: controller faults are the Raft simulation's job). It
answers broker registration, heartbeats and AlterPartition, fences a broker whose session
expired (KIP-841: ISR removal and leader moves in the same batch), serves its committed image
to brokers that poll for metadata, and creates the topic once every broker is unfenced.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, final

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.controller import ControllerConfig, ControllerCore
from kraft.controller.messages import CreatableTopic, CreateTopicsRequest
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import MetadataRecord
from kraft.sim.cluster_network import Envelope
from replication.core import ReplicationConfig, TruncationStrategy
from replication.sim.messages import (
    AlterReq,
    AlterResp,
    HeartbeatReq,
    HeartbeatResp,
    MetadataReq,
    MetadataResp,
    RegisterReq,
    RegisterResp,
)
from storage.errors import ErrorCode

if TYPE_CHECKING:
    from replication.sim.cluster import BrokerCluster

CONTROLLER_ID: Final = 0
TOPIC: Final = "events"
QUIET: FilteringBoundLogger = structlog.wrap_logger(
    structlog.PrintLogger(), wrapper_class=structlog.make_filtering_bound_logger(50)
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterConfig:
    """The simulated cluster's settings (sim milliseconds), tuned so faults matter quickly."""

    brokers: int = 3
    partitions: int = 2
    replication_factor: int = 3
    min_insync_replicas: int = 2
    tick_ms: int = 10
    heartbeat_interval_ms: int = 50
    session_timeout_ms: int = 500
    """``broker.session.timeout.ms``."""
    metadata_poll_ms: int = 20
    request_timeout_ms: int = 250
    fetch_max_wait_ms: int = 60
    fetch_max_bytes: int = 4096
    flush_interval_ms: int = 100
    """How often a broker flushes its logs (``flush.ms``, or the OS writing back)."""
    checkpoint_interval_ms: int = 100
    """``replica.high.watermark.checkpoint.interval.ms``."""
    replica_lag_time_ms_max: int = 300
    replica_fetch_backoff_ms: int = 50
    alter_partition_retry_backoff_ms: int = 50
    truncation_strategy: TruncationStrategy = TruncationStrategy.LEADER_EPOCH
    """`TruncationStrategy.HIGH_WATERMARK` replays Kafka before KIP-101 (checker tests only)."""

    def replication(self) -> ReplicationConfig:
        return ReplicationConfig(
            min_insync_replicas=self.min_insync_replicas,
            replica_lag_time_ms_max=self.replica_lag_time_ms_max,
            replica_fetch_backoff_ms=self.replica_fetch_backoff_ms,
            alter_partition_retry_backoff_ms=self.alter_partition_retry_backoff_ms,
        )


@final
class SimController:
    """A `ControllerCore` whose records commit at once; creates the topic once all brokers are
    unfenced."""

    def __init__(self, cluster: BrokerCluster, rng: random.Random) -> None:
        self.cluster = cluster
        self.core = ControllerCore(
            rng=rng,
            config=ControllerConfig(broker_session_timeout_ms=cluster.config.session_timeout_ms),
            log=QUIET,
        )
        self.core.become_active(epoch=1, next_offset=1, now_ms=0)
        self.topic_created = False

    @property
    def image(self) -> MetadataImage:
        return self.core.committed_image

    def _commit(self, records: tuple[MetadataRecord, ...], base: int) -> None:
        if records:
            self.core.replay_batch(records, base, 1)
            self.cluster.checker.on_metadata(self.core.committed_image)

    def tick(self) -> None:
        now = self.cluster.clock.now_ms
        base = self.core.next_offset
        self._commit(self.core.tick(now), base)
        if not self.topic_created:
            config = self.cluster.config
            if len(self.image.unfenced_broker_ids()) >= config.brokers:
                self.topic_created = True
                base = self.core.next_offset
                result = self.core.handle_create_topics_request(
                    CreateTopicsRequest(
                        topics=(
                            CreatableTopic(
                                name=TOPIC,
                                num_partitions=config.partitions,
                                replication_factor=config.replication_factor,
                                configs={"min.insync.replicas": str(config.min_insync_replicas)},
                            ),
                        )
                    ),
                    now,
                )
                assert result.response.topics[0].error_code is ErrorCode.NONE, result.response
                self._commit(result.records, base)

    def deliver(self, envelope: Envelope) -> None:
        now = self.cluster.clock.now_ms
        msg = envelope.payload
        send = self.cluster.network.send
        base = self.core.next_offset
        if isinstance(msg, MetadataReq):
            if self.image.last_offset > msg.last_offset:
                send(CONTROLLER_ID, envelope.source, MetadataResp(self.image))
        elif isinstance(msg, HeartbeatReq):
            hb = self.core.handle_broker_heartbeat_request(msg.request, now)
            self._commit(hb.records, base)
            send(CONTROLLER_ID, envelope.source, HeartbeatResp(hb.response, msg.rpc))
        elif isinstance(msg, RegisterReq):
            reg = self.core.handle_register_broker_request(msg.request, now)
            self._commit(reg.records, base)
            send(CONTROLLER_ID, envelope.source, RegisterResp(reg.response, msg.rpc))
        elif isinstance(msg, AlterReq):
            alter = self.core.handle_alter_partition_request(msg.request, now)
            self._commit(alter.records, base)
            send(CONTROLLER_ID, envelope.source, AlterResp(alter.response, msg.rpc))


__all__ = ["CONTROLLER_ID", "QUIET", "TOPIC", "ClusterConfig", "SimController"]
