"""The classic group APIs of a broker: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups and OffsetDelete, over the `GroupRuntime` shards (`GroupShard`).

Requests and responses are the classic machine's own dataclasses
(`replication.group.classic`), plus the two defined here for DescribeGroups and OffsetDelete;
only the Kafka listener speaks these (kraft's own clients use KIP-848).

*Long polls.* A request registers an `asyncio.Future` as its handle, the shard runs the call
under its lock (`GroupRuntime.write_effects`: records committed, then replies delivered), and
the handler awaits the Future after the lock is released: a JoinGroup's answer usually comes
out of a later call (another member's JoinGroup, a LeaveGroup, or a tick when the join phase
times out). A shard that is unloaded answers its parked requests NOT_COORDINATOR and the
clients find the coordinator again.

*New member ids* are ``<client id>-<uuid4>``: the uuid is drawn here, in the shell, never in
the pure machine.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from replication.broker.coordinators.group_runtime import Coordinator, GroupRuntime
from replication.broker.coordinators.group_shard import GroupShard
from replication.group import PartitionResult, Result
from replication.group.classic import (
    DescribedGroup,
    Effects,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    Response,
    SyncGroupRequest,
    SyncGroupResponse,
    subscribed_topics,
)
from replication.group.classic.group import ClassicGroup
from replication.group.records import OFFSET_COMMIT, RecordKey, record
from storage.errors import ErrorCode, KraftError

R = TypeVar("R", bound=Response)

_UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupsRequest:
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupsResponse:
    """One entry per asked group; an unknown (or KIP-848) group is Dead, GROUP_ID_NOT_FOUND."""

    groups: tuple[DescribedGroup, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteRequest:
    group_id: str
    partitions: tuple[tuple[str, int], ...]
    """(topic, partition) pairs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteResponse:
    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[PartitionResult, ...] = ()


class ClassicGroupService:
    """The classic group APIs (see the module docstring).

    Args:
        runtime: the broker's group shards.
        partition_of: a group id's offsets partition (raises a KraftError without the topic).
        partition_count: a topic's number of partitions in the broker's image (None: no such
            topic), for OffsetDelete's UNKNOWN_TOPIC_OR_PARTITION.
    """

    def __init__(
        self,
        runtime: GroupRuntime,
        partition_of: Callable[[str], int],
        partition_count: Callable[[str], int | None],
    ) -> None:
        self._runtime = runtime
        self._partition_of = partition_of
        self._partition_count = partition_count

    async def _call(
        self,
        group_id: str,
        run: Callable[[GroupShard, object, int], Effects],
        expected: type[R],
        on_error: Callable[[int], R],
    ) -> R:
        try:
            partition = self._partition_of(group_id)
            handle: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
            await self._runtime.write_effects(partition, lambda c, now: run(_shard(c), handle, now))
            response = await handle
        except KraftError as e:
            return on_error(e.code)
        assert isinstance(response, expected), response
        return response

    async def join_group(self, request: JoinGroupRequest) -> JoinGroupResponse:
        fresh = str(uuid.uuid4())
        return await self._call(
            request.group_id,
            lambda s, h, now: s.classic.join_group(request, h, now, new_member_uuid=fresh),
            JoinGroupResponse,
            lambda code: JoinGroupResponse(error_code=code, member_id=request.member_id),
        )

    async def sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        return await self._call(
            request.group_id,
            lambda s, h, now: s.classic.sync_group(request, h, now),
            SyncGroupResponse,
            lambda code: SyncGroupResponse(error_code=code),
        )

    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        return await self._call(
            request.group_id,
            lambda s, h, now: s.classic.heartbeat(request, h, now),
            HeartbeatResponse,
            lambda code: HeartbeatResponse(error_code=code),
        )

    async def leave_group(self, request: LeaveGroupRequest) -> LeaveGroupResponse:
        return await self._call(
            request.group_id,
            lambda s, h, now: s.classic.leave_group(request, h, now),
            LeaveGroupResponse,
            lambda code: LeaveGroupResponse(error_code=code),
        )

    async def describe_groups(self, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
        out = []
        for group_id in request.group_ids:
            try:
                partition = self._partition_of(group_id)
                (described,) = await self._runtime.read(partition, _describe(group_id))
            except KraftError as e:
                described = DescribedGroup(group_id=group_id, error_code=e.code)
            out.append(described)
        return DescribeGroupsResponse(groups=tuple(out))

    async def offset_delete(self, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        """Kafka's handleOffsetDeleteRequest: a partition the image does not have is answered
        UNKNOWN_TOPIC_OR_PARTITION, the others by the coordinator; a group error (no such
        group, a non-empty classic group, not the coordinator) answers the request alone."""
        if not request.group_id:
            return OffsetDeleteResponse(error_code=ErrorCode.INVALID_GROUP_ID)
        known, unknown = [], []
        for topic, index in dict.fromkeys(request.partitions):
            count = self._partition_count(topic)
            if count is not None and 0 <= index < count:
                known.append((topic, index))
            else:
                unknown.append(PartitionResult(topic=topic, partition=index, error_code=_UNKNOWN))
        known_only = OffsetDeleteRequest(group_id=request.group_id, partitions=tuple(known))
        try:
            partition = self._partition_of(request.group_id)
            answer = await self._runtime.write(
                partition, lambda c, _now: delete_offsets(_shard(c), known_only)
            )
        except KraftError as e:
            return OffsetDeleteResponse(error_code=e.code)
        if answer.error_code != ErrorCode.NONE:
            return answer
        return OffsetDeleteResponse(partitions=(*unknown, *answer.partitions))


def delete_offsets(shard: GroupShard, request: OffsetDeleteRequest) -> Result[OffsetDeleteResponse]:
    """OffsetDelete (Kafka's ``OffsetMetadataManager.deleteOffsets``): an offset of a topic the
    group subscribes to stays (GROUP_SUBSCRIBED_TO_TOPIC); a classic group whose subscriptions
    cannot be read keeps all (NON_EMPTY_GROUP)."""
    gid = request.group_id
    classic = shard.classic.groups().get(gid)
    kept = shard.kip848.groups().get(gid)
    if classic is None and kept is None:
        return Result(
            records=[], response=OffsetDeleteResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND)
        )
    if classic is not None:
        subscribed = _classic_subscriptions(classic)
        if subscribed is None:
            return Result(
                records=[], response=OffsetDeleteResponse(error_code=ErrorCode.NON_EMPTY_GROUP)
            )
    else:
        assert kept is not None
        subscribed = set(kept.subscribed_topic_names())
    offsets = {} if kept is None else kept.offsets
    records = []
    results = []
    for topic, partition in dict.fromkeys(request.partitions):
        code = ErrorCode.NONE
        if topic in subscribed:
            code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        elif (topic, partition) in offsets:
            records.append(
                record(RecordKey(OFFSET_COMMIT, gid, topic=topic, partition=partition), None)
            )
        results.append(PartitionResult(topic=topic, partition=partition, error_code=code))
    return Result(records=records, response=OffsetDeleteResponse(partitions=tuple(results)))


def _classic_subscriptions(group: ClassicGroup) -> set[str] | None:
    """The topics a classic group's members subscribe to (none when Empty); None if a
    member's subscription cannot be read (not the consumer protocol)."""
    topics: set[str] = set()
    if not group.members:
        return topics
    if group.protocol_type != "consumer" or group.protocol_name is None:
        return None
    for member in group.members.values():
        parsed = subscribed_topics(member.metadata(group.protocol_name))
        if parsed is None:
            return None
        topics |= parsed
    return topics


def _describe(group_id: str) -> Callable[[Coordinator], list[DescribedGroup]]:
    return lambda c: _shard(c).describe_classic([group_id])


def _shard(c: Coordinator) -> GroupShard:
    assert isinstance(c, GroupShard)
    return c


__all__ = [
    "ClassicGroupService",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "OffsetDeleteRequest",
    "OffsetDeleteResponse",
    "delete_offsets",
]
