"""`IsrManager`: the leader's view of its followers and of the ISR it asks the controller for.

Theory of operation
-------------------
The leader core (`replication.core.leader.PartitionLeader`) owns one `IsrManager` per
leader epoch life and calls it; the manager does no I/O, reads no clock and logs nothing (the
leader logs what it decides). It holds:

- the replica set and each follower's progress (`ReplicaState`, ``high_watermark.py``), reset
  when this broker becomes leader and updated by every valid follower fetch (`record_fetch`);
- the broker registrations of the replicas: KIP-841 eligibility (`is_isr_eligible`), and
  whether a fetch is a follower's, at its live registration (`fence_fetch`, KIP-903);
- the ISR state (``isr_state.py``): committed, or one AlterPartition in flight (KIP-497), with
  the partition epoch it is based on and the id of the next attempt.

The decisions, in Kafka's terms (``Partition.scala``):

- shrink (`maybe_shrink`, on the leader's tick): ISR followers not caught up within
  ``replica.lag.time.max.ms``;
- expand (`maybe_expand`, on a fetch): a follower at or past both the high watermark and
  the start offset of this leader epoch, that KIP-841 allows;
- both only from a committed state: at most one AlterPartition in flight. The manager moves
  to the pending state at once and hands the leader the `AlterPartitionSend`
  (`send_pending`); a retriable error re-sends it as a new attempt after the backoff;
- the ISR changes only when the controller has committed it: its AlterPartition answer
  (`handle_alter_partition_result`) or newer metadata (`adopt_metadata`, which always wins).

`high_watermark_candidate` applies ``high_watermark.py``'s rule to the followers held here;
the leader decides whether the high watermark moves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import assert_never, final

from kraft.controller.messages import AlterPartitionData, AlterPartitionPartitionResult
from kraft.metadata.image import PartitionRegistration
from kraft.metadata.records import LeaderRecoveryState
from kraft.types import TopicPartition
from replication.core.fetch_validation import fence_follower_broker_epoch
from replication.core.high_watermark import (
    NEVER_MS,
    ReplicaState,
    high_watermark_candidate,
    out_of_sync_replicas,
)
from replication.core.isr_state import (
    AlterPartitionVerdict,
    CommittedPartitionState,
    PartitionState,
    PendingExpandIsr,
    PendingShrinkIsr,
    build_alter_partition_data,
    handle_alter_partition_result,
    with_new_attempt,
)
from replication.core.messages import AlterPartitionSend, BrokerStatus
from storage.errors import ErrorCode


@final
class IsrManager:
    """Follower progress and the ISR of one partition led by ``local_id``.

    Args:
        local_broker_epoch: this broker's registered epoch (the leader's ISR entry, KIP-841).
        brokers: the replicas' broker registrations (missing: not registered).
    """

    def __init__(
        self,
        *,
        topic_partition: TopicPartition,
        local_id: int,
        local_broker_epoch: int,
        brokers: Mapping[int, BrokerStatus],
    ) -> None:
        self._tp = topic_partition
        self._local_id = local_id
        self._local_broker_epoch = local_broker_epoch
        self._brokers = dict(brokers)
        self._followers: dict[int, ReplicaState] = {}
        self._replicas: tuple[int, ...] = ()
        self._state: PartitionState = CommittedPartitionState(isr=frozenset())
        self._partition_epoch = -1
        self._next_alter_id = 1

    # --- accessors ----------------------------------------------------------------------------

    @property
    def state(self) -> PartitionState:
        return self._state

    @property
    def isr(self) -> frozenset[int]:
        """The committed ISR."""
        return self._state.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self._state.maximal_isr

    @property
    def partition_epoch(self) -> int:
        return self._partition_epoch

    @property
    def replicas(self) -> tuple[int, ...]:
        return self._replicas

    def follower_state(self, replica_id: int) -> ReplicaState | None:
        return self._followers.get(replica_id)

    @property
    def retry_at_ms(self) -> int | None:
        """When the AlterPartition in flight is due to be re-sent (None: nothing to retry)."""
        state = self._state
        return None if isinstance(state, CommittedPartitionState) else state.retry_at_ms

    # --- metadata -----------------------------------------------------------------------------

    def become_leader(
        self,
        registration: PartitionRegistration,
        *,
        leader_log_end_offset: int,
        now_ms: int,
        is_new_leader: bool,
    ) -> None:
        """Take the registration of a new leader epoch: its committed ISR, and every
        follower's state reset (Kafka's ``Partition.makeLeader``). A pending change is moot."""
        self._partition_epoch = registration.partition_epoch
        self._state = CommittedPartitionState(
            isr=frozenset(registration.isr),
            leader_recovery_state=registration.leader_recovery_state,
        )
        self._replicas = ()
        self._set_replicas(
            registration.replicas,
            leader_log_end_offset,
            now_ms,
            reset=True,
            is_new_leader=is_new_leader,
        )

    def adopt_metadata(
        self, registration: PartitionRegistration, *, leader_log_end_offset: int, now_ms: int
    ) -> bool:
        """The controller committed a change in this leader epoch: adopt it, pending or not
        (KIP-497). Returns False if ``registration`` is not newer than our partition epoch."""
        if registration.partition_epoch <= self._partition_epoch:
            return False
        self._partition_epoch = registration.partition_epoch
        self._state = CommittedPartitionState(
            isr=frozenset(registration.isr),
            leader_recovery_state=registration.leader_recovery_state,
        )
        self._set_replicas(registration.replicas, leader_log_end_offset, now_ms)
        return True

    def update_brokers(self, brokers: Mapping[int, BrokerStatus]) -> None:
        self._brokers = dict(brokers)

    def _set_replicas(
        self,
        replicas: tuple[int, ...],
        leader_log_end_offset: int,
        now_ms: int,
        *,
        reset: bool = False,
        is_new_leader: bool = False,
    ) -> None:
        isr = self._state.isr
        followers: dict[int, ReplicaState] = {}
        for replica_id in replicas:
            if replica_id == self._local_id:
                continue
            state = self._followers.get(replica_id)
            if state is None or reset:
                state = (state or ReplicaState()).reset(
                    now_ms=now_ms,
                    leader_log_end_offset=leader_log_end_offset,
                    is_new_leader=is_new_leader or state is None,
                    in_sync=replica_id in isr,
                )
            followers[replica_id] = state
        self._followers = followers
        self._replicas = tuple(replicas)

    # --- follower progress --------------------------------------------------------------------

    def fence_fetch(self, replica_id: int, broker_epoch: int) -> ErrorCode | None:
        """Whether a fetch claiming to come from ``replica_id`` at ``broker_epoch`` may count as
        that follower's: NOT_LEADER_OR_FOLLOWER if it is no follower of this partition, else
        `fence_follower_broker_epoch` against its registration (KIP-903); None if it may."""
        if replica_id == self._local_id or replica_id not in self._followers:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        status = self._brokers.get(replica_id)
        return fence_follower_broker_epoch(
            broker_epoch, None if status is None else status.broker_epoch
        )

    def record_fetch(
        self,
        replica_id: int,
        *,
        fetch_offset: int,
        log_start_offset: int,
        now_ms: int,
        leader_log_end_offset: int,
        broker_epoch: int,
    ) -> bool:
        """A valid fetch of follower ``replica_id`` (Kafka's ``Replica.updateFetchStateOrThrow``);
        returns True if the follower's log end offset changed."""
        before = self._followers[replica_id]
        after = before.update_fetch_state(
            fetch_offset=fetch_offset,
            log_start_offset=log_start_offset,
            fetch_time_ms=now_ms,
            leader_log_end_offset=leader_log_end_offset,
            broker_epoch=broker_epoch,
        )
        self._followers[replica_id] = after
        return before.log_end_offset != after.log_end_offset

    def is_isr_eligible(self, replica_id: int) -> bool:
        """KIP-841 (Kafka's ``isReplicaIsrEligible``): unfenced, not in controlled shutdown,
        and fetching with the broker epoch the metadata has."""
        status = self._brokers.get(replica_id)
        if status is None or status.fenced or status.in_controlled_shutdown:
            return False
        follower = self._followers.get(replica_id)
        stored = None if follower is None else follower.broker_epoch
        return stored is not None and (stored == -1 or stored == status.broker_epoch)

    def high_watermark_candidate(
        self, *, leader_log_end_offset: int, min_isr: int, now_ms: int, replica_lag_time_ms_max: int
    ) -> int | None:
        """See `replication.core.high_watermark.high_watermark_candidate`."""
        return high_watermark_candidate(
            leader_log_end_offset=leader_log_end_offset,
            followers=self._followers,
            maximal_isr=self._state.maximal_isr,
            isr_size=len(self._state.isr),
            min_isr=min_isr,
            now_ms=now_ms,
            replica_lag_time_ms_max=replica_lag_time_ms_max,
            is_isr_eligible=self.is_isr_eligible,
        )

    def caught_up_deadlines(
        self, *, leader_log_end_offset: int, after_ms: int, replica_lag_time_ms_max: int
    ) -> list[int]:
        """When, after ``after_ms``, a lagging follower's caught-up window ends (a shrink, or
        the high watermark passing it, may follow then)."""
        times = []
        for follower in self._followers.values():
            if (
                follower.log_end_offset != leader_log_end_offset
                and follower.last_caught_up_time_ms != NEVER_MS
            ):
                end = follower.last_caught_up_time_ms + replica_lag_time_ms_max + 1
                if end > after_ms:
                    times.append(end)
        return times

    # --- ISR changes --------------------------------------------------------------------------

    def maybe_shrink(
        self,
        *,
        leader_epoch: int,
        leader_log_end_offset: int,
        now_ms: int,
        replica_lag_time_ms_max: int,
    ) -> PendingShrinkIsr | None:
        """Propose an ISR without the lagging followers, if any (and nothing is in flight);
        returns the new pending state. `send_pending` then builds its request."""
        state = self._state
        if not isinstance(state, CommittedPartitionState):
            return None  # at most one AlterPartition in flight (KIP-497)
        out_of_sync = out_of_sync_replicas(
            isr=state.isr,
            leader_id=self._local_id,
            followers=self._followers,
            leader_log_end_offset=leader_log_end_offset,
            now_ms=now_ms,
            replica_lag_time_ms_max=replica_lag_time_ms_max,
        )
        if not out_of_sync:
            return None
        new_isr = state.isr - out_of_sync
        pending = PendingShrinkIsr(
            out_of_sync_replica_ids=out_of_sync,
            sent=self._alter_partition_data(new_isr, state.leader_recovery_state, leader_epoch),
            alter_id=self._take_alter_id(),
            last_committed=state,
        )
        self._state = pending
        return pending

    def maybe_expand(
        self, replica_id: int, *, leader_epoch: int, high_watermark: int, epoch_start_offset: int
    ) -> PendingExpandIsr | None:
        """Propose adding follower ``replica_id`` if it is in sync now (and nothing is in
        flight); returns the new pending state. `send_pending` then builds its request."""
        state = self._state
        if not isinstance(state, CommittedPartitionState) or replica_id in state.isr:
            return None
        follower = self._followers[replica_id]
        # Kafka's isFollowerInSync: at or past the HW and past this epoch's start.
        if follower.log_end_offset < max(high_watermark, epoch_start_offset):
            return None
        if not self.is_isr_eligible(replica_id):
            return None
        new_isr = state.isr | {replica_id}
        # Kafka's prepareIsrExpand always proposes RECOVERED (KIP-704).
        data = self._alter_partition_data(new_isr, LeaderRecoveryState.RECOVERED, leader_epoch)
        pending = PendingExpandIsr(
            new_in_sync_replica_id=replica_id,
            sent=data,
            alter_id=self._take_alter_id(),
            last_committed=state,
        )
        self._state = pending
        return pending

    def send_pending(self) -> AlterPartitionSend | None:
        """The request for the change in flight (as a new attempt if it was waiting to be
        retried), or None if nothing is in flight."""
        state = self._state
        match state:
            case CommittedPartitionState():
                return None
            case PendingExpandIsr() | PendingShrinkIsr():
                if state.retry_at_ms is not None:
                    state = with_new_attempt(state, self._take_alter_id())
                    self._state = state
                return AlterPartitionSend(
                    alter_id=state.alter_id, topic_partition=self._tp, data=state.sent
                )
            case _:
                assert_never(state)

    def handle_alter_partition_result(
        self,
        alter_id: int,
        result: AlterPartitionPartitionResult,
        *,
        leader_epoch: int,
        now_ms: int,
        retry_backoff_ms: int,
    ) -> AlterPartitionVerdict:
        """Apply the controller's result for attempt ``alter_id`` (``isr_state.py``'s table)."""
        outcome = handle_alter_partition_result(
            self._state,
            alter_id=alter_id,
            result=result,
            leader_epoch=leader_epoch,
            partition_epoch=self._partition_epoch,
            now_ms=now_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        self._state = outcome.state
        self._partition_epoch = outcome.partition_epoch
        return outcome.verdict

    def _take_alter_id(self) -> int:
        alter_id = self._next_alter_id
        self._next_alter_id += 1
        return alter_id

    def _alter_partition_data(
        self, new_isr: frozenset[int], recovery: LeaderRecoveryState, leader_epoch: int
    ) -> AlterPartitionData:
        return build_alter_partition_data(
            partition=self._tp.partition,
            leader_id=self._local_id,
            leader_broker_epoch=self._local_broker_epoch,
            leader_epoch=leader_epoch,
            partition_epoch=self._partition_epoch,
            new_isr=new_isr,
            follower_broker_epochs={r: f.broker_epoch for r, f in self._followers.items()},
            leader_recovery_state=recovery,
        )


__all__ = ["IsrManager"]
