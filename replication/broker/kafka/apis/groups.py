"""The Kafka adapter's consumer-group handlers: FindCoordinator, OffsetCommit, OffsetFetch,
ListGroups, DeleteGroups, and KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe.

Shaped as `replication.broker.kafka.apis.table` (whose table includes `GROUP_HANDLERS`). Kafka
names a group's topics by id in the KIP-848 APIs; kraft's group dataclasses name them, so those
two handlers map ids through one Metadata answer of the broker API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from replication.broker.api import RequestContext
from replication.broker.kafka.api import ApiSpec, KafkaBrokerApi, Response
from replication.broker.kafka.entities import millis
from replication.broker.kafka.frames import Request
from replication.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    FindCoordinatorRequest,
    GroupTopicPartitions,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
)
from storage.errors import ErrorCode

# -- FindCoordinator ------------------------------------------------------------------------------


async def handle_find_coordinator(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    keys = getattr(body, "coordinator_keys", None)
    single = keys is None  # v0-v3: one key, answered flat
    answer = await api.find_coordinator(
        FindCoordinatorRequest(
            key_type=getattr(body, "key_type", 0),
            coordinator_keys=(body.key,) if keys is None else tuple(keys),
        ),
        ctx,
    )
    coordinators = [
        {
            "key": c.key,
            "node_id": c.node_id,
            "host": c.host,
            "port": c.port,
            "error_code": c.error_code,
            "error_message": c.error_message or None,
        }
        for c in answer.coordinators
    ]
    if single:
        first = coordinators[0] if coordinators else {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR}
        return {k: v for k, v in first.items() if k != "key"}
    return {"coordinators": coordinators}


# -- OffsetCommit, OffsetFetch --------------------------------------------------------------------


def offset_commit_request(body: Any, generation_id_or_member_epoch: int) -> OffsetCommitRequest:
    """The OffsetCommit of a kio OffsetCommit or TxnOffsetCommit body."""
    return OffsetCommitRequest(
        group_id=body.group_id,
        generation_id_or_member_epoch=generation_id_or_member_epoch,
        member_id=getattr(body, "member_id", "") or "",
        topics=tuple(
            OffsetCommitRequestTopic(
                name=t.name,
                partitions=tuple(
                    OffsetCommitRequestPartition(
                        partition_index=p.partition_index,
                        committed_offset=p.committed_offset,
                        committed_leader_epoch=getattr(p, "committed_leader_epoch", -1),
                        committed_metadata=p.committed_metadata or "",
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
    )


def offset_commit_answer(body: Any, answer: OffsetCommitResponse) -> dict[str, Any]:
    """The kio response of an OffsetCommit or TxnOffsetCommit: a group error (Kafka answers
    it per partition) or each partition's."""
    if answer.error_code is not ErrorCode.NONE:
        return {
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {"partition_index": p.partition_index, "error_code": answer.error_code}
                        for p in t.partitions
                    ],
                }
                for t in body.topics
            ]
        }
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": p.error_code}
                    for p in t.partitions
                ],
            }
            for t in answer.topics
        ]
    }


async def handle_offset_commit(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    commit = offset_commit_request(body, body.generation_id_or_member_epoch)
    return offset_commit_answer(body, await api.offset_commit(commit, ctx))


def _offset_fetch_topics(answer: OffsetFetchResponse, group_error: bool) -> list[dict[str, Any]]:
    return [
        {
            "name": t.name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "committed_offset": p.committed_offset,
                    "committed_leader_epoch": p.committed_leader_epoch,
                    "metadata": p.metadata,
                    "error_code": answer.error_code if group_error else p.error_code,
                }
                for p in t.partitions
            ],
        }
        for t in answer.topics
    ]


async def _offset_fetch_one(
    api: KafkaBrokerApi, ctx: RequestContext, group: Any, member: bool, *, require_stable: bool
) -> OffsetFetchResponse:
    topics = group.topics
    return await api.offset_fetch(
        OffsetFetchRequest(
            group_id=group.group_id,
            require_stable=require_stable,
            member_id=(getattr(group, "member_id", None) or "") if member else "",
            member_epoch=getattr(group, "member_epoch", -1) if member else -1,
            topics=()
            if topics is None
            else tuple(
                OffsetFetchRequestTopic(name=t.name, partition_indexes=tuple(t.partition_indexes))
                for t in topics
            ),
        ),
        ctx,
    )


async def handle_offset_fetch(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    groups = getattr(body, "groups", None)
    stable = bool(getattr(body, "require_stable", False))  # v7+ (KIP-447)
    if groups is None:  # v1-v7: one group
        answer = await _offset_fetch_one(api, ctx, body, member=False, require_stable=stable)
        # v1 has no top-level error code: the group's error goes on every partition.
        return {
            "topics": _offset_fetch_topics(answer, group_error=request.api_version < 2),
            "error_code": answer.error_code,
        }
    out = []
    for group in groups:
        answer = await _offset_fetch_one(api, ctx, group, member=True, require_stable=stable)
        out.append(
            {
                "group_id": group.group_id,
                "topics": _offset_fetch_topics(answer, group_error=False),
                "error_code": answer.error_code,
            }
        )
    return {"groups": out}


# -- ListGroups, DeleteGroups ---------------------------------------------------------------------


async def handle_list_groups(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    answer = await api.list_groups(
        ListGroupsRequest(states_filter=tuple(getattr(body, "states_filter", ()) or ())), ctx
    )
    types = {t.lower() for t in getattr(body, "types_filter", ()) or ()}
    return {
        "error_code": answer.error_code,
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.group_state,
                "group_type": g.group_type,
            }
            for g in answer.groups
            if not types or g.group_type.lower() in types
        ],
    }


async def handle_delete_groups(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    answer = await api.delete_groups(
        DeleteGroupsRequest(groups_names=tuple(request.body.groups_names)), ctx
    )
    return {
        "results": [{"group_id": r.group_id, "error_code": r.error_code} for r in answer.results]
    }


# -- ConsumerGroupHeartbeat, ConsumerGroupDescribe (KIP-848) --------------------------------------


async def _topic_ids(api: KafkaBrokerApi, ctx: RequestContext) -> dict[str, str]:
    """Topic name -> topic id (a UUID's text), from the broker API's Metadata."""
    answer = await api.metadata(MetadataRequest(), ctx)
    return {t.name: t.topic_id for t in answer.topics if t.topic_id}


def _by_id(
    parts: tuple[GroupTopicPartitions, ...], ids: Mapping[str, str], with_name: bool = False
) -> list[dict[str, Any]]:
    return [
        {"topic_id": ids[p.topic], "partitions": p.partitions}
        | ({"topic_name": p.topic} if with_name else {})
        for p in parts
        if p.topic in ids
    ]


async def handle_consumer_group_heartbeat(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    if getattr(body, "subscribed_topic_regex", None):  # KIP-848 regexes: not in kraft yet
        return {
            "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": "subscribed_topic_regex is not supported by kraft",
        }
    ids: dict[str, str] = {}
    owned = None
    if body.topic_partitions is not None or body.member_epoch >= 0:
        ids = await _topic_ids(api, ctx)
    if body.topic_partitions is not None:
        names = {topic_id: name for name, topic_id in ids.items()}
        owned = tuple(
            GroupTopicPartitions(topic=names[str(t.topic_id)], partitions=tuple(t.partitions))
            for t in body.topic_partitions
            if str(t.topic_id) in names
        )
    names_list = body.subscribed_topic_names
    answer = await api.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            member_epoch=body.member_epoch,
            instance_id=body.instance_id or "",
            rack_id=body.rack_id or "",
            rebalance_timeout_ms=millis(body.rebalance_timeout),
            subscribed_topic_names=None if names_list is None else tuple(names_list),
            server_assignor=body.server_assignor or "",
            owned_partitions=owned,
            client_id=ctx.client_id,
            client_host=ctx.client_host,
        ),
        ctx,
    )
    assignment = None
    if answer.assignment is not None:
        if not ids:
            ids = await _topic_ids(api, ctx)
        assignment = {"topic_partitions": _by_id(answer.assignment, ids)}
    return {
        "error_code": answer.error_code,
        "error_message": answer.error_message or None,
        "member_id": answer.member_id or None,
        "member_epoch": answer.member_epoch,
        "heartbeat_interval": answer.heartbeat_interval_ms,
        "assignment": assignment,
    }


async def handle_consumer_group_describe(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    answer = await api.consumer_group_describe(
        ConsumerGroupDescribeRequest(group_ids=tuple(request.body.group_ids)), ctx
    )
    ids = await _topic_ids(api, ctx)
    return {
        "groups": [
            {
                "error_code": g.error_code,
                "error_message": g.error_message or None,
                "group_id": g.group_id,
                "group_state": g.group_state,
                "group_epoch": g.group_epoch,
                "assignment_epoch": g.assignment_epoch,
                "assignor_name": g.assignor_name,
                "members": [
                    {
                        "member_id": m.member_id,
                        "instance_id": m.instance_id or None,
                        "rack_id": m.rack_id or None,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": m.subscribed_topic_names,
                        "assignment": {"topic_partitions": _by_id(m.assignment, ids, True)},
                        "target_assignment": {
                            "topic_partitions": _by_id(m.target_assignment, ids, True)
                        },
                        "member_type": 1,  # KIP-1099: a consumer-protocol member
                    }
                    for m in g.members
                ],
            }
            for g in answer.groups
        ]
    }


GROUP_HANDLERS: Final[Mapping[int, ApiSpec]] = {
    8: ApiSpec("OffsetCommit", 2, 9, handle_offset_commit),
    9: ApiSpec("OffsetFetch", 1, 9, handle_offset_fetch),
    10: ApiSpec("FindCoordinator", 0, 5, handle_find_coordinator),
    16: ApiSpec("ListGroups", 0, 5, handle_list_groups),
    42: ApiSpec("DeleteGroups", 0, 2, handle_delete_groups),
    68: ApiSpec("ConsumerGroupHeartbeat", 0, 1, handle_consumer_group_heartbeat),
    69: ApiSpec("ConsumerGroupDescribe", 0, 1, handle_consumer_group_describe),
}

__all__ = ["GROUP_HANDLERS", "offset_commit_answer", "offset_commit_request"]
