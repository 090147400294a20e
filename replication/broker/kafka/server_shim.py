"""A `KafkaBrokerApi` over today's `BrokerServer` (its `BrokerService` and `GroupService`).

Temporary: the broker API of issue 24 (`replication.broker.api`) takes this module's place;
delete it then and hand the listener the broker API. The context is ignored except for the
listener name: Metadata and FindCoordinator answer with the endpoints of the listener the
request came in on (the services answer with each broker's first, gRPC, listener).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from replication.broker.api import RequestContext
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
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataBroker,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from storage.errors import ErrorCode

if TYPE_CHECKING:
    from kraft.metadata.records import Endpoint
    from replication.broker.server import BrokerServer


class BrokerServerApi:
    """`KafkaBrokerApi` by delegation to a `BrokerServer`'s services."""

    def __init__(self, server: BrokerServer) -> None:
        self._server = server

    def _endpoint(self, broker_id: int, listener: str) -> Endpoint | None:
        registration = self._server.image.brokers.get(broker_id)
        if registration is None or registration.fenced:
            return None
        return next((e for e in registration.listeners if e.name == listener), None)

    async def produce(self, request: ProduceRequest, ctx: RequestContext) -> ProduceResponse:
        return await self._server._service.produce(request)

    async def fetch(self, request: BrokerFetchRequest, ctx: RequestContext) -> BrokerFetchResponse:
        return await self._server._service.fetch(request)

    async def list_offsets(
        self, request: ListOffsetsRequest, ctx: RequestContext
    ) -> ListOffsetsResponse:
        return await self._server._service.list_offsets(request)

    async def metadata(self, request: MetadataRequest, ctx: RequestContext) -> MetadataResponse:
        response = await self._server._service.metadata(request)
        brokers = []
        for broker in response.brokers:
            endpoint = self._endpoint(broker.node_id, ctx.listener)
            if endpoint is not None:  # Kafka leaves out brokers without this listener
                brokers.append(
                    MetadataBroker(
                        node_id=broker.node_id,
                        host=endpoint.host,
                        port=endpoint.port,
                        rack=broker.rack,
                    )
                )
        return dataclasses.replace(response, brokers=tuple(brokers))

    async def init_producer_id(
        self, request: InitProducerIdRequest, ctx: RequestContext
    ) -> InitProducerIdResponse:
        return await self._server._service.init_producer_id(request)

    async def find_coordinator(
        self, request: FindCoordinatorRequest, ctx: RequestContext
    ) -> FindCoordinatorResponse:
        response = await self._server.groups.find_coordinator(request)
        coordinators = []
        for c in response.coordinators:
            if c.error_code is ErrorCode.NONE:
                endpoint = self._endpoint(c.node_id, ctx.listener)
                if endpoint is None:
                    c = dataclasses.replace(
                        c, node_id=-1, host="", port=-1,
                        error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    )  # fmt: skip
                else:
                    c = dataclasses.replace(c, host=endpoint.host, port=endpoint.port)
            coordinators.append(c)
        return FindCoordinatorResponse(coordinators=tuple(coordinators))

    async def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, ctx: RequestContext
    ) -> ConsumerGroupHeartbeatResponse:
        return await self._server.groups.consumer_group_heartbeat(request)

    async def offset_commit(
        self, request: OffsetCommitRequest, ctx: RequestContext
    ) -> OffsetCommitResponse:
        return await self._server.groups.offset_commit(request)

    async def offset_fetch(
        self, request: OffsetFetchRequest, ctx: RequestContext
    ) -> OffsetFetchResponse:
        return await self._server.groups.offset_fetch(request)

    async def list_groups(
        self, request: ListGroupsRequest, ctx: RequestContext
    ) -> ListGroupsResponse:
        return await self._server.groups.list_groups(request)

    async def consumer_group_describe(
        self, request: ConsumerGroupDescribeRequest, ctx: RequestContext
    ) -> ConsumerGroupDescribeResponse:
        return await self._server.groups.consumer_group_describe(request)

    async def delete_groups(
        self, request: DeleteGroupsRequest, ctx: RequestContext
    ) -> DeleteGroupsResponse:
        return await self._server.groups.delete_groups(request)


__all__ = ["BrokerServerApi"]
