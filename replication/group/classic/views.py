"""Reads of the classic groups: DescribeGroups, ListGroups and the OffsetCommit check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from storage.errors import ErrorCode

from .group import ClassicGroup
from .rebalance import validate_member
from .types import ClassicGroupState, DescribedGroup, DescribedMember, ListedGroup

S = ClassicGroupState


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
