"""A partition's side of transactions (KIP-98), folded with the producer state: open
transactions bound the last stable offset, abort markers make the aborted list, a fencing
marker carries the epoch forward, and the snapshot keeps all of it."""

from __future__ import annotations

import pytest

from kraft.types import TopicPartition
from replication.core import ProducerStateManager
from replication.core.producer_state import AbortedTxn, SequenceRejected
from replication.txn.verification import (
    VerificationGuard,
    admit,
    batch_facts,
    plan_verification,
)
from storage.control import ControlType, build_marker_batch
from storage.errors import ErrorCode
from storage.file_region import FileRegion
from storage.records import build_batch, read_header, set_base_offset


def txn_batch(offset: int, pid: int, epoch: int, seq: int, n: int = 1) -> bytes:
    batch = bytearray(
        build_batch(
            [b"v"] * n,
            timestamp_ms=1,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=True,
        )
    )
    set_base_offset(batch, offset)
    return bytes(batch)


def marker(offset: int, pid: int, epoch: int, *, commit: bool, coordinator: int = 0) -> bytes:
    batch = bytearray(
        build_marker_batch(
            commit=commit,
            producer_id=pid,
            producer_epoch=epoch,
            coordinator_epoch=coordinator,
            timestamp_ms=1,
        )
    )
    set_base_offset(batch, offset)
    return bytes(batch)


def fold(state: ProducerStateManager, *batches: bytes) -> None:
    for b in batches:
        header = read_header(b)
        state.update(header, header.base_offset)


def test_the_marker_type_is_read_from_the_control_record() -> None:
    assert read_header(marker(0, 1, 0, commit=True)).control_type == ControlType.COMMIT
    assert read_header(marker(0, 1, 0, commit=False)).control_type == ControlType.ABORT
    assert read_header(marker(0, 1, 0, commit=True, coordinator=42)).coordinator_epoch == 42
    assert read_header(marker(0, 1, 0, commit=True)[:70]).coordinator_epoch == -1


def check_marker(
    state: ProducerStateManager, epoch: int, *, tv: int, coordinator: int = 0, hw: int = 100
) -> ErrorCode:
    return state.check_marker(7, epoch, coordinator, transaction_version=tv, high_watermark=hw)


def test_under_transaction_version_2_a_late_copy_of_a_marker_cannot_end_the_next_transaction() -> (
    None
):
    """KAFKA-18575: EndTxn bumped the epoch to 3 and the marker carries it; the client's next
    transaction writes at 3 too. A second copy of the marker (a retry, or a failed-over
    coordinator's) is refused, and the open transaction stays open."""
    state = ProducerStateManager()
    fold(state, txn_batch(0, 7, 2, 0), marker(1, 7, 3, commit=True))
    assert check_marker(state, 3, tv=2) is ErrorCode.INVALID_PRODUCER_EPOCH
    fold(state, txn_batch(2, 7, 3, 0))
    assert check_marker(state, 3, tv=2) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert check_marker(state, 4, tv=2) is ErrorCode.NONE
    assert state.first_unstable_offset() == 2


def test_a_copy_of_an_uncommitted_marker_is_retried_not_settled() -> None:
    """The copy in the log may still be truncated away: the coordinator must send it again."""
    state = ProducerStateManager()
    fold(state, txn_batch(0, 7, 2, 0), marker(1, 7, 3, commit=True))
    assert check_marker(state, 3, tv=2, hw=1) is ErrorCode.CONCURRENT_TRANSACTIONS
    assert check_marker(state, 3, tv=2, hw=2) is ErrorCode.INVALID_PRODUCER_EPOCH


def test_before_transaction_version_2_a_marker_shares_its_transactions_epoch() -> None:
    state = ProducerStateManager()
    fold(state, txn_batch(0, 7, 2, 0))
    assert check_marker(state, 2, tv=0) is ErrorCode.NONE
    assert check_marker(state, 1, tv=0) is ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_marker_of_an_older_coordinator_is_a_zombies() -> None:
    state = ProducerStateManager()
    fold(state, txn_batch(0, 7, 2, 0), marker(1, 7, 2, commit=False, coordinator=5))
    assert check_marker(state, 2, tv=0, coordinator=4) is (ErrorCode.TRANSACTION_COORDINATOR_FENCED)
    assert check_marker(state, 2, tv=0, coordinator=5) is ErrorCode.NONE
    restored = ProducerStateManager.from_snapshot(state.snapshot())
    assert restored.entry(7) == state.entry(7)
    assert read_header(marker(0, 1, 0, commit=False)[:61]).control_type == -1


def test_open_transactions_bound_the_stable_offset_until_their_markers() -> None:
    state = ProducerStateManager()
    fold(state, txn_batch(0, 1, 0, 0, n=2), txn_batch(2, 2, 0, 0), txn_batch(3, 1, 0, 2))
    assert state.first_unstable_offset() == 0
    fold(state, marker(4, 1, 0, commit=True))
    assert state.first_unstable_offset() == 2
    fold(state, marker(5, 2, 0, commit=False))
    assert state.first_unstable_offset() is None
    assert state.aborted_transactions(0, 10) == [
        AbortedTxn(producer_id=2, first_offset=2, last_offset=5)
    ]
    assert state.aborted_transactions(6, 10) == []  # its marker is below the fetch
    assert state.aborted_transactions(0, 2) == []  # it begins at or after the end


def test_a_marker_with_no_open_transaction_changes_nothing_but_the_epoch() -> None:
    state = ProducerStateManager()
    fold(state, txn_batch(0, 1, 0, 0), marker(1, 1, 0, commit=False), marker(2, 1, 0, commit=False))
    assert len(state.aborted_transactions(0, 10)) == 1


def test_a_fencing_marker_bumps_the_epoch_so_late_batches_are_refused() -> None:
    state = ProducerStateManager()
    fold(state, txn_batch(0, 1, 0, 0), marker(1, 1, 1, commit=False))
    late = read_header(txn_batch(0, 1, 0, 1))
    check = state.check(late)
    assert isinstance(check, SequenceRejected)
    assert check.error_code is ErrorCode.INVALID_PRODUCER_EPOCH
    fresh = read_header(txn_batch(0, 1, 1, 0))
    assert not isinstance(state.check(fresh), SequenceRejected)


def test_the_snapshot_keeps_open_and_aborted_transactions() -> None:
    state = ProducerStateManager()
    fold(state, txn_batch(0, 1, 0, 0), txn_batch(1, 2, 0, 0), marker(2, 2, 0, commit=False))
    again = ProducerStateManager.from_snapshot(state.snapshot())
    assert again.first_unstable_offset() == 0
    assert again.aborted_transactions(0, 10) == state.aborted_transactions(0, 10)


def test_truncating_a_log_with_transactions_asks_for_a_reload() -> None:
    state = ProducerStateManager()
    fold(state, txn_batch(0, 1, 0, 0), marker(1, 1, 0, commit=False))
    assert state.truncate_to(1) is False
    assert state.aborted_transactions(0, 10) == []
    plain = ProducerStateManager()
    fold(
        plain, build_batch([b"x"], timestamp_ms=1, producer_id=3, producer_epoch=0, base_sequence=0)
    )
    assert plain.truncate_to(5) is True


def test_a_read_committed_fetch_stops_at_the_stable_offset_and_names_aborted_records() -> None:
    from replication.broker.replicas.stable_reads import aborted_in, last_stable_offset
    from replication.messages import AbortedTransaction

    state = ProducerStateManager()
    batches = [txn_batch(0, 1, 0, 0), marker(1, 1, 0, commit=False), txn_batch(2, 2, 0, 0)]
    fold(state, *batches)
    assert last_stable_offset(state, 10) == 2
    assert last_stable_offset(state, 1) == 1
    fetched = b"".join(batches[:2])
    assert aborted_in(state, 0, fetched) == (AbortedTransaction(producer_id=1, first_offset=0),)
    assert aborted_in(state, 0, b"") == ()
    # A region of the segment (sent with sendfile, never read) says where its batches end.
    region = FileRegion(-1, 0, len(fetched), next_offset=2)
    assert aborted_in(state, 0, region) == aborted_in(state, 0, fetched)
    assert aborted_in(state, 1, FileRegion(-1, 0, 100, next_offset=1)) == ()


def test_a_read_committed_consumer_drops_exactly_the_aborted_batches() -> None:
    from replication.clients.read_committed import drop_aborted
    from replication.messages import AbortedTransaction

    plain = bytearray(build_batch([b"p"], timestamp_ms=1))
    set_base_offset(plain, 4)
    batches = [
        txn_batch(0, 1, 0, 0),  # aborted
        txn_batch(1, 2, 0, 0),  # committed
        marker(2, 1, 0, commit=False),
        marker(3, 2, 0, commit=True),
        bytes(plain),
        txn_batch(5, 1, 0, 1),  # producer 1's next transaction: committed
        marker(6, 1, 0, commit=True),
    ]
    kept = drop_aborted(b"".join(batches), [AbortedTransaction(producer_id=1, first_offset=0)])
    offsets = [read_header(kept, pos).base_offset for pos in _positions(kept)]
    assert offsets == [1, 2, 3, 4, 5, 6]


def _positions(data: bytes) -> list[int]:
    from storage.records import iter_batches

    return [pos for pos, _ in iter_batches(data)]


def test_a_leader_appends_a_coordinators_marker_but_no_other_control_batch() -> None:
    from storage.batch_validation import validate_produced_batch
    from storage.config import LogConfig
    from storage.errors import InvalidRecordError

    marker_batch = build_marker_batch(
        commit=True, producer_id=7, producer_epoch=1, coordinator_epoch=3, timestamp_ms=1
    )
    assert validate_produced_batch(marker_batch, LogConfig(), 1).control_type == ControlType.COMMIT
    unmarked = build_batch(
        [b"x"], timestamp_ms=1, producer_id=7, producer_epoch=1, is_control=True
    )  # a control batch without the transactional bit and a marker key
    with pytest.raises(InvalidRecordError):
        validate_produced_batch(unmarked, LogConfig(), 1)
    transactional = build_batch(
        [b"x"],
        timestamp_ms=1,
        producer_id=7,
        producer_epoch=1,
        base_sequence=0,
        is_transactional=True,
    )
    assert validate_produced_batch(transactional, LogConfig(), 1).is_transactional


def test_a_group_shard_commits_pending_offsets_with_the_transaction() -> None:
    from replication.broker.coordinators.group_shard import GroupShard
    from replication.group import GroupConfig
    from replication.group.classic import ClassicGroupConfig
    from replication.group.records import OFFSET_COMMIT, OffsetCommitValue, RecordKey, record
    from replication.group.txn_offsets import pending_record
    from replication.group.types import OffsetFetchRequest

    def shard() -> GroupShard:
        return GroupShard(GroupConfig(), ClassicGroupConfig())

    def committed(s: GroupShard) -> list[int]:
        answer = s.kip848.fetch_offsets(OffsetFetchRequest(group_id="g", partitions=None))
        return [o.offset for o in answer.offsets]

    commit = record(
        RecordKey(OFFSET_COMMIT, "g", topic="t", partition=0),
        OffsetCommitValue(offset=42, leader_epoch=-1, metadata="", commit_timestamp_ms=1),
    )
    pending = pending_record(9, commit)
    # Live: the completion's records commit the offset and clear the pending one.
    live = shard()
    live.replay(*pending)
    assert committed(live) == []
    for key, value in live.complete_txn(9, commit=True).records:
        live.replay(key, value)
    assert committed(live) == [42] and not live.txn_offsets.has(9)
    # A load that reads the marker (the completion never written) ends up the same.
    loaded = shard()
    loaded.replay(*pending)
    loaded.replay_marker(9, commit=True)
    assert committed(loaded) == [42]
    aborted = shard()
    aborted.replay(*pending)
    aborted.replay_marker(9, commit=False)
    assert committed(aborted) == [] and not aborted.txn_offsets.has(9)


def test_compaction_keeps_every_marker_and_maps_no_marker_key() -> None:
    from storage.compaction import OffsetMap, clean_batches, map_keys
    from storage.config import LogConfig
    from storage.records import SimpleRecord, iter_batches

    def keyed(offset: int, value: bytes) -> bytes:
        batch = bytearray(
            build_batch([SimpleRecord(key=b"\x00\x00\x00\x01", value=value)], timestamp_ms=1)
        )
        set_base_offset(batch, offset)
        return bytes(batch)

    data = b"".join(
        [
            txn_batch(0, 1, 0, 0),
            marker(1, 1, 0, commit=True),
            marker(2, 1, 0, commit=False),
            keyed(3, b"old"),  # a user key equal to a marker's key
            keyed(4, b"new"),
        ]
    )
    offsets = OffsetMap()
    assert map_keys(data, offsets, end_offset=5) is None
    offsets.end_offset = 5
    cleaned = clean_batches(data, offsets, LogConfig(), now_ms=1)
    assert cleaned is not None
    out, removed = cleaned
    assert removed == 1  # "old" only
    headers = [h for _, h in iter_batches(out)]
    assert [h.base_offset for h in headers if h.is_control] == [1, 2]


def test_a_next_transactions_batch_before_the_previous_marker_is_verified_not_merged() -> None:
    """KIP-890 part 2 (seen with Kafka's TransactionalMessageCopier): EndTxn bumps the epoch and
    answers before the markers are written, so the client's next transaction (epoch 1) reached a
    partition where the previous one (epoch 0) was still open. Taken as "open here", its batch
    skipped the coordinator (which answers CONCURRENT_TRANSACTIONS until the markers are in),
    joined the previous transaction, and that one's COMMIT marker (epoch 1) committed records
    whose own transaction then aborted: duplicates under read_committed. As Kafka's
    ``UnifiedLog.hasOngoingTransaction``, only a transaction of the batch's epoch is open."""
    state = ProducerStateManager()
    fold(state, txn_batch(0, 1, 0, 0, n=40))  # transaction 1 (epoch 0), its marker not yet in
    early = read_header(txn_batch(40, 1, 1, 0, n=28))  # transaction 2's first batch, epoch 1
    assert state.has_ongoing_transaction(1, 0) and not state.has_ongoing_transaction(1, 1)
    facts = batch_facts(early, state)
    assert facts is not None and not facts.open_here
    plan = plan_verification("copier", {TopicPartition("out", 0): facts}, add=True)
    assert plan.verify is not None and plan.verify.producer_epoch == 1  # the coordinator decides
    seen = state.markers_seen(1)
    assert admit(open_here=facts.open_here, guard=None, markers_seen=seen) is (
        ErrorCode.INVALID_TXN_STATE
    )  # a guard taken before transaction 1's marker does not let it in either:
    guard = VerificationGuard(markers_seen=seen)
    fold(state, marker(40, 1, 1, commit=True))
    assert admit(open_here=False, guard=guard, markers_seen=state.markers_seen(1)) is (
        ErrorCode.INVALID_TXN_STATE
    )
    # Asked again after the marker, the coordinator adds it: transaction 2 opens at 41 alone,
    # and its abort marker hides exactly its records.
    fold(state, txn_batch(41, 1, 1, 0, n=28), marker(69, 1, 2, commit=False))
    assert state.aborted_transactions(0, 100) == [
        AbortedTxn(producer_id=1, first_offset=41, last_offset=69)
    ]
