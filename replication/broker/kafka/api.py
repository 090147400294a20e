"""`KafkaBrokerApi`: what the Kafka listener needs of the broker (the broker API's handlers).

The broker API (`replication.broker.api`, issue 24) serves every transport with these methods;
each takes one of kraft's request dataclasses and the transport's `RequestContext`. The listener
is written against this Protocol only; the broker serves it with its `BrokerApi`, so a Kafka
client is authorized, bounded and counted exactly as a gRPC one is.
"""

from __future__ import annotations

from typing import Protocol

from replication.broker.api import RequestContext
from replication.broker.classic_service import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
)
from replication.group.classic import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from replication.group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from replication.kafka_only_messages import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)


class KafkaBrokerApi(Protocol):
    """The broker API's handlers the Kafka listener calls (Kafka's ``KafkaApis``).

    `metadata` and `find_coordinator` answer with the endpoints of ``ctx.listener`` (Kafka:
    Metadata on a listener returns that listener's endpoint of every broker).
    """

    async def produce(self, request: ProduceRequest, ctx: RequestContext) -> ProduceResponse: ...

    async def fetch(
        self, request: BrokerFetchRequest, ctx: RequestContext
    ) -> BrokerFetchResponse: ...

    async def list_offsets(
        self, request: ListOffsetsRequest, ctx: RequestContext
    ) -> ListOffsetsResponse: ...

    async def metadata(self, request: MetadataRequest, ctx: RequestContext) -> MetadataResponse: ...

    async def init_producer_id(
        self, request: InitProducerIdRequest, ctx: RequestContext
    ) -> InitProducerIdResponse: ...

    async def find_coordinator(
        self, request: FindCoordinatorRequest, ctx: RequestContext
    ) -> FindCoordinatorResponse: ...

    async def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, ctx: RequestContext
    ) -> ConsumerGroupHeartbeatResponse: ...

    async def offset_commit(
        self, request: OffsetCommitRequest, ctx: RequestContext
    ) -> OffsetCommitResponse: ...

    async def offset_fetch(
        self, request: OffsetFetchRequest, ctx: RequestContext
    ) -> OffsetFetchResponse: ...

    async def list_groups(
        self, request: ListGroupsRequest, ctx: RequestContext
    ) -> ListGroupsResponse: ...

    async def consumer_group_describe(
        self, request: ConsumerGroupDescribeRequest, ctx: RequestContext
    ) -> ConsumerGroupDescribeResponse: ...

    async def delete_groups(
        self, request: DeleteGroupsRequest, ctx: RequestContext
    ) -> DeleteGroupsResponse: ...

    async def describe_log_dirs(
        self, request: DescribeLogDirsRequest, ctx: RequestContext
    ) -> DescribeLogDirsResponse: ...

    async def describe_producers(
        self, request: DescribeProducersRequest, ctx: RequestContext
    ) -> DescribeProducersResponse: ...

    async def forward(self, request: object, ctx: RequestContext) -> object:
        """An admin request (`kraft.controller.messages`, ...) to the active controller,
        authorized first; raises `storage.errors.KraftError` for a request refused whole
        (its code is Kafka's) or a controller out of reach."""
        ...

    async def join_group(
        self, request: JoinGroupRequest, ctx: RequestContext
    ) -> JoinGroupResponse: ...

    async def sync_group(
        self, request: SyncGroupRequest, ctx: RequestContext
    ) -> SyncGroupResponse: ...

    async def heartbeat(
        self, request: HeartbeatRequest, ctx: RequestContext
    ) -> HeartbeatResponse: ...

    async def leave_group(
        self, request: LeaveGroupRequest, ctx: RequestContext
    ) -> LeaveGroupResponse: ...

    async def describe_groups(
        self, request: DescribeGroupsRequest, ctx: RequestContext
    ) -> DescribeGroupsResponse: ...

    async def offset_delete(
        self, request: OffsetDeleteRequest, ctx: RequestContext
    ) -> OffsetDeleteResponse: ...


__all__ = ["KafkaBrokerApi"]
