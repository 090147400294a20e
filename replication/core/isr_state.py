"""The leader's ISR state while AlterPartition requests are in flight (KIP-497), as in Kafka's
``Partition.scala``.

Theory of operation
-------------------
A leader never changes its ISR by itself: it asks the controller with an AlterPartition and
adopts the new ISR only once the controller has committed it (the AlterPartition response, or
the PartitionChange record arriving through metadata). While one request is in flight the
state is *pending*, and no second request is sent (at most one in flight)::

                 expand (follower caught up)              shrink (follower lagging)
    Committed ----------------------------> PendingExpandIsr          PendingShrinkIsr
        ^  ^                                      |                          |
        |  +-------- response: adopted / reset ---+--------------------------+
        +----------- metadata with partition_epoch >= ours (always wins) ----+

A pending state keeps the last committed ISR (``isr``) and exposes the *maximal* ISR, the
larger of the two candidates (KIP-497): the high watermark waits for every member of it, so
whichever way the controller decides, no acknowledged record is missing from the committed
ISR. ``isr`` (committed) decides min.insync.replicas checks, as Kafka's ``partitionState.isr``.

`handle_alter_partition_result` is the response table of Kafka's
``Partition.handleAlterPartitionUpdate`` / ``handleAlterPartitionError``: a pure function of
(state, result), so tests walk every (state, error code) pair.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import assert_never

from kraft.controller.messages import (
    AlterPartitionData,
    AlterPartitionPartitionResult,
    BrokerEpochState,
)
from kraft.metadata.records import LeaderRecoveryState
from kraft.types import Epoch, NodeId
from storage.errors import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class CommittedPartitionState:
    """The ISR the controller has committed; no AlterPartition in flight."""

    isr: frozenset[int]
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr

    @property
    def is_inflight(self) -> bool:
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingExpandIsr:
    """An AlterPartition adding ``new_in_sync_replica_id`` is in flight."""

    new_in_sync_replica_id: int
    sent: AlterPartitionData
    alter_id: int
    last_committed: CommittedPartitionState
    retry_at_ms: int | None = None
    """Set after a retriable error: re-send ``sent`` at this time."""

    @property
    def isr(self) -> frozenset[int]:
        return self.last_committed.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        # KIP-497: count the joining replica before the controller confirms it.
        return self.last_committed.isr | {self.new_in_sync_replica_id}

    @property
    def is_inflight(self) -> bool:
        return True


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingShrinkIsr:
    """An AlterPartition removing ``out_of_sync_replica_ids`` is in flight."""

    out_of_sync_replica_ids: frozenset[int]
    sent: AlterPartitionData
    alter_id: int
    last_committed: CommittedPartitionState
    retry_at_ms: int | None = None

    @property
    def isr(self) -> frozenset[int]:
        return self.last_committed.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        # KIP-497: keep waiting for the leaving replicas until the controller confirms.
        return self.last_committed.isr

    @property
    def is_inflight(self) -> bool:
        return True


PendingPartitionChange = PendingExpandIsr | PendingShrinkIsr
PartitionState = CommittedPartitionState | PendingExpandIsr | PendingShrinkIsr


def last_committed(state: PartitionState) -> CommittedPartitionState:
    match state:
        case CommittedPartitionState():
            return state
        case PendingExpandIsr() | PendingShrinkIsr():
            return state.last_committed
        case _:
            assert_never(state)


class AlterPartitionVerdict(enum.Enum):
    """What a leader does with one AlterPartition result."""

    ADOPTED = "adopted"
    """Success: the returned ISR and partition epoch are now committed."""
    RESET = "reset"
    """The controller rejected the change for good: back to the last committed state."""
    AWAIT_METADATA = "await_metadata"
    """Our view is stale: stay pending, send nothing, wait for newer metadata."""
    RETRY = "retry"
    """A transient error: re-send the same request after a backoff."""
    IGNORED = "ignored"
    """Not the request in flight (a late or duplicate response): nothing changes."""


# Kafka's ``Partition.handleAlterPartitionError`` table (KRaft mode). OPERATION_NOT_ATTEMPTED
# resets too in Kafka; kraft's controller never returns it.
_RESET_ERRORS = frozenset({ErrorCode.INELIGIBLE_REPLICA})
_AWAIT_METADATA_ERRORS = frozenset(
    {
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.INVALID_UPDATE_VERSION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NEW_LEADER_ELECTED,
    }
)


def verdict_for_error(error_code: ErrorCode) -> AlterPartitionVerdict:
    """The verdict for a failed AlterPartition (any code but NONE)."""
    assert error_code is not ErrorCode.NONE
    if error_code in _RESET_ERRORS:
        return AlterPartitionVerdict.RESET
    if error_code in _AWAIT_METADATA_ERRORS:
        return AlterPartitionVerdict.AWAIT_METADATA
    # NOT_CONTROLLER, STALE_BROKER_EPOCH, network and timeout errors: Kafka retries.
    return AlterPartitionVerdict.RETRY


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionOutcome:
    verdict: AlterPartitionVerdict
    state: PartitionState
    partition_epoch: int


def handle_alter_partition_result(
    state: PartitionState,
    *,
    alter_id: int,
    result: AlterPartitionPartitionResult,
    leader_epoch: int,
    partition_epoch: int,
    now_ms: int,
    retry_backoff_ms: int,
) -> AlterPartitionOutcome:
    """Apply one partition's AlterPartition result to ``state`` (Kafka's
    ``handleAlterPartitionUpdate`` and ``handleAlterPartitionError``).

    Args:
        alter_id: the id of the `AlterPartitionSend` this result answers.
        result: the per-partition result; request-level errors (NOT_CONTROLLER,
            STALE_BROKER_EPOCH, transport failures) come as a result with that code.
        leader_epoch / partition_epoch: the leader's current epochs.
    """
    unchanged = AlterPartitionOutcome(
        verdict=AlterPartitionVerdict.IGNORED, state=state, partition_epoch=partition_epoch
    )
    match state:
        case CommittedPartitionState():
            return unchanged
        case PendingExpandIsr() | PendingShrinkIsr():
            pending = state
        case _:
            assert_never(state)
    if pending.alter_id != alter_id or pending.retry_at_ms is not None:
        return unchanged
    if result.error_code is not ErrorCode.NONE:
        verdict = verdict_for_error(result.error_code)
        match verdict:
            case AlterPartitionVerdict.RESET:
                new_state: PartitionState = pending.last_committed
            case AlterPartitionVerdict.RETRY:
                new_state = replace(pending, retry_at_ms=now_ms + retry_backoff_ms)
            case _:
                new_state = pending
        return AlterPartitionOutcome(
            verdict=verdict, state=new_state, partition_epoch=partition_epoch
        )
    if result.leader_epoch != leader_epoch or result.partition_epoch < partition_epoch:
        # Kafka: "Ignoring new ISR ... since we have a stale leader epoch / newer version":
        # stay pending until metadata settles it.
        return AlterPartitionOutcome(
            verdict=AlterPartitionVerdict.AWAIT_METADATA,
            state=pending,
            partition_epoch=partition_epoch,
        )
    committed = CommittedPartitionState(
        isr=frozenset(result.isr), leader_recovery_state=result.leader_recovery_state
    )
    return AlterPartitionOutcome(
        verdict=AlterPartitionVerdict.ADOPTED,
        state=committed,
        partition_epoch=result.partition_epoch,
    )


def pending_alter_id(state: PartitionState) -> int | None:
    """The id of the AlterPartition in flight, or None."""
    match state:
        case CommittedPartitionState():
            return None
        case PendingExpandIsr() | PendingShrinkIsr():
            return state.alter_id
        case _:
            assert_never(state)


def build_alter_partition_data(
    *,
    partition: int,
    leader_id: int,
    leader_broker_epoch: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: frozenset[int],
    follower_broker_epochs: Mapping[int, int | None],
    leader_recovery_state: LeaderRecoveryState,
) -> AlterPartitionData:
    """The AlterPartition proposal for ``new_isr`` (Kafka's ``addBrokerEpochToIsr``): KIP-841
    wants each member with the broker epoch the leader saw it fetch with, -1 if unknown (a
    member that has not fetched from this leader yet; the controller then skips the check)."""
    members = []
    for broker_id in sorted(new_isr):
        if broker_id == leader_id:
            epoch = leader_broker_epoch
        else:
            known = follower_broker_epochs.get(broker_id)
            epoch = -1 if known is None else known
        members.append(BrokerEpochState(broker_id=NodeId(broker_id), broker_epoch=epoch))
    return AlterPartitionData(
        partition=partition,
        leader_epoch=Epoch(leader_epoch),
        new_isr_with_epochs=tuple(members),
        partition_epoch=partition_epoch,
        leader_recovery_state=leader_recovery_state,
    )


def with_new_attempt(
    state: PendingExpandIsr | PendingShrinkIsr, alter_id: int
) -> PendingExpandIsr | PendingShrinkIsr:
    """The same proposal, re-sent as a new attempt ``alter_id`` (after a retriable error)."""
    match state:
        case PendingExpandIsr():
            return PendingExpandIsr(
                new_in_sync_replica_id=state.new_in_sync_replica_id,
                sent=state.sent,
                alter_id=alter_id,
                last_committed=state.last_committed,
            )
        case PendingShrinkIsr():
            return PendingShrinkIsr(
                out_of_sync_replica_ids=state.out_of_sync_replica_ids,
                sent=state.sent,
                alter_id=alter_id,
                last_committed=state.last_committed,
            )
        case _:
            assert_never(state)


__all__ = [
    "AlterPartitionOutcome",
    "AlterPartitionVerdict",
    "CommittedPartitionState",
    "PartitionState",
    "PendingExpandIsr",
    "PendingPartitionChange",
    "PendingShrinkIsr",
    "build_alter_partition_data",
    "handle_alter_partition_result",
    "last_committed",
    "pending_alter_id",
    "verdict_for_error",
    "with_new_attempt",
]
