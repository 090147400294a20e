"""Classic consumer groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as a pure machine.

The group protocol that every client speaks by default (kafka-python, aiokafka, librdkafka,
the Java client, Spark): the members' assignors run in the clients (range, roundrobin,
cooperative-sticky); the coordinator picks the protocol all members support (their vote),
names a leader, hands the leader every member's subscription, stores the leader's
assignments and hands each member its own. Kafka 4.x's ``ClassicGroup`` and the classic paths
of its ``GroupMetadataManager``, with no clock, no I/O and no randomness: time and fresh
member ids are inputs.

One `ClassicGroupManager` per ``__consumer_offsets`` partition, beside the partition's KIP-848
`replication.group.GroupCoordinator`; the shell drives both::

    classic = ClassicGroupManager(config, consumer_groups=kip848.groups().get)
    for key, value in committed_records_of_the_partition:      # on becoming its leader
        if is_classic_record(key): classic.replay(key, value)
        else:                      kip848.replay(key, value)

    # a request: the shell registers a handle (any object but None) for its answer
    fx = classic.join_group(req, handle, now_ms, new_member_uuid=str(uuid4()))
    fx = classic.sync_group(req, handle, now_ms)       # also heartbeat, leave_group
    fx = classic.tick(now_ms)                          # when next_deadline_ms() has passed
    append fx.records (acks=all); wait until committed  # route their replay as above
    for reply in fx.replies: deliver reply.response to reply.handle

A JoinGroup is usually *not* answered by its own call: it parks until the join phase
completes, and its reply comes out of a later call (another member's JoinGroup, a
LeaveGroup, or ``tick`` when the rebalance timeout or the initial rebalance delay passes).
A follower's SyncGroup parks until the leader's. Heartbeat and LeaveGroup are answered at
once. Every handle gets exactly one reply; `ClassicGroupManager.abandon` answers all parked
ones when the shard is unloaded.

Ordering: as the KIP-848 coordinator, one call at a time per manager, and each call's
records committed before its replies are sent (so a member never holds a generation or an
assignment that a new coordinator would not know). Unlike the KIP-848 coordinator, the manager
changes its in-memory groups when it makes the effects, as Kafka's classic groups do;
replaying its own records then changes nothing. If an append fails, answer that call's
replies with the append's error and reload the shard (``abandon``, then replay).

Interop with KIP-848 groups of the same partition (Kafka 4.x's rules where kraft has them):

* JoinGroup for a consumer group with members: INCONSISTENT_GROUP_PROTOCOL (Kafka 4.x would
  host a classic member inside the consumer group; kraft does not). SyncGroup, Heartbeat,
  LeaveGroup for it: UNKNOWN_MEMBER_ID, Kafka's answer for a member it does not know.
* JoinGroup for an empty consumer group deletes it (tombstones in ``Effects.records``, for
  the KIP-848 coordinator to replay) and creates the classic group; offsets stay.
* ConsumerGroupHeartbeat for a classic group (the integrator's check in the KIP-848 path):
  `ClassicGroupManager.has_group` -> GROUP_ID_NOT_FOUND, as Kafka answers when it does not
  upgrade a classic group; an Empty one is released first with `take_over_empty_group`.
* OffsetCommit / TxnOffsetCommit for a classic group: `validate_offset_commit` gives the
  generation and member check (NONE: commit as an admin commit of the KIP-848 offsets path);
  `offset_expiry` says when its offsets may expire (the retention check).
"""

from .manager import ClassicGroupManager, ConsumerGroupLookup
from .records import CLASSIC_GROUP_METADATA, is_classic_record
from .types import (
    FENCED_INSTANCE_ID,
    MEMBER_ID_REQUIRED,
    NO_EFFECTS,
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    ClassicGroupConfig,
    ClassicGroupState,
    DescribedGroup,
    DescribedMember,
    Effects,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    MemberIdentity,
    Protocol,
    Record,
    Reply,
    Response,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from .views import OffsetExpiry, subscribed_topics

__all__ = [
    "CLASSIC_GROUP_METADATA",
    "FENCED_INSTANCE_ID",
    "MEMBER_ID_REQUIRED",
    "NO_EFFECTS",
    "NO_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "ClassicGroupConfig",
    "ClassicGroupManager",
    "ClassicGroupState",
    "ConsumerGroupLookup",
    "DescribedGroup",
    "DescribedMember",
    "Effects",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupMember",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupMemberResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "ListedGroup",
    "MemberIdentity",
    "OffsetExpiry",
    "Protocol",
    "Record",
    "Reply",
    "Response",
    "SyncGroupAssignment",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "is_classic_record",
    "subscribed_topics",
]
