"""Idempotent-producer state (KIP-98) and the produce retry decision table.

Theory of operation
-------------------
An idempotent producer gets a producer id and epoch once (InitProducerId) and numbers the
records of each partition 0, 1, 2, ... (wrapping at 2**31 - 1). The leader keeps, per producer
and partition, the last sequences it appended: a batch whose sequence it already has is a
duplicate (a retry whose first attempt did land) and is not appended again; a batch that
leaves a gap is rejected with OUT_OF_ORDER_SEQUENCE_NUMBER. So retries cannot duplicate and,
with up to 5 batches in flight per partition, cannot reorder.

`IdempotenceState` is the producer's side: the next sequence of each partition (taken by a
batch at creation, advanced when the batch is sealed) and the last acknowledged one. When a
batch that holds sequences fails for good, the sequences after it would never be accepted: the
producer then asks InitProducerId again (KIP-360's purpose; the broker answers a fresh
producer id, as Kafka's does without a transactional id), after which every partition starts
again at sequence 0 (`reset_sequences`).

`decide` is the retry decision table of Kafka's ``Sender.canRetry`` /
``TransactionManager.canRetry`` for one batch and one error code; the shell acts on its answer.

Pure: no clock, no I/O, no locks (the producer's lock guards it).
"""

from __future__ import annotations

import enum
from typing import final

from kraft.types import TopicPartition
from storage.errors import ERROR_CLASSES, ErrorCode

MAX_SEQUENCE = 0x7FFFFFFF


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: sequences wrap past 2**31 - 1 to 0."""
    total = sequence + increment
    return total - (MAX_SEQUENCE + 1) if total > MAX_SEQUENCE else total


class ProduceAction(enum.Enum):
    """What to do with a batch after a produce attempt."""

    COMPLETE = "complete"
    """Success: complete the records' futures with the offsets."""
    RETRY = "retry"
    """Re-enqueue the batch (same sequence) after the retry backoff."""
    RETRY_REFRESH_METADATA = "retry_refresh_metadata"
    """As RETRY, and refresh metadata first: the leader moved or is unknown."""
    FAIL = "fail"
    """Fail the records' futures with the error's typed exception."""
    FAIL_BUMP_EPOCH = "fail_bump_epoch"
    """FAIL, and bump the producer epoch: the failed batch leaves a sequence gap (KIP-360)."""
    FATAL = "fatal"
    """Fail this and every later batch: the producer was fenced and cannot continue."""


# Kafka's InvalidMetadataException family: the client's idea of the leader is stale.
METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_ID,
    }
)
FATAL_ERRORS = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})


def is_retriable(code: ErrorCode) -> bool:
    cls = ERROR_CLASSES.get(code)
    return cls is not None and cls.retriable


def decide(
    code: ErrorCode,
    *,
    idempotent: bool,
    has_time_left: bool,
    is_next_sequence: bool = True,
) -> ProduceAction:
    """The action for one batch whose produce attempt ended with ``code``.

    Args:
        idempotent: the batch carries a producer id and sequence.
        has_time_left: a retry after the backoff would still end before the batch's
            ``delivery.timeout.ms`` (Kafka: ``!batch.hasReachedDeliveryTimeout``).
        is_next_sequence: the batch's base sequence is the next one the leader expects (the
            last acknowledged sequence + 1), i.e. no earlier batch of the partition is still
            unresolved.
    """
    if code is ErrorCode.NONE:
        return ProduceAction.COMPLETE
    if idempotent:
        if code is ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            # Sender.completeBatch: the broker already has it, only not its offset: success.
            return ProduceAction.COMPLETE
        if code in FATAL_ERRORS:
            return ProduceAction.FATAL
        if code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            # TransactionManager.canRetry: a batch that is not next in line got OOS because
            # an earlier batch failed or is still in flight: it will be accepted once that
            # one is. The next-in-line batch getting OOS means the broker lost our state.
            if not is_next_sequence and has_time_left:
                return ProduceAction.RETRY
            return ProduceAction.FAIL_BUMP_EPOCH
        if code is ErrorCode.UNKNOWN_PRODUCER_ID:
            return ProduceAction.FAIL_BUMP_EPOCH
    if is_retriable(code) and has_time_left:
        if code in METADATA_ERRORS:
            return ProduceAction.RETRY_REFRESH_METADATA
        return ProduceAction.RETRY
    return ProduceAction.FAIL_BUMP_EPOCH if idempotent else ProduceAction.FAIL


@final
class IdempotenceState:
    """Producer id, epoch and per-partition sequences of an idempotent producer (KIP-98).

    Invariant: for every partition, last_acked < every in-flight or queued batch's base
    sequence < next (modulo wrap-around).
    """

    def __init__(self) -> None:
        self.producer_id = -1
        self.producer_epoch = -1
        self.epoch_bump_requested = False
        self._next: dict[TopicPartition, int] = {}
        self._last_acked: dict[TopicPartition, int] = {}

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id_and_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """Adopt a new id or epoch: every partition starts again at sequence 0."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.epoch_bump_requested = False
        self.reset_sequences()

    def reset_sequences(self) -> None:
        self._next.clear()
        self._last_acked.clear()

    def next_sequence(self, tp: TopicPartition) -> int:
        """The base sequence of a batch created now for ``tp``."""
        return self._next.get(tp, 0)

    def on_batch_sealed(self, tp: TopicPartition, base_sequence: int, record_count: int) -> None:
        """A batch's record count became final: the next batch starts after it."""
        self._next[tp] = increment_sequence(base_sequence, record_count)

    def set_next_sequence(self, tp: TopicPartition, sequence: int) -> None:
        self._next[tp] = sequence

    def last_acked_sequence(self, tp: TopicPartition) -> int:
        return self._last_acked.get(tp, -1)

    def is_next_sequence(self, tp: TopicPartition, base_sequence: int) -> bool:
        """Is ``base_sequence`` the one the leader expects next (last acked + 1)?"""
        return base_sequence == increment_sequence(self.last_acked_sequence(tp), 1)

    def on_batch_acked(self, tp: TopicPartition, last_sequence: int) -> None:
        last = self._last_acked.get(tp, -1)
        # Later batches may be acknowledged first (in-flight reordering); keep the highest,
        # treating a wrap-around as higher.
        if last < 0 or last_sequence > last or last - last_sequence > MAX_SEQUENCE // 2:
            self._last_acked[tp] = last_sequence

    def request_epoch_bump(self) -> None:
        """A batch with sequences failed for good; sequences after it can never be
        accepted under this epoch (KIP-360)."""
        self.epoch_bump_requested = True


__all__ = [
    "FATAL_ERRORS",
    "MAX_SEQUENCE",
    "METADATA_ERRORS",
    "IdempotenceState",
    "ProduceAction",
    "decide",
    "increment_sequence",
    "is_retriable",
]
