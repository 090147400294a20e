"""The consumer-group RPCs of the ``Broker`` gRPC servicer: proto in, dataclass to
`GroupService`, proto out (a mixin of `replication.broker.service.BrokerServicer`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc

from kraft.security.guard import peer_host
from replication.codec import decode, encode
from replication.group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from storage.errors import KraftError

if TYPE_CHECKING:
    from replication.broker.group_service import GroupService


def _peer_host(context: Any) -> str:
    """``ipv4:127.0.0.1:5555`` -> ``/127.0.0.1`` (Kafka's CLIENT-HOST shows ``/host``)."""
    host = peer_host(str(context.peer() or ""))
    return f"/{host}" if host else ""


class GroupServicer:
    """The group RPCs; the class using it sets ``_groups``."""

    _groups: GroupService | None

    async def _group_call(
        self, request: Any, context: Any, cls: type[Any], run: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        if self._groups is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "no group coordinator here")
        try:
            decoded = decode(request, cls)
        except KraftError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, e.message)
            raise  # pragma: no cover - abort raises
        return encode(await run(decoded))

    def _group_service(self) -> GroupService:
        assert self._groups is not None
        return self._groups

    async def FindCoordinator(self, request: Any, context: Any) -> Any:
        return await self._group_call(
            request,
            context,
            FindCoordinatorRequest,
            lambda r: self._group_service().find_coordinator(r),
        )

    async def ConsumerGroupHeartbeat(self, request: Any, context: Any) -> Any:
        def run(r: ConsumerGroupHeartbeatRequest) -> Awaitable[Any]:
            if not r.client_host:
                r = dataclasses.replace(r, client_host=_peer_host(context))
            return self._group_service().consumer_group_heartbeat(r)

        return await self._group_call(request, context, ConsumerGroupHeartbeatRequest, run)

    async def OffsetCommit(self, request: Any, context: Any) -> Any:
        return await self._group_call(
            request, context, OffsetCommitRequest, lambda r: self._group_service().offset_commit(r)
        )

    async def OffsetFetch(self, request: Any, context: Any) -> Any:
        return await self._group_call(
            request, context, OffsetFetchRequest, lambda r: self._group_service().offset_fetch(r)
        )

    async def ListGroups(self, request: Any, context: Any) -> Any:
        return await self._group_call(
            request, context, ListGroupsRequest, lambda r: self._group_service().list_groups(r)
        )

    async def ConsumerGroupDescribe(self, request: Any, context: Any) -> Any:
        return await self._group_call(
            request,
            context,
            ConsumerGroupDescribeRequest,
            lambda r: self._group_service().consumer_group_describe(r),
        )

    async def DeleteGroups(self, request: Any, context: Any) -> Any:
        return await self._group_call(
            request, context, DeleteGroupsRequest, lambda r: self._group_service().delete_groups(r)
        )


__all__ = ["GroupServicer"]
