"""The transactional checker passes a clean history and catches each anomaly it is given:
aborted reads (by a read_committed reader and in the final read), reads past the last stable
offset, lost committed records, partial transactions, duplicates, inconsistent offsets and
read_committed offsets going back."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from replication.nemesis.history import History, iter_jsonl
from replication.nemesis.txn_history import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TxnBegin,
    TxnDelivered,
    TxnEnd,
    TxnFinalRead,
    TxnPoll,
    TxnReaderStart,
    TxnReport,
    TxnRestart,
    TxnSend,
    check_txn_history,
)

A = "a"


@dataclass
class Log:
    """A hand-made history: transactions of 2 records on partition 0, each at the next
    offsets (``txn`` -> its offsets)."""

    ops: list[Any] = field(default_factory=list)
    offsets: dict[str, list[int]] = field(default_factory=dict)
    next_offset: int = 0
    t: int = 0

    def tick(self) -> int:
        self.t += 10
        return self.t

    def txn(self, name: str, action: str = "commit", outcome: str = "ok", records: int = 2) -> str:
        self.ops.append(TxnBegin(time_ms=self.tick(), process="p0", txn=name))
        at = []
        for i in range(records):
            value = f"{name}-{i}"
            self.ops.append(
                TxnSend(
                    time_ms=self.tick(), process="p0", txn=name, topic=A, partition=0, value=value
                )
            )
            self.ops.append(
                TxnDelivered(
                    time_ms=self.tick(),
                    process="p0",
                    txn=name,
                    topic=A,
                    partition=0,
                    value=value,
                    offset=self.next_offset,
                )
            )
            at.append(self.next_offset)
            self.next_offset += 1
        self.next_offset += 1  # the marker
        self.offsets[name] = at
        start = self.tick()
        self.ops.append(
            TxnEnd(
                time_ms=self.tick(),
                start_ms=start,
                process="p0",
                txn=name,
                action="commit" if action == "commit" else "abort",
                outcome=outcome,  # type: ignore[arg-type]
            )
        )
        return name

    def poll(
        self, value: str, offset: int, *, isolation: str = READ_COMMITTED, time_ms: int = 0
    ) -> None:
        self.ops.append(
            TxnPoll(
                time_ms=time_ms or self.tick(),
                process="rc" if isolation == READ_COMMITTED else "ru",
                isolation=isolation,
                topic=A,
                partition=0,
                offset=offset,
                value=value,
            )
        )

    def final(self, *txns_or_values: str) -> None:
        records: list[tuple[int, str]] = []
        for item in txns_or_values:
            if item in self.offsets:
                records += [(o, f"{item}-{i}") for i, o in enumerate(self.offsets[item])]
            else:
                value, _, offset = item.partition("@")
                records.append((int(offset), value))
        self.ops.append(
            TxnFinalRead(
                time_ms=self.tick(),
                topic=A,
                partition=0,
                isolation=READ_COMMITTED,
                end_offset=self.next_offset,
                records=tuple(sorted(records)),
            )
        )

    def check(self) -> TxnReport:
        return check_txn_history(self.ops)


def only(report: TxnReport, *names: str) -> bool:
    """True if exactly the violations ``names`` were found."""
    return {n for n, c in report.violations().items() if c} == set(names)


def _clean() -> Log:
    log = Log()
    log.ops.append(TxnReaderStart(time_ms=0, process="rc", isolation=READ_COMMITTED))
    log.txn("p0-0")
    log.txn("p0-1", action="abort")
    log.txn("p0-2", outcome="indeterminate")  # did commit
    log.txn("p0-3", outcome="indeterminate", records=1)  # did not
    log.txn("p0-4", outcome="failed")  # asked to commit, failed: aborted
    log.ops.append(TxnRestart(time_ms=log.tick(), process="p0", error="fenced"))
    log.poll("p0-0-0", 0)
    log.poll("p0-0-1", 1)
    log.poll("p0-2-0", 6)
    log.poll("p0-1-0", 3, isolation=READ_UNCOMMITTED)
    log.final("p0-0", "p0-2")
    return log


def test_a_clean_history_is_valid_and_counted() -> None:
    report = _clean().check()
    assert report.valid, report.violations()
    assert (report.transactions, report.committed, report.aborted, report.indeterminate) == (
        5,
        1,
        2,
        2,
    )
    assert (report.indeterminate_visible, report.restarts, report.uncommitted_seen) == (1, 1, 1)
    assert (report.records_sent, report.polls, report.final_records) == (9, 4, 4)


def test_a_read_committed_poll_of_an_aborted_transaction_is_an_aborted_read() -> None:
    log = _clean()
    log.ops.append(TxnReaderStart(time_ms=log.tick(), process="rc", isolation=READ_COMMITTED))
    log.poll("p0-1-0", 3)
    assert only(log.check(), "aborted_reads")


def test_a_commit_that_failed_and_is_visible_is_an_aborted_read() -> None:
    log = _clean()
    log.ops.pop()  # the final read
    log.final("p0-0", "p0-2", "p0-4")
    report = log.check()
    assert only(report, "aborted_reads")
    assert report.aborted_reads.count == 2  # both records


def test_a_transaction_never_asked_to_commit_is_aborted_even_without_an_abort() -> None:
    log = _clean()
    log.ops.append(TxnBegin(time_ms=log.tick(), process="p1", txn="p1-0"))
    log.ops.append(
        TxnSend(time_ms=log.tick(), process="p1", txn="p1-0", topic=A, partition=0, value="p1-0-0")
    )
    log.ops.pop(-3)  # the final read goes after
    log.final("p0-0", "p0-2", "p1-0-0@20")
    assert only(log.check(), "aborted_reads")


def test_a_read_committed_poll_before_the_commit_was_asked_for_is_premature() -> None:
    log = Log()
    log.txn("p0-0")
    log.poll("p0-0-0", 0, time_ms=1)  # the commit was asked for at 60 ms
    log.final("p0-0")
    report = log.check()
    assert only(report, "premature_reads")
    assert report.premature_reads.count == 1


def test_a_committed_record_missing_from_the_final_read_is_lost_and_not_atomic() -> None:
    log = _clean()
    log.ops.pop()
    log.final("p0-0-0@0", "p0-2")
    report = log.check()
    assert only(report, "lost", "not_atomic")
    assert report.lost.examples == ["'p0-0-1' of p0-0, committed, not in the final read"]


def test_a_committed_transaction_entirely_missing_is_lost_but_not_partial() -> None:
    log = _clean()
    log.ops.pop()
    log.final("p0-2")
    report = log.check()
    assert only(report, "lost")
    assert report.lost.count == 2


def test_an_indeterminate_transaction_may_show_all_or_none_never_a_part() -> None:
    log = _clean()
    log.ops.pop()
    log.final("p0-0", "p0-2-0@6")
    assert only(log.check(), "not_atomic")


def test_a_value_at_two_offsets_of_the_final_read_is_duplicated() -> None:
    log = _clean()
    log.ops.pop()
    log.final("p0-0", "p0-2", "p0-2-1@9")
    assert only(log.check(), "duplicated")


def test_one_offset_with_two_values_is_inconsistent() -> None:
    log = _clean()
    log.poll("p0-2-1", 1, isolation=READ_UNCOMMITTED)  # offset 1 holds p0-0-1
    report = log.check()
    assert only(report, "inconsistent_offsets")


def test_a_committed_record_read_back_at_another_offset_than_delivered_is_inconsistent() -> None:
    log = _clean()
    log.ops.pop()
    log.offsets["p0-0"] = [0, 2]  # delivered at 1, read at 2 (where the marker was)
    log.final("p0-0", "p0-2")
    assert only(log.check(), "inconsistent_offsets")


def test_read_committed_offsets_going_back_without_a_restart_are_non_monotonic() -> None:
    log = _clean()
    log.poll("p0-0-0", 0)
    report = log.check()
    assert report.non_monotonic_polls.count == 1
    assert report.duplicated.count == 0  # one place, read twice: not a duplicate
    log = _clean()
    log.ops.append(TxnReaderStart(time_ms=log.tick(), process="rc", isolation=READ_COMMITTED))
    log.poll("p0-0-0", 0)
    assert log.check().valid


def test_the_history_round_trips_through_json_lines() -> None:
    out = io.StringIO()
    history = History(out)
    ops: Sequence[Any] = _clean().ops
    for op in ops:
        history.record(op)
    assert list(iter_jsonl(out.getvalue().splitlines())) == list(ops)
