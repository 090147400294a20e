"""The pure group coordinator of KIP-848 consumer groups: one per ``__consumer_offsets`` partition.

Like Kafka's ``GroupMetadataManager`` + ``OffsetMetadataManager`` behind its coordinator runtime,
with no clock, no I/O and no randomness. The broker shell drives it::

    coord = GroupCoordinator(GroupConfig(...))
    for key, value in committed_records_of_the_partition:    # on becoming its leader
        coord.replay(key, value)                             # (answer COORDINATOR_LOAD_IN_PROGRESS
                                                             #  until done)
    # a write: heartbeat, commit_offsets, delete_groups, tick
    result = coord.heartbeat(req, topics, now_ms)
    if result.records:
        append result.records to the partition with acks=all; wait until committed
        for key, value in result.records: coord.replay(key, value)
    send result.response                  # if the append failed: send its error instead

Writes see only replayed (committed) state, so the shell runs them one at a time per
coordinator: each write's records are appended and replayed before the next write starts.
(Kafka's runtime pipelines writes over uncommitted state kept in a timeline; kraft serializes.)
Reads (fetch_offsets, list_groups, describe_groups) see committed state and need no append.

Timers (session and rebalance timeouts) are volatile, as in Kafka: after a load, every member
gets a fresh session timeout at the first tick. ``next_deadline_ms`` tells the shell when to
call ``tick``; a deadline at or before now means "tick now". The shell also calls ``tick`` when
the topic metadata changes, so a group picks up created or grown topics.

Keeping the partition bounded: every record is keyed and latest-wins, so the offsets topic can
be compacted by key; ``snapshot_records`` gives the whole live state as records for a
coordinator snapshot instead.
"""

from .coordinator import GroupCoordinator
from .hashing import java_string_hashcode, partition_for_group
from .types import (
    ADMIN_MEMBER_EPOCH,
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    DeleteGroupsResponse,
    FetchedOffset,
    GroupConfig,
    GroupDescription,
    GroupListing,
    GroupState,
    HeartbeatRequest,
    HeartbeatResponse,
    MemberDescription,
    MemberState,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionResult,
    Record,
    Result,
    TopicInfo,
    TopicPartitions,
)

__all__ = [
    "ADMIN_MEMBER_EPOCH",
    "JOIN_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "DeleteGroupsResponse",
    "FetchedOffset",
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "GroupListing",
    "GroupState",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "MemberDescription",
    "MemberState",
    "OffsetCommitPartition",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "PartitionResult",
    "Record",
    "Result",
    "TopicInfo",
    "TopicPartitions",
    "java_string_hashcode",
    "partition_for_group",
]
