"""What the API handlers need of the broker: narrow Protocols in place of `BrokerServer`
(below the API layer, `replication.broker.api`, which calls those handlers).

`ReplicaHost` is what Produce, Fetch, ListOffsets, Metadata and InitProducerId read
(`replication.broker.service.BrokerService`); `GroupHost` what the group APIs read
(`replication.broker.group_service.GroupService`). A `BrokerServer` is both; a test or the
simulator may hand in anything that has these members.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from kraft.types import TopicPartition

if TYPE_CHECKING:
    from kraft.controller.messages import AllocateProducerIdsResponse
    from kraft.metadata import MetadataImage
    from replication.broker.config import BrokerNodeConfig
    from replication.broker.partition import PartitionReplica
    from replication.broker.throttle import ThrottleBucket


class ReplicaHost(Protocol):
    """The broker as the partition APIs see it (Kafka's ReplicaManager and MetadataCache)."""

    @property
    def config(self) -> BrokerNodeConfig: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def replicas(self) -> Mapping[TopicPartition, PartitionReplica]: ...

    @property
    def stopping(self) -> bool: ...

    @property
    def leader_throttle(self) -> ThrottleBucket: ...

    def is_adding_replica(self, tp: TopicPartition, replica_id: int) -> bool: ...

    def controller_leader_id(self) -> int | None: ...

    async def allocate_producer_ids(self) -> AllocateProducerIdsResponse: ...


class GroupHost(Protocol):
    """The broker as the group coordinator's APIs see it."""

    @property
    def config(self) -> BrokerNodeConfig: ...

    @property
    def node_id(self) -> int: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def replicas(self) -> Mapping[TopicPartition, PartitionReplica]: ...

    async def list_latest_offsets(
        self, leader_id: int, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The high watermarks broker ``leader_id`` reports for ``partitions`` (the lag
        metrics of the groups coordinated here); those it did not answer for left out."""
        ...

    async def create_internal_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> None: ...


__all__ = ["GroupHost", "ReplicaHost"]
