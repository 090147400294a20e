"""A group's offsets committed inside transactions, in the simulator's ``__consumer_offsets``
partition (KIP-98 TxnOffsetCommit, KIP-447): pending until the producer's commit marker,
gone on its abort, the last committed record per key by log offset; and the simulator's
exactly-once judgement of its copier."""

from __future__ import annotations

import pytest

from kraft.sim.checker import InvariantViolated
from kraft.types import TopicPartition
from replication.group.offsets import commit_offsets
from replication.group.types import OffsetCommitPartition, OffsetCommitRequest
from replication.sim.group_offsets import (
    GroupOffsetsLog,
    offsets_partition,
    txn_offset_commit_batch,
)
from replication.sim.txn import TxnChecker
from storage.control import build_marker_batch
from storage.records import SimpleRecord, build_batch, read_header, set_base_offset

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


class _Log:
    """A partition's batches with offsets assigned, folded as they are appended."""

    def __init__(self) -> None:
        self.next_offset = 0
        self.fold = GroupOffsetsLog()

    def append(self, batch: bytes) -> None:
        buf = bytearray(batch)
        set_base_offset(buf, self.next_offset)
        self.fold.replay(bytes(buf))
        self.next_offset = read_header(buf).next_offset

    def offsets(
        self, producer_id: int, offsets: dict[TopicPartition, int], group: str = "g"
    ) -> None:
        self.append(
            txn_offset_commit_batch(
                group, offsets, producer_id=producer_id, producer_epoch=0, now_ms=1
            )
        )

    def marker(self, producer_id: int, *, commit: bool) -> None:
        self.append(
            build_marker_batch(
                commit=commit,
                producer_id=producer_id,
                producer_epoch=1,
                coordinator_epoch=0,
                timestamp_ms=1,
            )
        )


def test_transactional_offsets_are_invisible_until_the_commit_marker() -> None:
    log = _Log()
    log.offsets(7, {A0: 5, A1: 2})
    assert log.fold.committed("g") == {} and log.fold.pending("g")
    log.marker(7, commit=True)
    assert log.fold.committed("g") == {A0: 5, A1: 2} and not log.fold.pending("g")


def test_aborted_offsets_vanish_and_the_committed_ones_stay() -> None:
    log = _Log()
    log.offsets(7, {A0: 5})
    log.marker(7, commit=True)
    log.offsets(7, {A0: 9})
    assert log.fold.committed("g") == {A0: 5}
    log.marker(7, commit=False)
    assert log.fold.committed("g") == {A0: 5} and not log.fold.pending("g")


def test_the_record_at_the_higher_log_offset_wins_whatever_order_the_markers_land_in() -> None:
    """read_committed order is log order: a transaction that wrote earlier but committed later
    does not overwrite a later record of the same key."""
    log = _Log()
    log.offsets(1, {A0: 3})  # offset 0
    log.offsets(2, {A0: 8})  # offset 1
    log.marker(2, commit=True)
    log.marker(1, commit=True)
    assert log.fold.committed("g") == {A0: 8}


def test_plain_offset_commits_apply_at_once_and_groups_stay_apart() -> None:
    log = _Log()
    records = commit_offsets(
        {},
        OffsetCommitRequest(
            group_id="h", partitions=(OffsetCommitPartition(topic="a", partition=0, offset=4),)
        ),
        now_ms=1,
    ).records
    log.append(build_batch([SimpleRecord(key=k, value=v) for k, v in records], timestamp_ms=1))
    log.offsets(7, {A0: 6}, group="g")
    assert log.fold.committed("h") == {A0: 4} and not log.fold.pending("h")
    assert log.fold.committed("g") == {} and log.fold.pending("g")


def test_a_group_has_one_offsets_partition() -> None:
    assert offsets_partition("copier") == TopicPartition("__consumer_offsets", 0)


# --- the checker's exactly-once judgement of the copier -----------------------------------------


SOURCE, OUT = TopicPartition("events", 0), TopicPartition("copies", 0)


def _pipeline(copies: dict[bytes, bytes], *, aborted_source: bool = False) -> TxnChecker:
    """Source records s0..s2 at offsets 0..2 (s1 aborted if ``aborted_source``), and the
    committed copies ``copies`` (copy -> source), all read by the read_committed consumers."""
    checker = TxnChecker()
    checker.on_written((1, 0), SOURCE, [b"s0", b"s2"])
    checker.on_decided((1, 0), True)
    checker.on_written((1, 1), SOURCE, [b"s1"])
    checker.on_decided((1, 1), not aborted_source)
    for offset, value in enumerate((b"s0", b"s1", b"s2")):
        if value != b"s1" or not aborted_source:
            checker.on_read(SOURCE, offset, value)
    checker.on_written((2, 0), OUT, list(copies))
    checker.on_decided((2, 0), True)
    for offset, (copy, source) in enumerate(copies.items()):
        checker.on_copied(copy, source)
        checker.on_read(OUT, offset, copy)
    return checker


def test_copies_that_agree_with_the_committed_offsets_are_exactly_once() -> None:
    checker = _pipeline({b"c0": b"s0", b"c1": b"s1", b"c2": b"s2"})
    assert checker.check_copies([SOURCE], [OUT], {SOURCE: 3}) == 3


@pytest.mark.parametrize(
    ("copies", "offset", "violation"),
    [
        ({b"c0": b"s0", b"c1": b"s1", b"c2": b"s2", b"c3": b"s2"}, 3, "copied_twice"),
        ({b"c0": b"s0", b"c1": b"s1"}, 3, "offsets_not_atomic"),  # offsets ahead of copies
        ({b"c0": b"s0", b"c1": b"s1", b"c2": b"s2"}, 2, "offsets_not_atomic"),  # behind
        ({b"c0": b"s0"}, 1, "copier_caught_up"),
    ],
)
def test_the_checker_catches_copies_that_disagree_with_the_offsets(
    copies: dict[bytes, bytes], offset: int, violation: str
) -> None:
    with pytest.raises(InvariantViolated, match=violation):
        _pipeline(copies).check_copies([SOURCE], [OUT], {SOURCE: offset})


def test_the_checker_catches_a_copy_of_an_aborted_record() -> None:
    checker = _pipeline({b"c0": b"s0", b"c1": b"s1", b"c2": b"s2"}, aborted_source=True)
    with pytest.raises(InvariantViolated, match="copied_aborted"):
        checker.check_copies([SOURCE], [OUT], {SOURCE: 3})
