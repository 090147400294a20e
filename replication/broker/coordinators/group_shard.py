"""`GroupShard`: the group coordinators of one ``__consumer_offsets`` partition, as one
`replication.broker.coordinators.group_runtime.Coordinator`: KIP-848's `GroupCoordinator` and the
classic groups' `ClassicGroupManager` (`replication.group.classic`).

Both keep their records in the same partition: `replay` routes each by its key, the snapshot
holds both states, the timers of both run in `tick`. Committed offsets are the KIP-848
coordinator's for every group; a classic group's say when they expire (``offset_expiry``),
and an Empty classic group with no offsets left is deleted when the retention check runs, as
Kafka's ``cleanupGroupMetadata`` does.

The classic machine answers some requests later than their call (a JoinGroup parks until the
join phase completes): its replies come out of `tick` too. The runtime takes them with
`take_replies` once the tick's records are committed, and `abandon` answers the parked ones
when the shard is unloaded.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import final

from replication.group import GroupConfig, GroupCoordinator, GroupListing, TopicInfo
from replication.group.classic import (
    ClassicGroupConfig,
    ClassicGroupManager,
    ClassicGroupState,
    DescribedGroup,
    Effects,
    ListedGroup,
    Reply,
    is_classic_record,
)
from replication.group.state import Group as ConsumerGroup
from replication.group.txn_offsets import PendingTxnOffsets, is_pending_record
from replication.group.types import Record
from replication.group.types import Result as GroupResult
from storage.errors import ErrorCode


@final
class GroupShard:
    """The KIP-848 and classic groups of one offsets partition (see the module docstring)."""

    def __init__(self, config: GroupConfig, classic_config: ClassicGroupConfig) -> None:
        # Each machine asks the other (a classic group id taken by a consumer group; a classic
        # group's offset expiry): the classic one asks through a weak reference, so a shard
        # dropped when its leadership moves is freed at once, not by the collector's rare
        # full collections (a broker drops and loads hundreds of them while leaders move).
        shard = weakref.ref(self)
        self.classic = ClassicGroupManager(
            classic_config, consumer_groups=lambda gid: _consumer_group(shard, gid)
        )
        self.kip848 = GroupCoordinator(config, offset_expiry=self.classic.offset_expiry)
        self._check_interval_ms = config.offsets_retention_check_interval_ms
        self._next_cleanup_ms: int | None = None
        self._replies: list[Reply] = []
        self.txn_offsets = PendingTxnOffsets()
        """Offsets of transactions not ended yet (TxnOffsetCommit, KIP-447)."""

    # --- the groups as the Kafka APIs see them ---------------------------------------------

    def is_simple_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is known here only by offsets committed outside any membership
        (a consumer that assign()s and commits, an admin): no consumer group's metadata and no
        classic group. Kafka 4.x keeps such a group as an Empty classic group of protocol type
        "" (``getOrMaybeCreateClassicGroup`` on a commit at generation -1)."""
        kept = self.kip848.groups().get(group_id)
        # NB: a consumer group's first members may have no metadata record yet (its epoch 1 is
        # unwritten until a subscription moves it, as in Kafka 4.4): members make it one
        return (
            kept is not None
            and not kept.has_metadata
            and not kept.members
            and not self.classic.has_group(group_id)
        )

    def is_classic(self, group_id: str) -> bool:
        """A classic group for Kafka: one with classic members or records, or a simple one
        (then ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND, "not a consumer group")."""
        return self.classic.has_group(group_id) or self.is_simple_group(group_id)

    def describe_classic(self, group_ids: Sequence[str]) -> list[DescribedGroup]:
        """DescribeGroups: the classic groups, a simple group Empty with no protocol type."""
        return [
            DescribedGroup(group_id=gid, state=ClassicGroupState.EMPTY)
            if self.is_simple_group(gid)
            else described
            for gid, described in zip(
                group_ids, self.classic.describe_groups(group_ids), strict=True
            )
        ]

    def list_groups(self) -> list[GroupListing | ListedGroup]:
        """ListGroups: both kinds of group; a classic group's offsets (kept by the KIP-848
        coordinator under the same id) do not list it twice, and a simple group is listed as
        Kafka lists it (classic, Empty, protocol type "")."""
        out: list[GroupListing | ListedGroup] = list(self.classic.list_groups())
        ids = {x.group_id for x in out}
        for listing in self.kip848.list_groups():
            if listing.group_id in ids:
                continue
            if self.is_simple_group(listing.group_id):
                out.append(
                    ListedGroup(
                        group_id=listing.group_id, protocol_type="", state=ClassicGroupState.EMPTY
                    )
                )
            else:
                out.append(listing)
        return out

    def replay(self, key: bytes, value: bytes | None) -> None:
        if is_classic_record(key):
            self.classic.replay(key, value)
        elif is_pending_record(key):
            self.txn_offsets.replay(key, value)
        else:
            self.kip848.replay(key, value)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """A transaction's marker read on a load: its pending offsets are committed or
        dropped (`replication.group.txn_offsets`)."""
        for key, value in self.txn_offsets.outcome(producer_id, commit):
            self.kip848.replay(key, value)
        self.txn_offsets.forget(producer_id)

    def complete_txn(self, producer_id: int, commit: bool) -> GroupResult[None]:
        """The records that end ``producer_id``'s transaction's offsets (its marker is in)."""
        return GroupResult(records=self.txn_offsets.complete(producer_id, commit), response=None)

    def tick(self, now_ms: int, topics: Mapping[str, TopicInfo]) -> list[Record]:
        """Both coordinators' timers; the classic replies wait in `take_replies`."""
        effects = self.classic.tick(now_ms)
        if self._next_cleanup_ms is None or now_ms >= self._next_cleanup_ms:
            self._next_cleanup_ms = now_ms + self._check_interval_ms
            effects += self._delete_empty_classic_groups()
        self._replies.extend(effects.replies)
        return [*self.kip848.tick(now_ms, topics), *effects.records]

    def _delete_empty_classic_groups(self) -> Effects:
        out = Effects()
        offsets = self.kip848.groups()
        for gid, group in list(self.classic.groups().items()):
            kept = offsets.get(gid)
            if group.state is ClassicGroupState.EMPTY and (kept is None or not kept.offsets):
                code, effects = self.classic.delete_group(gid)
                if code == ErrorCode.NONE:
                    out += effects
        return out

    def next_deadline_ms(self) -> int | None:
        due = [
            d
            for d in (
                self.kip848.next_deadline_ms(),
                self.classic.next_deadline_ms(),
                self._next_cleanup_ms if self.classic.groups() else None,
            )
            if d is not None
        ]
        return min(due) if due else None

    def snapshot_records(self) -> list[Record]:
        """Both states: the snapshot moves the log start past every older record."""
        return [
            *self.kip848.snapshot_records(),
            *self.classic.snapshot_records(),
            *self.txn_offsets.snapshot_records(),
        ]

    def take_replies(self) -> list[Reply]:
        """The replies of the last `tick`, to deliver once its records are committed."""
        replies, self._replies = self._replies, []
        return replies

    def abandon(self) -> list[Reply]:
        """Answer every parked classic request (NOT_COORDINATOR): the shard is unloaded."""
        return [*self.take_replies(), *self.classic.abandon().replies]


__all__ = ["GroupShard"]


def _consumer_group(shard: weakref.ref[GroupShard], group_id: str) -> ConsumerGroup | None:
    alive = shard()  # None only once the shard is gone, and its classic groups with it
    return None if alive is None else alive.kip848.groups().get(group_id)
