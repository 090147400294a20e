"""Committed offsets: Kafka's ``OffsetMetadataManager`` commit and fetch, as pure functions of
the replayed groups (the coordinator delegates to them)."""

from __future__ import annotations

from collections.abc import Mapping

from storage.errors import ErrorCode

from .records import OFFSET_COMMIT, OffsetCommitValue, RecordKey, record
from .state import Group
from .types import (
    MAX_GROUP_ID_CHARS,
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionResult,
    Record,
    Result,
)

OFFSET_METADATA_MAX_BYTES = 4096  # offset.metadata.max.bytes


def commit_offsets(
    groups: Mapping[str, Group], req: OffsetCommitRequest, now_ms: int
) -> Result[OffsetCommitResponse]:
    """OffsetCommit (KIP-848 rules: validated by member epoch; -1 and no member id is an
    admin commit, allowed only to an empty group). Records only, no state change."""

    def fail(code: ErrorCode, message: str) -> Result[OffsetCommitResponse]:
        return Result(
            records=[],
            response=OffsetCommitResponse(
                error_code=code,
                error_message=message,
                partitions=tuple(
                    PartitionResult(topic=p.topic, partition=p.partition, error_code=code)
                    for p in req.partitions
                ),
            ),
        )

    if not req.group_id or len(req.group_id) > MAX_GROUP_ID_CHARS:
        return fail(ErrorCode.INVALID_GROUP_ID, "the group id must be 1 to 255 characters")
    group = groups.get(req.group_id)
    members = group.members if group is not None else {}
    if req.member_epoch < 0 and not members:
        pass  # an admin or manual-assign commit to an empty group (Kafka's rule)
    elif req.member_epoch < 0 and not req.member_id:
        return fail(
            ErrorCode.NON_EMPTY_GROUP,
            "an admin commit needs an empty group: the group has members",
        )
    else:
        member = members.get(req.member_id)
        if member is None:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID, "the member is not in the group")
        if req.before_v9:
            return fail(
                ErrorCode.UNSUPPORTED_VERSION,
                "OffsetCommit v9 or later must be used by a member of a consumer group (KIP-848)",
            )
        if req.member_epoch != member.member_epoch:
            return fail(
                ErrorCode.STALE_MEMBER_EPOCH,
                f"member epoch {req.member_epoch} is not the member's {member.member_epoch}",
            )
    records: list[Record] = []
    results: list[PartitionResult] = []
    for p in req.partitions:
        code = ErrorCode.NONE
        if p.offset < 0 or p.partition < 0 or not p.topic:
            code = ErrorCode.INVALID_OFFSET
        elif len(p.metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
            code = ErrorCode.INVALID_REQUEST
        else:
            key = RecordKey(OFFSET_COMMIT, req.group_id, topic=p.topic, partition=p.partition)
            records.append(
                record(
                    key,
                    OffsetCommitValue(
                        offset=p.offset,
                        leader_epoch=p.leader_epoch,
                        metadata=p.metadata,
                        commit_timestamp_ms=now_ms,
                    ),
                )
            )
        results.append(PartitionResult(topic=p.topic, partition=p.partition, error_code=code))
    return Result(records=records, response=OffsetCommitResponse(partitions=tuple(results)))


def fetch_offsets(groups: Mapping[str, Group], req: OffsetFetchRequest) -> OffsetFetchResponse:
    """OffsetFetch from the committed state; with a member epoch, checked as Kafka's v9+."""
    group = groups.get(req.group_id)
    if req.member_epoch >= 0:
        member = None if group is None else group.members.get(req.member_id)
        if member is None:
            return OffsetFetchResponse(
                error_code=ErrorCode.UNKNOWN_MEMBER_ID,
                error_message="the member is not in the group",
            )
        if member.member_epoch != req.member_epoch:
            return OffsetFetchResponse(
                error_code=ErrorCode.STALE_MEMBER_EPOCH,
                error_message=f"member epoch {req.member_epoch} is not the member's "
                f"{member.member_epoch}",
            )
    offsets = {} if group is None else group.offsets
    wanted = sorted(offsets) if req.partitions is None else list(req.partitions)
    out: list[FetchedOffset] = []
    for topic, partition in wanted:
        v = offsets.get((topic, partition))
        if v is None:
            out.append(FetchedOffset(topic=topic, partition=partition, offset=-1))
        else:
            out.append(
                FetchedOffset(
                    topic=topic,
                    partition=partition,
                    offset=v.offset,
                    leader_epoch=v.leader_epoch,
                    metadata=v.metadata,
                )
            )
    return OffsetFetchResponse(offsets=tuple(out))
