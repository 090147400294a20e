"""The pure transaction coordinator (KIP-98): every request against every state, fencing,
timeouts, expiry, and replay (a new leader's state is the fold of the committed records)."""

from __future__ import annotations

from typing import Any

import pytest

from kraft.types import TopicPartition
from replication.txn import (
    NEEDS_PRODUCER_ID,
    Result,
    TxnConfig,
    TxnCoordinator,
    TxnState,
)
from replication.txn.state import MAX_PRODUCER_EPOCH, VALID_PREVIOUS, TxnMetadata
from storage.errors import CorruptRecordError, ErrorCode

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TIMEOUT = 60_000


def apply(coord: TxnCoordinator, result: Result[Any]) -> Any:
    """What the runtime does: the records are committed and replayed, then the answer."""
    for key, value in result.records:
        coord.replay(key, value)
    return result.response


def init(coord: TxnCoordinator, tid: str = "a", now: int = 0, pid: int = 100, **kw: Any) -> Any:
    answer = apply(coord, coord.init_producer_id(tid, TIMEOUT, now, **kw))
    if answer is NEEDS_PRODUCER_ID:
        answer = apply(coord, coord.init_producer_id(tid, TIMEOUT, now, new_producer_id=pid, **kw))
    return answer


def ongoing(coord: TxnCoordinator, tid: str = "a", now: int = 0) -> tuple[int, int]:
    got = init(coord, tid, now)
    assert got.error_code is ErrorCode.NONE
    code = apply(
        coord, coord.add_partitions(tid, got.producer_id, got.producer_epoch, frozenset({TP0}), now)
    )
    assert code is ErrorCode.NONE
    return got.producer_id, got.producer_epoch


def test_a_new_id_asks_for_a_producer_id_then_starts_at_epoch_0() -> None:
    coord = TxnCoordinator(TxnConfig())
    first = coord.init_producer_id("a", TIMEOUT, 0)
    assert first.response is NEEDS_PRODUCER_ID and not first.records
    got = apply(coord, coord.init_producer_id("a", TIMEOUT, 0, new_producer_id=7))
    assert (got.error_code, got.producer_id, got.producer_epoch) == (ErrorCode.NONE, 7, 0)
    meta = coord.get("a")
    assert meta is not None and meta.state is TxnState.EMPTY


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_a_timeout_out_of_range_is_invalid_transaction_timeout(timeout: int) -> None:
    coord = TxnCoordinator(TxnConfig())
    got = coord.init_producer_id("a", timeout, 0, new_producer_id=1).response
    assert got.error_code is ErrorCode.INVALID_TRANSACTION_TIMEOUT


def test_init_again_bumps_the_epoch_and_fences_the_old_producer() -> None:
    coord = TxnCoordinator(TxnConfig())
    old = init(coord)
    new = init(coord)
    assert (new.producer_id, new.producer_epoch) == (old.producer_id, old.producer_epoch + 1)
    code = coord.add_partitions("a", old.producer_id, old.producer_epoch, frozenset({TP0}), 1)
    assert code.response is ErrorCode.PRODUCER_FENCED and not code.records
    end = coord.end_txn("a", old.producer_id, old.producer_epoch, commit=True, now_ms=1)
    assert end.response.error_code is ErrorCode.PRODUCER_FENCED


def test_init_during_an_ongoing_transaction_aborts_it_with_a_fencing_epoch() -> None:
    coord = TxnCoordinator(TxnConfig())
    pid, epoch = ongoing(coord)
    got = apply(coord, coord.init_producer_id("a", TIMEOUT, 5))
    assert got.error_code is ErrorCode.CONCURRENT_TRANSACTIONS
    meta = coord.get("a")
    assert meta is not None and meta.state is TxnState.PREPARE_ABORT
    assert meta.producer_epoch == epoch + 1
    [job] = coord.pending_markers()
    assert (job.commit, job.producer_epoch, job.partitions) == (False, epoch + 1, frozenset({TP0}))
    # Until the markers are written, the new producer waits.
    again = coord.init_producer_id("a", TIMEOUT, 6).response
    assert again.error_code is ErrorCode.CONCURRENT_TRANSACTIONS
    apply(coord, coord.complete(job, 7))
    got = apply(coord, coord.init_producer_id("a", TIMEOUT, 8))
    assert (got.error_code, got.producer_id, got.producer_epoch) == (ErrorCode.NONE, pid, epoch + 2)


def test_commit_goes_through_prepare_then_complete_and_retries_are_answered() -> None:
    coord = TxnCoordinator(TxnConfig())
    pid, epoch = ongoing(coord)
    apply(coord, coord.add_partitions("a", pid, epoch, frozenset({TP1}), 1))
    ended = apply(coord, coord.end_txn("a", pid, epoch, commit=True, now_ms=2))
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
        ErrorCode.NONE,
        pid,
        epoch,
    )
    assert coord.end_txn("a", pid, epoch, commit=True, now_ms=3).response.error_code is (
        ErrorCode.CONCURRENT_TRANSACTIONS
    )
    assert coord.end_txn("a", pid, epoch, commit=False, now_ms=3).response.error_code is (
        ErrorCode.INVALID_TXN_STATE
    )
    assert coord.add_partitions("a", pid, epoch, frozenset({TP0}), 3).response is (
        ErrorCode.CONCURRENT_TRANSACTIONS
    )
    [job] = coord.pending_markers()
    assert job.commit and job.partitions == {TP0, TP1}
    apply(coord, coord.complete(job, 4))
    meta = coord.get("a")
    assert meta is not None and meta.state is TxnState.COMPLETE_COMMIT and not meta.partitions
    assert not coord.pending_markers()
    assert coord.end_txn("a", pid, epoch, commit=True, now_ms=5).response.error_code is (
        ErrorCode.NONE
    )
    assert coord.end_txn("a", pid, epoch, commit=False, now_ms=5).response.error_code is (
        ErrorCode.INVALID_TXN_STATE
    )
    # A completed job run again writes nothing.
    assert not coord.complete(job, 6).records
    # The next transaction starts afresh.
    assert (
        apply(coord, coord.add_partitions("a", pid, epoch, frozenset({TP1}), 7)) is ErrorCode.NONE
    )
    meta = coord.get("a")
    assert meta is not None and meta.partitions == {TP1} and meta.start_ms == 7


def test_end_without_a_transaction_is_invalid_txn_state() -> None:
    coord = TxnCoordinator(TxnConfig())
    got = init(coord)
    end = coord.end_txn("a", got.producer_id, got.producer_epoch, commit=True, now_ms=1)
    assert end.response.error_code is ErrorCode.INVALID_TXN_STATE


def test_unknown_id_or_wrong_producer_id_is_invalid_producer_id_mapping() -> None:
    coord = TxnCoordinator(TxnConfig())
    assert coord.add_partitions("x", 1, 0, frozenset({TP0}), 0).response is (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    got = init(coord)
    end = coord.end_txn("a", got.producer_id + 1, 0, commit=True, now_ms=0)
    assert end.response.error_code is ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_adding_partitions_already_in_the_transaction_writes_nothing() -> None:
    coord = TxnCoordinator(TxnConfig())
    pid, epoch = ongoing(coord)
    again = coord.add_partitions("a", pid, epoch, frozenset({TP0}), 1)
    assert again.response is ErrorCode.NONE and not again.records


def test_kip_890_verification_accepts_only_added_partitions_of_the_current_epoch() -> None:
    coord = TxnCoordinator(TxnConfig())
    pid, epoch = ongoing(coord)
    assert coord.verify_partition("a", pid, epoch, TP0) is ErrorCode.NONE
    assert coord.verify_partition("a", pid, epoch, TP1) is ErrorCode.TRANSACTION_ABORTABLE
    assert coord.verify_partition("a", pid, epoch - 1, TP0) is ErrorCode.PRODUCER_FENCED
    apply(coord, coord.end_txn("a", pid, epoch, commit=False, now_ms=1))
    assert coord.verify_partition("a", pid, epoch, TP0) is ErrorCode.CONCURRENT_TRANSACTIONS


def test_a_timed_out_transaction_is_aborted_with_the_epoch_bumped() -> None:
    coord = TxnCoordinator(TxnConfig())
    pid, epoch = ongoing(coord, now=1_000)
    assert coord.next_deadline_ms() == 1_000 + TIMEOUT
    assert coord.tick(1_000 + TIMEOUT - 1) == []
    for key, value in coord.tick(1_000 + TIMEOUT):
        coord.replay(key, value)
    meta = coord.get("a")
    assert meta is not None and meta.state is TxnState.PREPARE_ABORT
    assert meta.producer_epoch == epoch + 1
    # The producer that let it time out is fenced.
    end = coord.end_txn("a", pid, epoch, commit=True, now_ms=1_000 + TIMEOUT + 1)
    assert end.response.error_code is ErrorCode.PRODUCER_FENCED


def test_an_idle_id_expires() -> None:
    coord = TxnCoordinator(TxnConfig(transactional_id_expiration_ms=1_000))
    init(coord, now=10)
    assert coord.next_deadline_ms() == 1_010
    for key, value in coord.tick(1_010):
        coord.replay(key, value)
    assert coord.get("a") is None and coord.next_deadline_ms() is None


def test_an_exhausted_epoch_takes_a_new_producer_id() -> None:
    coord = TxnCoordinator(TxnConfig())
    init(coord, pid=5)
    meta = coord.get("a")
    assert meta is not None
    coord.replay(*_record(meta, producer_epoch=MAX_PRODUCER_EPOCH - 1))
    assert coord.init_producer_id("a", TIMEOUT, 1).response is NEEDS_PRODUCER_ID
    got = apply(coord, coord.init_producer_id("a", TIMEOUT, 1, new_producer_id=6))
    assert (got.producer_id, got.producer_epoch) == (6, 0)


def test_kip_360_recovery_names_the_current_producer() -> None:
    coord = TxnCoordinator(TxnConfig())
    got = init(coord)
    pid, epoch = got.producer_id, got.producer_epoch
    bumped = init(coord, expected_producer_id=pid, expected_producer_epoch=epoch)
    assert (bumped.producer_id, bumped.producer_epoch) == (pid, epoch + 1)
    # The same request retried gets the answer it missed, not a second bump.
    again = init(coord, expected_producer_id=pid, expected_producer_epoch=epoch)
    assert (again.producer_id, again.producer_epoch) == (pid, epoch + 1)
    stale = init(coord, expected_producer_id=pid + 1, expected_producer_epoch=0)
    assert stale.error_code is ErrorCode.PRODUCER_FENCED


def test_a_new_coordinator_replaying_the_records_has_the_same_state() -> None:
    coord = TxnCoordinator(TxnConfig())
    log: list[tuple[bytes, bytes | None]] = []

    def run(result: Result[Any]) -> Any:
        log.extend(result.records)
        return apply(coord, result)

    got = run(coord.init_producer_id("a", TIMEOUT, 0, new_producer_id=1))
    run(coord.add_partitions("a", got.producer_id, got.producer_epoch, frozenset({TP0, TP1}), 1))
    run(coord.end_txn("a", got.producer_id, got.producer_epoch, commit=True, now_ms=2))
    run(coord.init_producer_id("b", TIMEOUT, 3, new_producer_id=2))
    fresh = TxnCoordinator(TxnConfig())
    for key, value in log:
        fresh.replay(key, value)
    assert fresh.transactions() == coord.transactions()
    assert fresh.pending_markers() == coord.pending_markers()
    snap = TxnCoordinator(TxnConfig())
    for key, value in coord.snapshot_records():
        snap.replay(key, value)
    assert snap.transactions() == coord.transactions()


def test_transitions_follow_kafkas_table() -> None:
    meta = TxnMetadata(
        transactional_id="a",
        producer_id=1,
        producer_epoch=0,
        timeout_ms=1,
        state=TxnState.EMPTY,
        last_update_ms=0,
    )
    for target, previous in VALID_PREVIOUS.items():
        for source in TxnState:
            start = TxnMetadata(**{**_fields(meta), "state": source})
            if source in previous:
                assert start.transition(target, 1).state is target
            else:
                with pytest.raises(AssertionError):
                    start.transition(target, 1)


def test_a_garbled_record_is_a_corrupt_record_error() -> None:
    coord = TxnCoordinator(TxnConfig())
    with pytest.raises(CorruptRecordError):
        coord.replay(b"\x00\x09[]", b"")
    with pytest.raises(CorruptRecordError):
        coord.replay(b'\x00\x00["a"]', b"\x00\x00{}")


def _fields(meta: TxnMetadata) -> dict[str, Any]:
    return {f: getattr(meta, f) for f in meta.__slots__}


def _record(meta: TxnMetadata, **changes: Any) -> tuple[bytes, bytes | None]:
    from replication.txn.records import metadata_record

    return metadata_record(TxnMetadata(**{**_fields(meta), **changes}))
