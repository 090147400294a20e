"""Idempotent-producer state (KIP-98): dedup, gaps, epochs, wrap-around, snapshots, truncation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replication.core import (
    MAX_CACHED_BATCHES,
    ProducerStateManager,
    SequenceAccepted,
    SequenceDuplicate,
    SequenceRejected,
)
from replication.core.producer_state import MAX_SEQUENCE, in_sequence
from storage.errors import ErrorCode, KafkaStorageError
from storage.records import BatchHeader, build_batch, read_header
from tests.replication.harness import batch

PID = 42


def header(seq: int, *, count: int = 1, epoch: int = 0, pid: int = PID) -> BatchHeader:
    return read_header(
        batch(b"v", producer_id=pid, producer_epoch=epoch, base_sequence=seq, count=count)
    )


class Appender:
    """Checks and appends batches like a leader: offsets from a running log end."""

    def __init__(self) -> None:
        self.state = ProducerStateManager()
        self.log_end = 0
        self.appended: list[BatchHeader] = []

    def send(self, h: BatchHeader) -> SequenceAccepted | SequenceDuplicate | SequenceRejected:
        result = self.state.check(h)
        if isinstance(result, SequenceAccepted):
            placed = read_header(_rebase(h, self.log_end))
            self.state.update(h, self.log_end)
            self.appended.append(placed)
            self.log_end += h.record_count
        return result


def _rebase(h: BatchHeader, base_offset: int) -> bytes:
    from storage.records import set_base_offset

    buf = bytearray(
        batch(
            b"v",
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            count=h.record_count,
        )
    )
    set_base_offset(buf, base_offset)
    return bytes(buf)


def test_first_batch_of_a_new_producer_is_accepted_at_any_sequence() -> None:
    """KIP-360: no state for the producer (e.g. expired): any sequence starts it."""
    assert isinstance(ProducerStateManager().check(header(17)), SequenceAccepted)


def test_next_sequence_is_accepted_and_a_gap_is_out_of_order() -> None:
    a = Appender()
    assert isinstance(a.send(header(0, count=3)), SequenceAccepted)
    assert isinstance(a.send(header(3)), SequenceAccepted)
    gap = a.send(header(5))
    assert isinstance(gap, SequenceRejected)
    assert gap.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_retry_of_one_of_the_last_five_batches_is_a_duplicate_with_its_offsets() -> None:
    a = Appender()
    for seq in range(6):
        a.send(header(seq))
    dup = a.send(header(2))
    assert isinstance(dup, SequenceDuplicate)
    assert (dup.batch.first_offset, dup.batch.last_offset) == (2, 2)
    assert a.log_end == 6


def test_retry_older_than_the_five_batch_window_is_out_of_order() -> None:
    a = Appender()
    for seq in range(MAX_CACHED_BATCHES + 1):
        a.send(header(seq))
    old = a.send(header(0))
    assert isinstance(old, SequenceRejected)
    assert old.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_older_producer_epoch_is_invalid_producer_epoch() -> None:
    a = Appender()
    a.send(header(0, epoch=4))
    old = a.send(header(1, epoch=3))
    assert isinstance(old, SequenceRejected)
    assert old.error_code is ErrorCode.INVALID_PRODUCER_EPOCH


def test_epoch_bump_restarts_sequences_at_zero() -> None:
    a = Appender()
    a.send(header(0, count=5, epoch=1))
    bad = a.send(header(5, epoch=2))
    assert isinstance(bad, SequenceRejected)
    assert bad.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert isinstance(a.send(header(0, epoch=2)), SequenceAccepted)
    entry = a.state.entry(PID)
    assert entry is not None and entry.producer_epoch == 2 and len(entry.batches) == 1


def test_sequence_wraps_around_after_int32_max() -> None:
    a = Appender()
    assert isinstance(a.send(header(MAX_SEQUENCE - 1, count=2)), SequenceAccepted)
    assert a.state.entry(PID).last_sequence == MAX_SEQUENCE  # type: ignore[union-attr]
    assert isinstance(a.send(header(0)), SequenceAccepted)
    assert in_sequence(MAX_SEQUENCE, 0) and not in_sequence(MAX_SEQUENCE, 1)


def test_batch_spanning_the_wrap_has_a_wrapped_last_sequence() -> None:
    a = Appender()
    a.send(header(MAX_SEQUENCE - 1, count=3))  # sequences MAX-1, MAX, 0
    assert a.state.entry(PID).last_sequence == 0  # type: ignore[union-attr]
    assert isinstance(a.send(header(1)), SequenceAccepted)


def test_batches_without_a_producer_id_are_not_tracked() -> None:
    state = ProducerStateManager()
    plain = read_header(batch(b"v"))
    assert isinstance(state.check(plain), SequenceAccepted)
    state.update(plain, 0)
    assert state.entries == {} and state.map_end_offset == 1


def test_idempotent_batch_without_a_sequence_is_invalid() -> None:
    state = ProducerStateManager()
    bad = read_header(batch(b"v", producer_id=PID, producer_epoch=0, base_sequence=-1))
    result = state.check(bad)
    assert isinstance(result, SequenceRejected) and result.error_code is ErrorCode.INVALID_RECORD


def test_snapshot_round_trips() -> None:
    a = Appender()
    for seq in range(7):
        a.send(header(seq))
    a.send(header(0, epoch=1, pid=7))
    again = ProducerStateManager.from_snapshot(a.state.snapshot())
    assert again.entries == a.state.entries
    assert again.map_end_offset == a.state.map_end_offset == 8


@pytest.mark.parametrize("damage", ["flip", "truncate", "version"])
def test_corrupt_snapshot_is_a_storage_error(damage: str) -> None:
    a = Appender()
    a.send(header(0))
    data = bytearray(a.state.snapshot())
    if damage == "flip":
        data[-1] ^= 1
    elif damage == "truncate":
        del data[-3:]
    else:
        data[1] = 9
    with pytest.raises(KafkaStorageError):
        ProducerStateManager.from_snapshot(bytes(data))


def test_state_is_rebuilt_from_a_snapshot_plus_the_batches_after_it() -> None:
    a = Appender()
    for seq in range(3):
        a.send(header(seq))
    snapshot = a.state.snapshot()
    for seq in range(3, 9):
        a.send(header(seq))
    rebuilt = ProducerStateManager()
    rebuilt.reload(snapshot, [h for h in a.appended if h.base_offset >= 3])
    assert rebuilt.entries == a.state.entries
    from_log = ProducerStateManager()
    from_log.load_from_batches(a.appended)
    assert from_log.entries == a.state.entries


def test_truncation_drops_the_batches_at_and_after_the_offset() -> None:
    a = Appender()
    for seq in range(4):
        a.send(header(seq))
    assert a.state.truncate_to(2)
    entry = a.state.entry(PID)
    assert entry is not None and entry.last_sequence == 1
    assert a.state.map_end_offset == 2
    assert isinstance(a.state.check(header(2)), SequenceAccepted)


def test_truncation_removing_a_producer_that_started_after_the_offset_is_exact() -> None:
    a = Appender()
    a.send(header(0, pid=1))
    a.send(header(0, pid=2))
    assert a.state.truncate_to(1)
    assert set(a.state.entries) == {1}


def test_truncation_below_an_evicted_window_is_reported_inexact() -> None:
    a = Appender()
    for seq in range(MAX_CACHED_BATCHES + 2):
        a.send(header(seq))
    assert not a.state.truncate_to(1)


def test_truncation_below_an_epoch_bump_is_reported_inexact() -> None:
    a = Appender()
    a.send(header(0, epoch=0))
    a.send(header(0, epoch=1))
    assert not a.state.truncate_to(1)


@settings(max_examples=200, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from([1, 2]),  # producer id
            st.integers(0, 2),  # epoch
            st.integers(0, 12),  # first sequence
            st.integers(1, 3),  # record count
        ),
        max_size=25,
    ),
    cut=st.integers(0, 40),
)
def test_truncation_matches_a_rebuild_from_the_remaining_log(
    ops: list[tuple[int, int, int, int]], cut: int
) -> None:
    """Whenever `truncate_to` says it is exact, the sequence state (epoch, last sequence, last
    offset) equals a replay of the log that remains; a rebuild is always exact."""
    a = Appender()
    for pid, epoch, seq, count in ops:
        a.send(header(seq, count=count, epoch=epoch, pid=pid))
    remaining = [h for h in a.appended if h.last_offset < cut]
    expected = ProducerStateManager()
    expected.load_from_batches(remaining)
    exact = a.state.truncate_to(cut)
    if exact:
        got, want = a.state.entries, expected.entries
        assert set(got) == set(want)
        for pid, entry in want.items():
            mine = got[pid]
            assert (mine.producer_epoch, mine.last_sequence) == (
                entry.producer_epoch,
                entry.last_sequence,
            )
            assert mine.batches[-1] == entry.batches[-1]
            assert set(mine.batches) <= set(entry.batches)
    a.state.reload(None, remaining)
    assert a.state.entries == expected.entries


def test_producers_idle_past_the_expiration_are_forgotten_unless_a_transaction_is_open() -> None:
    """KIP-854: ``producer.id.expiration.ms`` by each producer's last batch timestamp."""
    state = ProducerStateManager()

    def stamped(pid: int, ts: int, *, transactional: bool = False) -> BatchHeader:
        return read_header(
            build_batch(
                [b"v"],
                timestamp_ms=ts,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=transactional,
            )
        )

    state.update(stamped(1, 1_000), 0)  # idle since 1,000
    state.update(stamped(2, 5_000), 1)  # heard from recently
    state.update(stamped(3, 1_000, transactional=True), 2)  # idle, but its transaction is open
    assert state.remove_expired(now_ms=5_999, expiration_ms=5_000) == 0  # 4,999 ms: not yet
    assert state.remove_expired(now_ms=6_000, expiration_ms=5_000) == 1
    assert set(state.entries) == {2, 3}
    # forgotten: its next batch is judged as a new producer's, as Kafka judges it
    assert state.check(stamped(1, 7_000)) == Appender().state.check(stamped(1, 7_000))
    restored = ProducerStateManager.from_snapshot(state.snapshot())
    assert set(restored.entries) == {2, 3}
