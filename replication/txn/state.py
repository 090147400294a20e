"""A transactional id's state (KIP-98): Kafka's ``TransactionState`` and ``TransactionMetadata``.

The states and the transitions the coordinator may make (Kafka's ``validPreviousStates``)::

    EMPTY            <- EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT     (InitProducerId: epoch bump)
    ONGOING          <- ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT   (AddPartitions/Offsets)
    PREPARE_COMMIT   <- ONGOING                                      (EndTxn commit)
    PREPARE_ABORT    <- ONGOING                   (EndTxn abort, fencing InitProducerId, timeout)
    COMPLETE_COMMIT  <- PREPARE_COMMIT                               (every marker written)
    COMPLETE_ABORT   <- PREPARE_ABORT                                (every marker written)
    DEAD             <- EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT       (transactional.id expired)

Kafka's transient ``PrepareEpochFence`` is not kept: kraft writes the fenced epoch and
PREPARE_ABORT in one record (the coordinator serializes writes, so no other request can see the
state between the two).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Final

from kraft.types import TopicPartition

MAX_PRODUCER_EPOCH: Final = 32767
"""Kafka's ``Short.MAX_VALUE``: an epoch that would reach it gets a new producer id instead."""
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1


class TxnState(enum.Enum):
    """Kafka's ``TransactionState``; the value is Kafka's byte id (``TransactionState.id``)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6

    @property
    def kafka_name(self) -> str:
        """The name Kafka's DescribeTransactions and ListTransactions use."""
        return _KAFKA_NAMES[self]

    @property
    def is_complete(self) -> bool:
        """No transaction in flight: a new one may start, the epoch may be bumped."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_preparing(self) -> bool:
        """Ended, markers still being written (requests get CONCURRENT_TRANSACTIONS)."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


_KAFKA_NAMES: Final = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
}

VALID_PREVIOUS: Final[dict[TxnState, frozenset[TxnState]]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset(
        {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
    ),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
}
"""Kafka's ``TransactionState.validPreviousStates``: `TxnMetadata.transition` enforces it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnMetadata:
    """One transactional id's state: Kafka's ``TransactionMetadata`` (committed view)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    """The epoch before the last bump (a retried InitProducerId that bumped it is answered)."""
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    """When the ongoing transaction began (its first AddPartitions), -1 if none."""
    last_update_ms: int
    client_transaction_version: int = 0
    """The transaction version of the client's last transaction (Kafka's
    ``clientTransactionVersion``): 2 bumps the epoch at the end (KIP-890 part 2)."""
    next_producer_id: int = NO_PRODUCER_ID
    """KIP-890 part 2: the producer id the transaction continues with once its markers are
    written, when its end bumped the epoch to the last one (`MAX_PRODUCER_EPOCH`)."""
    previous_producer_id: int = NO_PRODUCER_ID
    """The producer id before ``next_producer_id`` took over (a retried EndTxn of the old one
    is answered)."""

    def transition(self, state: TxnState, now_ms: int, **changes: object) -> TxnMetadata:
        """The metadata in ``state``; raises AssertionError on a transition Kafka forbids."""
        assert self.state in VALID_PREVIOUS[state], f"{self.state.name} -> {state.name}"
        return replace(self, state=state, last_update_ms=now_ms, **changes)  # type: ignore[arg-type]

    @property
    def epoch_exhausted(self) -> bool:
        """The next bump needs a new producer id (Kafka's ``isProducerEpochExhausted``)."""
        return self.producer_epoch >= MAX_PRODUCER_EPOCH - 1


__all__ = [
    "MAX_PRODUCER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "VALID_PREVIOUS",
    "TxnMetadata",
    "TxnState",
]
