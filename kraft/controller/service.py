"""`ControllerServicer`: the ``kraft.v1.Controller`` gRPC service of a controller process, the
wire adapter of `ControllerServer`: each RPC decodes its request (a large one in a worker
thread), answers a request out of bounds at once (`kraft.controller.limits`), else submits it
to the server and encodes the answer with the current leader."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from kraft._generated import controller_pb2_grpc
from kraft.controller.limits import (
    reject_create_partitions,
    reject_create_topics,
    reject_delete_topics,
    reject_elect_leaders,
    reject_incremental_alter_configs,
)
from kraft.controller.messages import (
    AllocateProducerIdsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
    RegisterBrokerRequest,
    UnregisterBrokerRequest,
    UpdateFeaturesRequest,
)
from kraft.controller.reassignment import reject_alter_partition_reassignments
from kraft.raft.messages import AddRaftVoterRequest, DescribeQuorumRequest, RemoveRaftVoterRequest
from kraft.raft_shell.voter_changes import add_raft_voter, remove_raft_voter
from kraft.transport.controller_codec import decode, encode_response
from storage.errors import ErrorCode, KraftError

if TYPE_CHECKING:
    from kraft.controller.server import ControllerServer

Req = TypeVar("Req")
Resp = TypeVar("Resp")

SECURITY_DISABLED_MESSAGE = (
    "no authorizer is configured on the cluster, so ACLs would not be enforced: set "
    "authorizer.class.name on every node (kraft cluster up --tls --authorizer)"
)
"""The answer to an ACL request on a cluster without an authorizer (SECURITY_DISABLED)."""

OFF_LOOP_DECODE_BYTES = 256 * 1024
"""A request at least this large is decoded (and checked against `kraft.controller.limits`)
in a worker thread: the event loop keeps answering Raft and heartbeats meanwhile."""


class ControllerServicer(controller_pb2_grpc.ControllerServicer):  # type: ignore[misc]
    """The ``kraft.v1.Controller`` service: decode, submit to the server, encode."""

    def __init__(self, server: ControllerServer) -> None:
        self._server = server

    async def _call(
        self,
        request: Any,
        context: grpc.aio.ServicerContext,
        cls: type[Req],
        run: Callable[[Req], Awaitable[Any]],
        reject: Callable[[Req], object | None] | None = None,
    ) -> Any:
        """Decode, answer a request out of bounds at once (``reject``, a pure check from
        `kraft.controller.limits`), else ``run`` it. A large request is decoded, checked and
        its rejection encoded in a worker thread, never on the loop that runs Raft."""
        off_loop = request.ByteSize() >= OFF_LOOP_DECODE_BYTES
        try:
            if off_loop:
                decoded, early = await asyncio.to_thread(_decode_and_check, request, cls, reject)
            else:
                decoded, early = _decode_and_check(request, cls, reject)
        except KraftError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, e.message)
            raise  # pragma: no cover - abort raises
        leader = self._server.current_leader()
        if early is not None:
            if off_loop:
                return await asyncio.to_thread(encode_response, early, leader)
            return encode_response(early, leader)
        response = await run(decoded)
        return encode_response(response, self._server.current_leader())

    async def BrokerRegistration(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            RegisterBrokerRequest,
            lambda r: s.submit(r, lambda c: c.handle_register_broker_request),
        )

    async def BrokerHeartbeat(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            BrokerHeartbeatRequest,
            lambda r: s.submit(r, lambda c: c.handle_broker_heartbeat_request),
        )

    async def UnregisterBroker(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            UnregisterBrokerRequest,
            lambda r: s.submit(r, lambda c: c.handle_unregister_broker_request),
        )

    async def CreateTopics(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            CreateTopicsRequest,
            lambda r: s.submit(r, lambda c: c.handle_create_topics_request),
            lambda r: reject_create_topics(r, s.core.config.default_num_partitions),
        )

    async def DeleteTopics(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            DeleteTopicsRequest,
            lambda r: s.submit(r, lambda c: c.handle_delete_topics_request),
            reject_delete_topics,
        )

    async def CreatePartitions(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            CreatePartitionsRequest,
            lambda r: s.submit(r, lambda c: c.handle_create_partitions_request),
            reject_create_partitions,
        )

    async def AlterPartition(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            AlterPartitionRequest,
            lambda r: s.submit(r, lambda c: c.handle_alter_partition_request),
        )

    async def ElectLeaders(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            ElectLeadersRequest,
            lambda r: s.submit(r, lambda c: c.handle_elect_leaders_request),
            reject_elect_leaders,
        )

    async def AlterPartitionReassignments(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            AlterPartitionReassignmentsRequest,
            lambda r: s.submit(r, lambda c: c.handle_alter_partition_reassignments_request),
            reject_alter_partition_reassignments,
        )

    async def ListPartitionReassignments(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            ListPartitionReassignmentsRequest,
            lambda r: s.submit(r, lambda c: c.handle_list_partition_reassignments_request),
        )

    async def IncrementalAlterConfigs(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            IncrementalAlterConfigsRequest,
            lambda r: s.submit(r, lambda c: c.handle_incremental_alter_configs_request),
            reject_incremental_alter_configs,
        )

    async def AllocateProducerIds(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            AllocateProducerIdsRequest,
            lambda r: s.submit(r, lambda c: c.handle_allocate_producer_ids_request),
        )

    async def DescribeCluster(self, request: Any, context: Any) -> Any:
        try:
            decoded = decode(request, DescribeClusterRequest)
        except KraftError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, e.message)
            raise  # pragma: no cover - abort raises
        return await self._server.describe_cluster_message(decoded)

    async def DescribeQuorum(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(request, context, DescribeQuorumRequest, _now(s.describe_quorum))

    async def AddRaftVoter(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            AddRaftVoterRequest,
            lambda r: add_raft_voter(s.raft, r, s.core.skip_to),
        )

    async def RemoveRaftVoter(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            RemoveRaftVoterRequest,
            lambda r: remove_raft_voter(s.raft, r, s.core.skip_to),
        )

    async def DescribeConfigs(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            DescribeConfigsRequest,
            _now(s.describe_configs),
        )

    def _security_disabled(self, response_cls: type[Resp]) -> Callable[[object], Resp | None]:
        """Kafka's ControllerApis answers every ACL request SECURITY_DISABLED when no
        authorizer is configured: an ACL stored there would be enforced by nobody."""
        enabled = self._server.config.authorization.enabled

        def reject(_request: object) -> Resp | None:
            if enabled:
                return None
            return response_cls(  # type: ignore[call-arg]
                error_code=ErrorCode.SECURITY_DISABLED, error_message=SECURITY_DISABLED_MESSAGE
            )

        return reject

    async def CreateAcls(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            CreateAclsRequest,
            lambda r: s.submit(r, lambda c: c.handle_create_acls_request),
            self._security_disabled(CreateAclsResponse),
        )

    async def DeleteAcls(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            DeleteAclsRequest,
            lambda r: s.submit(r, lambda c: c.handle_delete_acls_request),
            self._security_disabled(DeleteAclsResponse),
        )

    async def DescribeAcls(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            DescribeAclsRequest,
            _now(s.describe_acls),
            self._security_disabled(DescribeAclsResponse),
        )

    async def UpdateFeatures(self, request: Any, context: Any) -> Any:
        s = self._server
        return await self._call(
            request,
            context,
            UpdateFeaturesRequest,
            lambda r: s.submit(r, lambda c: c.handle_update_features_request),
        )


def _decode_and_check(
    request: Any, cls: type[Req], reject: Callable[[Req], object | None] | None
) -> tuple[Req, object | None]:
    """Decode ``request`` and run the pure bounds check (either thread)."""
    decoded = decode(request, cls)
    return decoded, None if reject is None else reject(decoded)


def _now(fn: Callable[[Req], Resp]) -> Callable[[Req], Awaitable[Resp]]:
    """Wrap a synchronous read as the coroutine `ControllerServicer._call` expects."""

    async def run(request: Req) -> Resp:
        return fn(request)

    return run


__all__ = ["OFF_LOOP_DECODE_BYTES", "SECURITY_DISABLED_MESSAGE", "ControllerServicer"]
