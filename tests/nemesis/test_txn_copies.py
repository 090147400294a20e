"""Exactly once through the copier (consume-transform-produce, KIP-447): the checker passes a
clean pipeline and catches a record copied twice, a copy of an aborted record, and committed
offsets that disagree with the committed copies (either way)."""

from __future__ import annotations

from typing import Any

from replication.nemesis.txn_history import (
    READ_COMMITTED,
    TxnBegin,
    TxnCopied,
    TxnEnd,
    TxnFinalRead,
    TxnGroupOffsets,
    TxnReport,
    TxnSend,
    check_txn_history,
)

SOURCE = (("p0-0", "commit", (0, 1)), ("p0-1", "abort", (3, 4)), ("p0-2", "commit", (6, 7)))
"""The producer's transactions on the source topic ``a``: name, end, offsets of its records."""


def _txn(ops: list[Any], process: str, name: str, topic: str, values: list[str], end: str) -> None:
    ops.append(TxnBegin(time_ms=len(ops), process=process, txn=name))
    for value in values:
        ops.append(
            TxnSend(
                time_ms=len(ops), process=process, txn=name, topic=topic, partition=0, value=value
            )
        )
    ops.append(
        TxnEnd(
            time_ms=len(ops),
            start_ms=len(ops),
            process=process,
            txn=name,
            action="commit" if end == "commit" else "abort",
            outcome="ok",
        )
    )


def _final(topic: str, records: list[tuple[int, str]]) -> TxnFinalRead:
    return TxnFinalRead(
        time_ms=1000,
        topic=topic,
        partition=0,
        isolation=READ_COMMITTED,
        end_offset=records[-1][0] + 2 if records else 0,
        records=tuple(records),
    )


def pipeline(copies: list[tuple[str, list[int]]], committed_offset: int) -> TxnReport:
    """The source transactions, the copier's ``copies`` (transaction name -> the source
    offsets it copies; a name ending in ``!`` is aborted), and the group's offset."""
    ops: list[Any] = []
    by_offset: dict[int, str] = {}
    for name, end, offsets in SOURCE:
        values = [f"{name}-{i}" for i in range(len(offsets))]
        _txn(ops, "p0", name, "a", values, end)
        by_offset.update(zip(offsets, values, strict=True))
    out: list[tuple[int, str]] = []
    for name, sources in copies:
        aborted = name.endswith("!")
        txn = name.rstrip("!")
        values = [f"{txn}-{i}" for i in range(len(sources))]
        _txn(ops, "c0", txn, "b", values, "abort" if aborted else "commit")
        for value, offset in zip(values, sources, strict=True):
            ops.append(
                TxnCopied(
                    time_ms=len(ops),
                    process="c0",
                    txn=txn,
                    value=value,
                    source_topic="a",
                    source_partition=0,
                    source_offset=offset,
                    source_value=by_offset[offset],
                )
            )
            if not aborted:
                out.append((len(out) * 2, value))
    committed_source = [(o, v) for o, v in sorted(by_offset.items()) if not v.startswith("p0-1")]
    ops += [_final("a", committed_source), _final("b", out)]
    ops.append(TxnGroupOffsets(time_ms=1001, group="g", offsets=(("a", 0, committed_offset),)))
    return check_txn_history(ops)


def found(report: TxnReport) -> set[str]:
    return {name for name, count in report.violations().items() if count}


def test_a_pipeline_that_copied_each_committed_record_once_with_its_offsets_is_valid() -> None:
    # an aborted attempt, then the same records again; the group stopped before p0-2
    report = pipeline([("c0-0!", [0, 1]), ("c0-1", [0, 1])], committed_offset=3)
    assert report.valid, report.violations()
    assert report.copies == 2


def test_a_record_with_two_committed_copies_was_copied_twice() -> None:
    report = pipeline([("c0-0", [0, 1]), ("c0-1", [1])], committed_offset=2)
    assert found(report) == {"copied_twice"}


def test_a_committed_copy_of_an_aborted_record_is_caught() -> None:
    report = pipeline([("c0-0", [0, 1, 3])], committed_offset=5)
    assert "copied_aborted" in found(report)


def test_committed_offsets_past_records_without_copies_are_not_atomic() -> None:
    report = pipeline([("c0-0", [0, 1])], committed_offset=8)
    assert found(report) == {"offsets_not_atomic"}
    assert report.offsets_not_atomic.count == 2  # 6 and 7


def test_committed_copies_beyond_the_committed_offsets_are_not_atomic() -> None:
    report = pipeline([("c0-0", [0, 1]), ("c0-1", [6, 7])], committed_offset=2)
    assert found(report) == {"offsets_not_atomic"}
