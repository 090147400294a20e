"""The ``kraft.v1.Controller`` service on a broker's port: every request is forwarded to the
active controller (KIP-590 forwarding), so admin clients need only broker addresses.

The broker's `ControllerClient` finds the active controller and follows NOT_CONTROLLER hints
by itself (under one deadline per call); its blocking calls run in a worker thread so the
event loop never waits. A request that still fails when the deadline passes is answered with
gRPC UNAVAILABLE, which the admin client maps to a retriable `NetworkError`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import structlog

from kraft._generated import controller_pb2_grpc
from kraft.controller.acl_control import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from kraft.controller.client import ControllerClient
from kraft.controller.config_describe import DescribeConfigsRequest
from kraft.controller.messages import (
    AllocateProducerIdsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
    RegisterBrokerRequest,
    UnregisterBrokerRequest,
)
from kraft.transport.controller_codec import (
    CurrentLeader,
    DescribeClusterRequest,
    DescribeQuorumRequest,
    decode,
    encode_response,
)
from storage.errors import KraftError

_log = structlog.get_logger("replication.broker.forwarding")

FORWARD_TIMEOUT_S = 10.0
"""How long one forwarded request may take at the broker (the admin client retries after)."""


class ForwardingControllerServicer(controller_pb2_grpc.ControllerServicer):  # type: ignore[misc]
    """Decode, forward with the broker's controller client, encode."""

    def __init__(self, client: ControllerClient) -> None:
        self._client = client

    async def _forward(
        self, request: Any, context: Any, cls: type[Any], *, require_active: bool = False
    ) -> Any:
        try:
            decoded = decode(request, cls)
        except KraftError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, e.message)
            raise  # pragma: no cover - abort raises
        try:
            response = await asyncio.to_thread(
                self._client.send,
                decoded,
                timeout=FORWARD_TIMEOUT_S,
                require_active=require_active,
            )
        except KraftError as e:
            _log.info("forward_failed", request=cls.__name__, error=e.code.name)
            status = (
                grpc.StatusCode.UNAVAILABLE if e.retriable else grpc.StatusCode.INVALID_ARGUMENT
            )
            await context.abort(status, f"forwarding to the controller failed: {e.message}")
            raise  # pragma: no cover - abort raises
        return encode_response(response, CurrentLeader())

    async def BrokerRegistration(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, RegisterBrokerRequest)

    async def BrokerHeartbeat(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, BrokerHeartbeatRequest)

    async def UnregisterBroker(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, UnregisterBrokerRequest)

    async def CreateTopics(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, CreateTopicsRequest)

    async def DeleteTopics(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, DeleteTopicsRequest)

    async def CreatePartitions(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, CreatePartitionsRequest)

    async def AlterPartition(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, AlterPartitionRequest)

    async def ElectLeaders(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, ElectLeadersRequest)

    async def AlterPartitionReassignments(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, AlterPartitionReassignmentsRequest)

    async def ListPartitionReassignments(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, ListPartitionReassignmentsRequest)

    async def IncrementalAlterConfigs(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, IncrementalAlterConfigsRequest)

    async def AllocateProducerIds(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, AllocateProducerIdsRequest)

    async def DescribeCluster(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, DescribeClusterRequest, require_active=True)

    async def DescribeQuorum(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, DescribeQuorumRequest)

    async def DescribeConfigs(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, DescribeConfigsRequest, require_active=True)

    async def CreateAcls(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, CreateAclsRequest)

    async def DeleteAcls(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, DeleteAclsRequest)

    async def DescribeAcls(self, request: Any, context: Any) -> Any:
        return await self._forward(request, context, DescribeAclsRequest, require_active=True)


__all__ = ["FORWARD_TIMEOUT_S", "ForwardingControllerServicer"]
