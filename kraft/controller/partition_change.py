"""Leader election and the `PartitionChangeBuilder` (Kafka's class of the same name).

Every change to a partition's leader or ISR goes through the builder, which turns a *target*
(an ISR, an election kind, a recovery state) into at most one `PartitionChangeRecord`, or
``None`` when nothing would change.

Election rules, in order (Kafka's ``PartitionChangeBuilder.electLeader``):

1. PREFERRED: the first replica, if it is in the target ISR and is an acceptable leader.
2. Keep the current leader if it is still in the target ISR and acceptable (no needless moves).
3. Otherwise the first replica, in *replicas* order, that is in the target ISR and acceptable.
4. Otherwise, if unclean election is allowed (``unclean.leader.election.enable`` for the topic,
   or an UNCLEAN ElectLeaders): the first acceptable replica in replicas order, with
   ISR = [it] and the leader recovery state RECOVERING (KIP-704).
5. Otherwise no leader (`NO_LEADER`): the partition is offline.

With eligible leader replicas on (KIP-966, an `ElrPolicy` passed as ``elr``), an empty target
ISR lets rule 3 take the first acceptable ELR member (it becomes the ISR alone), and, with ISR
and ELR both empty, the last known leader (an unclean election, as rule 4's); the builder also
keeps the ELR and the last known leader up to date. Those rules live in
`kraft.controller.eligible_leaders`; `_elr_choice` and `_apply_elr` are the only places here
that use them. Without a policy (ELR off) a change clears both fields.

"Acceptable" means registered, unfenced and not in controlled shutdown (KIP-841); callers pass
the predicate so a broker that is being fenced in the same batch is already excluded. A replica
in the target ``offline_replicas`` (its broker reports its log offline) is never acceptable,
whatever the predicate says (KIP-858, per replica: see `kraft.controller.offline_replicas`).

A leader change (including to `NO_LEADER`) bumps the leader epoch when the record is replayed;
any record bumps the partition epoch (see `kraft.metadata.delta.merge_partition_change`).

A quorum-mode partition (``leader_by_vote``, `kraft.controller.quorum_partitions`) skips every
rule above: its Raft group elects the leader, so the builder keeps the recorded one, except a
replica in the target ``offline_replicas``, which gives way to `NO_LEADER` in the same leader
epoch (the group numbers the epochs).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Self, final

from kraft.controller.eligible_leaders import (
    ElrPolicy,
    last_known_leader,
    target_elr,
    target_last_known_elr,
)
from kraft.metadata.delta import check_partition, merge_partition_change
from kraft.metadata.image import PartitionRegistration
from kraft.metadata.records import NO_LEADER, LeaderRecoveryState, PartitionChangeRecord


class Election(enum.Enum):
    ONLINE = "online"
    """Keep the leader if possible, else elect from the ISR (unclean only if allowed)."""
    PREFERRED = "preferred"
    """Move leadership to the preferred (first) replica if it is in the ISR and acceptable."""
    UNCLEAN = "unclean"
    """Like ONLINE, but fall back to any acceptable replica regardless of the topic config."""


@final
class PartitionChangeBuilder:
    """Builds the record that moves one partition to a target state.

    Usage::

        builder = PartitionChangeBuilder(
            current, topic_id, 0, is_acceptable_leader=image.is_active_broker
        )
        record = builder.set_target_isr((1, 2)).build()  # None: nothing to change
    """

    def __init__(
        self,
        current: PartitionRegistration,
        topic_id: str,
        partition: int,
        *,
        is_acceptable_leader: Callable[[int], bool],
        unclean_allowed: bool = False,
        leader_by_vote: bool = False,
        elr: ElrPolicy | None = None,
    ) -> None:
        self._current = current
        self._topic_id = topic_id
        self._partition = partition
        self._is_acceptable = is_acceptable_leader
        self._unclean_allowed = unclean_allowed
        self._leader_by_vote = leader_by_vote
        self._target_isr: tuple[int, ...] = current.isr
        self._election = Election.ONLINE
        self._target_recovery_state: LeaderRecoveryState | None = None
        self._target_offline: tuple[int, ...] = current.offline_replicas
        self._elr = None if leader_by_vote else elr

    def set_target_isr(self, isr: Sequence[int]) -> Self:
        self._target_isr = tuple(isr)
        return self

    def set_election(self, election: Election) -> Self:
        self._election = election
        return self

    def set_target_leader_recovery_state(self, state: LeaderRecoveryState) -> Self:
        self._target_recovery_state = state
        return self

    def set_target_offline_replicas(self, offline: Sequence[int]) -> Self:
        self._target_offline = tuple(offline)
        return self

    def _acceptable(self, replica: int) -> bool:
        return replica not in self._target_offline and self._is_acceptable(replica)

    def _effective_target_isr(self) -> tuple[int, ...]:
        """The target ISR; with ELR off, never empty (KIP-841): a partition left with an empty
        ISR by ELR keeps its best candidate (an ELR member, else its last known leader)."""
        isr, current = self._target_isr, self._current
        if self._elr is None and not isr and not self._leader_by_vote:
            return current.isr or current.elr[:1] or current.last_known_elr[:1]
        return isr

    def _elr_choice(self, isr: tuple[int, ...], elr: tuple[int, ...]) -> tuple[int, bool] | None:
        """KIP-966's candidates after the ISR: an ELR member, then the last known leader."""
        if self._elr is None or isr:
            return None
        for replica in self._current.replicas:
            if replica in elr and self._acceptable(replica):
                return replica, False
        last = last_known_leader(self._current)
        if not elr and last is not None and self._acceptable(last):
            return last, True
        return None

    def elect_leader(self) -> tuple[int, bool]:
        """The leader the rules above choose, and whether the choice is unclean."""
        current, isr = self._current, self._effective_target_isr()
        elr = () if self._elr is None else target_elr(current, isr, self._elr)
        if self._leader_by_vote:
            # Quorum mode: the Raft vote elects; an offline replica only stops leading.
            leader = current.leader
            return (NO_LEADER if leader in self._target_offline else leader), False
        if self._election is Election.PREFERRED:
            preferred = current.preferred_leader
            if preferred in isr and self._acceptable(preferred):
                return preferred, False
        if (
            current.leader != NO_LEADER
            and current.leader in isr
            and self._acceptable(current.leader)
        ):
            return current.leader, False
        for replica in current.replicas:
            if replica in isr and self._acceptable(replica):
                return replica, False
        if (choice := self._elr_choice(isr, elr)) is not None:
            return choice
        if self._unclean_allowed or self._election is Election.UNCLEAN:
            for replica in current.replicas:
                if self._acceptable(replica):
                    return replica, True
        return NO_LEADER, False

    def build(self) -> PartitionChangeRecord | None:
        """The change record, or ``None`` if the partition already is in the target state."""
        current = self._current
        leader, unclean = self.elect_leader()
        isr = self._effective_target_isr()
        recovery_state = self._target_recovery_state
        if recovery_state is None:  # NB: not `or`: RECOVERED is 0, which is falsy
            recovery_state = current.leader_recovery_state
        if unclean:
            # KIP-704: an unclean leader's log may lack committed data; only it is in sync.
            isr = (leader,)
            recovery_state = LeaderRecoveryState.RECOVERING
        isr, elr, last_known = self._apply_elr(isr, leader, unclean)
        assert set(isr) <= set(current.replicas), (isr, current.replicas)
        assert isr or self._elr is not None or not current.isr, (
            "without ELR the ISR never becomes empty (KIP-841 keeps the last member)"
        )
        offline = self._target_offline
        record = PartitionChangeRecord(
            topic_id=self._topic_id,
            partition=self._partition,
            isr=None if isr == current.isr else isr,
            leader=None if leader == current.leader else leader,
            leader_recovery_state=(
                None if recovery_state is current.leader_recovery_state else recovery_state
            ),
            offline_replicas=None if offline == current.offline_replicas else offline,
            # Quorum mode: the Raft group numbers the epochs; clearing the leader keeps it.
            leader_epoch=(
                current.leader_epoch if self._leader_by_vote and leader != current.leader else None
            ),
            eligible_leader_replicas=None if elr == current.elr else elr,
            last_known_elr=None if last_known == current.last_known_elr else last_known,
        )
        if (
            record.isr is None
            and record.leader is None
            and record.leader_recovery_state is None
            and record.offline_replicas is None
            and record.eligible_leader_replicas is None
            and record.last_known_elr is None
        ):
            return None
        # Fail here, at decision time, rather than on replay on every node.
        check_partition(
            merge_partition_change(current, record), f"{self._topic_id}-{self._partition}"
        )
        return record

    def _apply_elr(
        self, isr: tuple[int, ...], leader: int, unclean: bool
    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """The ISR, ELR and last known leader once ``leader`` is elected (KIP-966)."""
        current, policy = self._current, self._elr
        if policy is None:
            return isr, (), ()
        elr = () if unclean else target_elr(current, isr, policy)
        if leader != NO_LEADER and leader in elr:
            # Elected from the ELR: it alone is in sync now; the others stay eligible.
            isr, elr = (leader,), tuple(r for r in elr if r != leader)
            if len(isr) >= policy.min_isr:
                elr = ()  # its high watermark may move on alone now (rule 2)
        return isr, elr, target_last_known_elr(current, isr, leader)


__all__ = ["Election", "PartitionChangeBuilder"]
