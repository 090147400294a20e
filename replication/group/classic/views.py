"""Reads of the classic groups: DescribeGroups, ListGroups, the OffsetCommit check and when
their offsets may expire."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from storage.errors import ErrorCode

from .group import ClassicGroup
from .rebalance import validate_member
from .types import ClassicGroupState, DescribedGroup, DescribedMember, ListedGroup

S = ClassicGroupState
CONSUMER_PROTOCOL_TYPE: Final = "consumer"


def validate_offset_commit(
    groups: Mapping[str, ClassicGroup],
    group_id: str,
    member_id: str,
    generation_id: int,
    group_instance_id: str | None,
    transactional: bool,
) -> int | None:
    """Kafka's ``ClassicGroup.validateOffsetCommit``; None if ``group_id`` is no classic
    group here."""
    group = groups.get(group_id)
    if group is None:
        return None
    if generation_id < 0 and group.state is S.EMPTY:
        return ErrorCode.NONE  # an admin or manual-assign commit to an empty group
    if generation_id >= 0 or member_id or group_instance_id is not None:
        code = validate_member(group, member_id, group_instance_id)
        if code is not None:
            return code
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
    elif not transactional and group.state is not S.EMPTY:
        return ErrorCode.UNKNOWN_MEMBER_ID  # no member id: only an empty group takes it
    if not transactional and group.state is S.COMPLETING_REBALANCE:
        # the member knows the new generation but not its assignment yet
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


def describe_groups(
    groups: Mapping[str, ClassicGroup], group_ids: Sequence[str]
) -> list[DescribedGroup]:
    """Members' subscriptions and assignments are given only in Stable (Kafka's rule)."""
    out: list[DescribedGroup] = []
    for gid in group_ids:
        g = groups.get(gid)
        if g is None:
            out.append(DescribedGroup(group_id=gid, error_code=ErrorCode.GROUP_ID_NOT_FOUND))
            continue
        stable = g.state is S.STABLE
        out.append(
            DescribedGroup(
                group_id=gid,
                state=g.state,
                protocol_type=g.protocol_type or "",
                protocol_data=(g.protocol_name or "") if stable else "",
                members=tuple(
                    DescribedMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        metadata=m.metadata(g.protocol_name) if stable else b"",
                        assignment=m.assignment if stable else b"",
                    )
                    for m in g.members.values()
                ),
            )
        )
    return out


def list_groups(groups: Mapping[str, ClassicGroup]) -> list[ListedGroup]:
    return [
        ListedGroup(group_id=gid, protocol_type=g.protocol_type or "", state=g.state)
        for gid, g in sorted(groups.items())
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetExpiry:
    """When a classic group's committed offsets may expire (``offsets.retention.minutes``),
    Kafka's ``ClassicGroup.offsetExpirationCondition``: none while it rebalances or when its
    members' subscriptions cannot be read; in Empty, counted from when it became Empty; in
    Stable, counted from each commit, for topics no member subscribes to."""

    expires: bool
    since_ms: int | None = None  # None: from each offset's commit time
    subscribed_topics: frozenset[str] = frozenset()


NEVER: Final = OffsetExpiry(expires=False)


def offset_expiry(group: ClassicGroup) -> OffsetExpiry:
    if group.state is S.EMPTY:
        return OffsetExpiry(expires=True, since_ms=group.state_timestamp_ms)
    if group.state is not S.STABLE or group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return NEVER
    topics: set[str] = set()
    for m in group.members.values():
        parsed = subscribed_topics(m.metadata(group.protocol_name))
        if parsed is None:
            return NEVER
        topics |= parsed
    return OffsetExpiry(expires=True, subscribed_topics=frozenset(topics))


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """The topics of a consumer protocol subscription (the v0 prefix every version shares:
    int16 version, then an int32-counted array of int16-length strings); None if unreadable."""
    try:
        (count,) = struct.unpack_from(">i", subscription, 2)
        pos, topics = 6, set()
        if count < 0 or count > len(subscription):
            return None
        for _ in range(count):
            (size,) = struct.unpack_from(">h", subscription, pos)
            if size < 0 or pos + 2 + size > len(subscription):
                return None
            topics.add(subscription[pos + 2 : pos + 2 + size].decode())
            pos += 2 + size
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
