"""The Kafka adapter's classic group handlers: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups and OffsetDelete (`replication.group.classic` behind the broker API).

Shaped as `replication.broker.kafka.apis.table` (whose table includes `CLASSIC_HANDLERS`). Older
versions are converted into the newest shape: JoinGroup v2-v3 have no member id round trip
(KIP-394 starts at v4, the machine is told the version), LeaveGroup v0-v2 name one member and
answer its error as the request's, DescribeGroups before v6 answer an unknown group with
error NONE (state Dead), as Kafka does.

A JoinGroup's answer may come long after the request (a long poll): the handler awaits it; the
listener runs each request as its own task and keeps the responses in order per connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from replication.broker.api import RequestContext
from replication.broker.coordinators.classic_service import (
    DescribeGroupsRequest,
    OffsetDeleteRequest,
)
from replication.broker.kafka.api import ApiSpec, KafkaBrokerApi, Response
from replication.broker.kafka.entities import millis
from replication.broker.kafka.frames import Request
from replication.group.classic import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    Protocol,
    SyncGroupAssignment,
    SyncGroupRequest,
)
from storage.errors import ErrorCode

DESCRIBE_GROUPS_NOT_FOUND_VERSION: Final = 6
"""DescribeGroups answers an unknown group GROUP_ID_NOT_FOUND from this version (KIP-1043)."""


async def handle_join_group(api: KafkaBrokerApi, request: Request, ctx: RequestContext) -> Response:
    body = request.body
    session_ms = millis(body.session_timeout)
    rebalance_ms = millis(getattr(body, "rebalance_timeout", None))
    answer = await api.join_group(
        JoinGroupRequest(
            group_id=body.group_id,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms if rebalance_ms >= 0 else session_ms,
            member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            protocol_type=body.protocol_type,
            protocols=tuple(Protocol(name=p.name, metadata=p.metadata) for p in body.protocols),
            reason=getattr(body, "reason", None),
            api_version=request.api_version,
        ),
        ctx,
    )
    return {
        "error_code": answer.error_code,
        "generation_id": answer.generation_id,
        "protocol_type": answer.protocol_type,
        "protocol_name": answer.protocol_name,
        "leader": answer.leader,
        "skip_assignment": answer.skip_assignment,
        "member_id": answer.member_id,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in answer.members
        ],
    }


async def handle_sync_group(api: KafkaBrokerApi, request: Request, ctx: RequestContext) -> Response:
    body = request.body
    answer = await api.sync_group(
        SyncGroupRequest(
            group_id=body.group_id,
            generation_id=body.generation_id,
            member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            protocol_type=getattr(body, "protocol_type", None),
            protocol_name=getattr(body, "protocol_name", None),
            assignments=tuple(
                SyncGroupAssignment(member_id=a.member_id, assignment=a.assignment)
                for a in body.assignments
            ),
        ),
        ctx,
    )
    return {
        "error_code": answer.error_code,
        "protocol_type": answer.protocol_type,
        "protocol_name": answer.protocol_name,
        "assignment": answer.assignment,
    }


async def handle_heartbeat(api: KafkaBrokerApi, request: Request, ctx: RequestContext) -> Response:
    body = request.body
    answer = await api.heartbeat(
        HeartbeatRequest(
            group_id=body.group_id,
            generation_id=body.generation_id,
            member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
        ),
        ctx,
    )
    return {"error_code": answer.error_code}


async def handle_leave_group(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    members = getattr(body, "members", None)
    single = members is None  # v0-v2: one member, its error is the request's
    identities = (
        (MemberIdentity(member_id=body.member_id),)
        if members is None
        else tuple(
            MemberIdentity(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                reason=getattr(m, "reason", None),
            )
            for m in members
        )
    )
    answer = await api.leave_group(
        LeaveGroupRequest(group_id=body.group_id, members=identities), ctx
    )
    error = answer.error_code
    if single and error == ErrorCode.NONE and answer.members:
        error = answer.members[0].error_code
    return {
        "error_code": error,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "error_code": m.error_code,
            }
            for m in answer.members
        ],
    }


async def handle_describe_groups(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    answer = await api.describe_groups(
        DescribeGroupsRequest(group_ids=tuple(request.body.groups)), ctx
    )
    old = request.api_version < DESCRIBE_GROUPS_NOT_FOUND_VERSION
    return {
        "groups": [
            {
                "error_code": ErrorCode.NONE
                if old and g.error_code == ErrorCode.GROUP_ID_NOT_FOUND
                else g.error_code,
                "group_id": g.group_id,
                # Kafka: a group not found is Dead; any other error's state is unknown ("")
                "group_state": g.state.value
                if g.error_code in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND)
                else "",
                "protocol_type": g.protocol_type,
                "protocol_data": g.protocol_data,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in g.members
                ],
            }
            for g in answer.groups
        ]
    }


async def handle_offset_delete(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    answer = await api.offset_delete(
        OffsetDeleteRequest(
            group_id=body.group_id,
            partitions=tuple(
                (t.name, p.partition_index) for t in body.topics for p in t.partitions
            ),
        ),
        ctx,
    )
    if answer.error_code != ErrorCode.NONE:
        return {"error_code": answer.error_code, "topics": []}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for p in answer.partitions:
        by_topic.setdefault(p.topic, []).append(
            {"partition_index": p.partition, "error_code": p.error_code}
        )
    return {
        "error_code": ErrorCode.NONE,
        "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
    }


CLASSIC_HANDLERS: Final[Mapping[int, ApiSpec]] = {
    11: ApiSpec("JoinGroup", 2, 9, handle_join_group),
    12: ApiSpec("Heartbeat", 0, 4, handle_heartbeat),
    13: ApiSpec("LeaveGroup", 0, 5, handle_leave_group),
    14: ApiSpec("SyncGroup", 0, 5, handle_sync_group),
    15: ApiSpec("DescribeGroups", 0, 6, handle_describe_groups),
    47: ApiSpec("OffsetDelete", 0, 0, handle_offset_delete),
}
"""API key -> Kafka's name, the versions served (Kafka 4.x's floors, KIP-896), the handler."""

__all__ = ["CLASSIC_HANDLERS"]
