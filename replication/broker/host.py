"""What the API handlers need of the broker: narrow Protocols in place of `BrokerServer`
(below the API layer, `replication.broker.api`, which calls those handlers).

`ReplicaHost` is what Produce, Fetch, ListOffsets, Metadata and InitProducerId read
(`replication.broker.service.BrokerService`), and `ServedReplica` what they read of one replica;
`GroupHost` what the group APIs read (`replication.broker.coordinators.group_service.GroupService`).
A `BrokerServer` (with its `PartitionReplica`s) is both; the simulator's broker
(`replication.sim.broker.SimBroker`, with its `SimReplica`s) is a `ReplicaHost`, so the seeds run
the request handling the broker runs; a test may hand in anything that has these members."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kraft.types import TopicPartition

if TYPE_CHECKING:
    import asyncio
    from pathlib import Path

    from kraft.controller.messages import AllocateProducerIdsResponse
    from kraft.metadata import MetadataImage
    from replication.broker.config import BrokerNodeConfig
    from replication.broker.replicas.partition import PartitionReplica
    from replication.broker.replicas.throttle import ThrottleBucket
    from replication.core import (
        FollowerFetch,
        LeaderFetchAnswer,
        PartitionLeader,
        ProduceCompletion,
    )
    from replication.core.producer_state import ProducerStateManager
    from replication.driver import PartitionDriver
    from storage.errors import ErrorCode
    from storage.file_region import Records


class ServedLog(Protocol):
    """A replica's log as the partition APIs read it (`storage.log.SegmentedLog`,
    `kraft.sim.cluster_log.SimPartitionLog`)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def directory(self) -> Path: ...

    @property
    def size_bytes(self) -> int: ...

    def read(
        self, from_offset: int, max_bytes: int, /, *, max_offset: int | None = None
    ) -> bytes: ...


Admit = Callable[[], "ErrorCode"]
"""A last check run with a Produce's append (KIP-890 part 1's verification guard): NONE, or
the error that refuses the batch."""


class ServedReplica(Protocol):
    """One replica as the partition APIs see it (`PartitionReplica` in the broker, `SimReplica`
    in the simulator)."""

    @property
    def driver(self) -> PartitionDriver: ...

    @property
    def log(self) -> ServedLog: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def producer_state(self) -> ProducerStateManager: ...

    @property
    def changed(self) -> asyncio.Event:
        """Set when the log end offset or the high watermark moved (a long poll waits on it)."""
        ...

    @property
    def leader(self) -> PartitionLeader | None:
        """The ISR leader core when this replica leads an ISR partition (KIP-392 reads its
        view of the followers)."""
        ...

    def raft_leader(self) -> tuple[int, int] | None: ...

    async def produce(
        self, acks: int, timeout_ms: int, records: bytes, admit: Admit | None = None
    ) -> ProduceCompletion: ...

    def produce_now(
        self, acks: int, timeout_ms: int, records: bytes
    ) -> asyncio.Future[ProduceCompletion] | None:
        """`produce` appended before it returns when the batch's sequence turn has come (the
        future completes it); None: call `produce`."""
        ...

    def handle_follower_fetch(
        self, fetch: FollowerFetch, max_bytes: int, *, read: bool = True, min_one: bool = True
    ) -> tuple[LeaderFetchAnswer, bytes]: ...

    def read(
        self,
        from_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one: bool = True,
    ) -> bytes: ...

    def read_region(self, from_offset: int, max_bytes: int, max_offset: int | None) -> Records:
        """`read` as a `storage.file_region.FileRegion` where the log is a file (bytes else),
        for a sender that hands it to the kernel (``sendfile``)."""
        ...

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None: ...


class ReplicaHost(Protocol):
    """The broker as the partition APIs see it (Kafka's ReplicaManager and MetadataCache)."""

    @property
    def node_id(self) -> int: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def replicas(self) -> Mapping[TopicPartition, ServedReplica]: ...

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

    async def allocate_producer_ids(self) -> AllocateProducerIdsResponse:
        """A block of producer ids (the transaction coordinator's new ids, KIP-730)."""
        ...

    def broker_stub(self, address: str) -> Any:
        """A ``kraft.v1.Broker`` stub (the transaction coordinator's WriteTxnMarkers)."""
        ...


__all__ = ["GroupHost", "ReplicaHost", "ServedLog", "ServedReplica"]
