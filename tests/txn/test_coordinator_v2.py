"""KIP-890 part 2 in the pure transaction coordinator (transaction version 2): the epoch is
bumped at every transaction's end and answered, the markers carry the new epoch, a late request
of the ended transaction is fenced, retries are answered, and the last epoch rolls over to a
new producer id once the markers are written."""

from __future__ import annotations

from typing import Any

from replication.txn import NEEDS_PRODUCER_ID, TxnConfig, TxnCoordinator, TxnState
from replication.txn.state import MAX_PRODUCER_EPOCH
from storage.errors import ErrorCode
from tests.txn.test_coordinator import TP0, TP1, _record, apply, init, ongoing

V2 = 2


def end(coord: TxnCoordinator, pid: int, epoch: int, *, commit: bool, now: int, **kw: Any) -> Any:
    result = coord.end_txn("a", pid, epoch, commit=commit, now_ms=now, transaction_version=V2, **kw)
    return apply(coord, result)


def finish_markers(coord: TxnCoordinator, now: int) -> None:
    for job in coord.pending_markers():
        apply(coord, coord.complete(job, now))


def test_a_v2_commit_bumps_the_epoch_writes_markers_with_it_and_fences_the_old_one() -> None:
    coord = TxnCoordinator(TxnConfig())
    pid, epoch = ongoing(coord)
    got = end(coord, pid, epoch, commit=True, now=1)
    assert (got.error_code, got.producer_id, got.producer_epoch) == (ErrorCode.NONE, pid, epoch + 1)
    meta = coord.get("a")
    assert meta is not None and meta.state is TxnState.PREPARE_COMMIT
    assert (meta.producer_epoch, meta.last_producer_epoch) == (epoch + 1, epoch)
    assert meta.client_transaction_version == V2
    [job] = coord.pending_markers()
    assert (job.commit, job.producer_epoch, job.partitions) == (True, epoch + 1, frozenset({TP0}))
    finish_markers(coord, 2)
    # A late batch of the ended transaction (its epoch) cannot open the next one.
    late = coord.add_partitions("a", pid, epoch, frozenset({TP1}), 3, transaction_version=V2)
    assert late.response is ErrorCode.PRODUCER_FENCED and not late.records
    # The producer's next transaction uses the answered epoch (a leader adds its partitions).
    added = coord.add_partitions("a", pid, epoch + 1, frozenset({TP1}), 3, transaction_version=V2)
    assert apply(coord, added) is ErrorCode.NONE
    meta = coord.get("a")
    assert meta is not None and meta.state is TxnState.ONGOING and meta.partitions == {TP1}
    again = end(coord, pid, epoch + 1, commit=False, now=4)
    assert again.producer_epoch == epoch + 2


def test_a_retried_v2_end_is_answered_with_the_bumped_epoch() -> None:
    coord = TxnCoordinator(TxnConfig())
    pid, epoch = ongoing(coord)
    end(coord, pid, epoch, commit=True, now=1)
    while_preparing = end(coord, pid, epoch, commit=True, now=2)
    assert (while_preparing.error_code, while_preparing.producer_epoch) == (
        ErrorCode.NONE,
        epoch + 1,
    )
    finish_markers(coord, 3)
    retried = coord.end_txn("a", pid, epoch, commit=True, now_ms=4, transaction_version=V2)
    assert not retried.records
    assert (retried.response.error_code, retried.response.producer_epoch) == (
        ErrorCode.NONE,
        epoch + 1,
    )
    wrong = coord.end_txn("a", pid, epoch, commit=False, now_ms=4, transaction_version=V2)
    assert wrong.response.error_code is ErrorCode.INVALID_TXN_STATE
    # The next transaction may not be committed before it began; an older epoch is fenced.
    empty = coord.end_txn("a", pid, epoch + 1, commit=True, now_ms=5, transaction_version=V2)
    assert empty.response.error_code is ErrorCode.INVALID_TXN_STATE
    older = coord.end_txn("a", pid, epoch - 1, commit=True, now_ms=5, transaction_version=V2)
    assert older.response.error_code is ErrorCode.PRODUCER_FENCED


def test_a_v2_abort_with_nothing_ongoing_still_bumps_the_epoch() -> None:
    coord = TxnCoordinator(TxnConfig())
    got = init(coord)
    aborted = end(coord, got.producer_id, got.producer_epoch, commit=False, now=1)
    assert (aborted.error_code, aborted.producer_epoch) == (ErrorCode.NONE, got.producer_epoch + 1)
    [job] = coord.pending_markers()
    assert not job.partitions
    finish_markers(coord, 2)
    meta = coord.get("a")
    assert meta is not None and meta.state is TxnState.COMPLETE_ABORT


def test_a_v1_end_keeps_the_epoch() -> None:
    coord = TxnCoordinator(TxnConfig())
    pid, epoch = ongoing(coord)
    got = apply(coord, coord.end_txn("a", pid, epoch, commit=True, now_ms=1))
    assert (got.producer_id, got.producer_epoch) == (pid, epoch)
    meta = coord.get("a")
    assert meta is not None and meta.client_transaction_version == 0


def test_the_last_epoch_rolls_over_to_a_new_producer_id_once_the_markers_are_written() -> None:
    coord = TxnCoordinator(TxnConfig())
    init(coord, pid=5)
    meta = coord.get("a")
    assert meta is not None
    last = MAX_PRODUCER_EPOCH - 1
    coord.replay(*_record(meta, producer_epoch=last))
    apply(coord, coord.add_partitions("a", 5, last, frozenset({TP0}), 1))
    needs = coord.end_txn("a", 5, last, commit=True, now_ms=2, transaction_version=V2)
    assert needs.response is NEEDS_PRODUCER_ID and not needs.records
    got = end(coord, 5, last, commit=True, now=2, new_producer_id=9)
    assert (got.error_code, got.producer_id, got.producer_epoch) == (ErrorCode.NONE, 9, 0)
    [job] = coord.pending_markers()
    assert (job.producer_id, job.producer_epoch) == (5, MAX_PRODUCER_EPOCH)
    # The new producer id waits for the markers of the old one.
    early = coord.add_partitions("a", 9, 0, frozenset({TP0}), 3, transaction_version=V2)
    assert early.response is ErrorCode.CONCURRENT_TRANSACTIONS
    finish_markers(coord, 4)
    meta = coord.get("a")
    assert meta is not None and (meta.producer_id, meta.producer_epoch) == (9, 0)
    retried = end(coord, 5, last, commit=True, now=5)
    assert (retried.error_code, retried.producer_id, retried.producer_epoch) == (
        ErrorCode.NONE,
        9,
        0,
    )
    assert apply(coord, coord.add_partitions("a", 9, 0, frozenset({TP1}), 6)) is ErrorCode.NONE


def test_the_version_2_fields_survive_replay() -> None:
    coord = TxnCoordinator(TxnConfig())
    log: list[tuple[bytes, bytes | None]] = []
    pid, epoch = ongoing(coord)
    result = coord.end_txn("a", pid, epoch, commit=True, now_ms=1, transaction_version=V2)
    log.extend(coord.snapshot_records())
    apply(coord, result)
    log.extend(result.records)
    fresh = TxnCoordinator(TxnConfig())
    for key, value in log:
        fresh.replay(key, value)
    assert fresh.transactions() == coord.transactions()


def test_init_with_the_epoch_an_end_bumped_from_is_fenced_not_answered() -> None:
    """KIP-360's retry answer is for a retried InitProducerId only: a producer that asks with
    the epoch a version-2 end replaced gets no epoch it was not given."""
    coord = TxnCoordinator(TxnConfig())
    pid, epoch = ongoing(coord)
    end(coord, pid, epoch, commit=True, now=1)
    finish_markers(coord, 2)
    got = init(coord, expected_producer_id=pid, expected_producer_epoch=epoch)
    assert got.error_code is ErrorCode.PRODUCER_FENCED
    bumped = init(coord, expected_producer_id=pid, expected_producer_epoch=epoch + 1)
    assert (bumped.error_code, bumped.producer_epoch) == (ErrorCode.NONE, epoch + 2)
