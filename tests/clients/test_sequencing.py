"""The produce retry decision table and the idempotent producer's sequences (KIP-98/360)."""

from __future__ import annotations

import pytest

from kraft.types import TopicPartition
from replication.clients.sequencing import (
    MAX_SEQUENCE,
    METADATA_ERRORS,
    IdempotenceState,
    ProduceAction,
    decide,
    increment_sequence,
)
from storage.errors import ERROR_CLASSES, ErrorCode

A = ProduceAction
E = ErrorCode

# (error, idempotent, time left, next in sequence) -> action
TABLE = [
    (E.NONE, False, True, True, A.COMPLETE),
    (E.NONE, True, False, True, A.COMPLETE),
    (E.NOT_LEADER_OR_FOLLOWER, False, True, True, A.RETRY_REFRESH_METADATA),
    (E.NOT_LEADER_OR_FOLLOWER, True, True, False, A.RETRY_REFRESH_METADATA),
    (E.UNKNOWN_TOPIC_OR_PARTITION, True, True, True, A.RETRY_REFRESH_METADATA),
    (E.LEADER_NOT_AVAILABLE, False, True, True, A.RETRY_REFRESH_METADATA),
    (E.FENCED_LEADER_EPOCH, False, True, True, A.RETRY_REFRESH_METADATA),
    (E.NETWORK_EXCEPTION, True, True, True, A.RETRY_REFRESH_METADATA),
    (E.NOT_ENOUGH_REPLICAS, True, True, True, A.RETRY),
    (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, False, True, True, A.RETRY),
    (E.REQUEST_TIMED_OUT, True, True, True, A.RETRY),
    # out of time: a retriable error becomes final
    (E.NOT_ENOUGH_REPLICAS, False, False, True, A.FAIL),
    (E.NOT_LEADER_OR_FOLLOWER, True, False, True, A.FAIL_BUMP_EPOCH),
    # non-retriable: fail (an idempotent batch leaves a sequence gap: bump the epoch)
    (E.MESSAGE_TOO_LARGE, False, True, True, A.FAIL),
    (E.MESSAGE_TOO_LARGE, True, True, True, A.FAIL_BUMP_EPOCH),
    (E.INVALID_RECORD, False, True, True, A.FAIL),
    (E.TOPIC_AUTHORIZATION_FAILED, False, True, True, A.FAIL),
    # idempotence (Sender.completeBatch / TransactionManager.canRetry)
    (E.DUPLICATE_SEQUENCE_NUMBER, True, True, True, A.COMPLETE),
    (E.OUT_OF_ORDER_SEQUENCE_NUMBER, True, True, False, A.RETRY),
    (E.OUT_OF_ORDER_SEQUENCE_NUMBER, True, False, False, A.FAIL_BUMP_EPOCH),
    (E.OUT_OF_ORDER_SEQUENCE_NUMBER, True, True, True, A.FAIL_BUMP_EPOCH),
    (E.UNKNOWN_PRODUCER_ID, True, True, True, A.FAIL_BUMP_EPOCH),
    (E.PRODUCER_FENCED, True, True, True, A.FATAL),
    (E.INVALID_PRODUCER_EPOCH, True, True, True, A.FATAL),
]


@pytest.mark.parametrize(("code", "idempotent", "time_left", "next_seq", "action"), TABLE)
def test_retry_decision_table(
    code: ErrorCode, idempotent: bool, time_left: bool, next_seq: bool, action: ProduceAction
) -> None:
    got = decide(code, idempotent=idempotent, has_time_left=time_left, is_next_sequence=next_seq)
    assert got is action


@pytest.mark.parametrize("code", sorted(ErrorCode))
@pytest.mark.parametrize("idempotent", [False, True])
def test_every_error_code_has_a_decision_and_only_retriable_ones_are_retried(
    code: ErrorCode, idempotent: bool
) -> None:
    action = decide(code, idempotent=idempotent, has_time_left=True, is_next_sequence=False)
    if action in (A.RETRY, A.RETRY_REFRESH_METADATA):
        retriable = ERROR_CLASSES[code].retriable
        assert retriable or code is E.OUT_OF_ORDER_SEQUENCE_NUMBER
    if action is A.RETRY_REFRESH_METADATA:
        assert code in METADATA_ERRORS
    no_time = decide(code, idempotent=idempotent, has_time_left=False, is_next_sequence=False)
    assert no_time not in (A.RETRY, A.RETRY_REFRESH_METADATA)


def test_sequences_wrap_around_like_kafkas_increment_sequence() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(MAX_SEQUENCE - 1, 5) == 3
    assert increment_sequence(-1, 1) == 0


def test_sequences_are_per_partition_and_advance_by_sealed_record_counts() -> None:
    state = IdempotenceState()
    state.set_producer_id_and_epoch(7, 0)
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert state.next_sequence(a) == 0
    state.on_batch_sealed(a, 0, 10)
    state.on_batch_sealed(a, 10, 5)
    assert state.next_sequence(a) == 15
    assert state.next_sequence(b) == 0


def test_the_next_expected_sequence_follows_the_highest_acknowledged_one() -> None:
    state = IdempotenceState()
    state.set_producer_id_and_epoch(1, 0)
    tp = TopicPartition("t", 0)
    assert state.is_next_sequence(tp, 0)
    state.on_batch_acked(tp, 9)
    assert state.is_next_sequence(tp, 10) and not state.is_next_sequence(tp, 20)
    state.on_batch_acked(tp, 29)
    state.on_batch_acked(tp, 19)  # acknowledged out of order: keep the highest
    assert state.last_acked_sequence(tp) == 29


def test_a_new_epoch_restarts_every_partition_at_sequence_zero() -> None:
    state = IdempotenceState()
    state.set_producer_id_and_epoch(1, 0)
    tp = TopicPartition("t", 0)
    state.on_batch_sealed(tp, 0, 10)
    state.on_batch_acked(tp, 9)
    state.request_epoch_bump()
    assert state.epoch_bump_requested
    state.set_producer_id_and_epoch(1, 1)
    assert not state.epoch_bump_requested
    assert state.next_sequence(tp) == 0 and state.last_acked_sequence(tp) == -1
