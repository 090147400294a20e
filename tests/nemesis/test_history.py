"""The history checker catches each anomaly it is given, and passes a clean history."""

from __future__ import annotations

import io

import pytest

from replication.nemesis import (
    Ack,
    FinalRead,
    History,
    Operation,
    Poll,
    Seek,
    Send,
    SendFailed,
    check_history,
    from_json,
    iter_jsonl,
)

T = "events"


def _write(process: str, value: str, offset: int, partition: int = 0) -> list[Operation]:
    return [
        Send(time_ms=0, process=process, topic=T, partition=partition, value=value),
        Ack(time_ms=1, process=process, topic=T, partition=partition, value=value, offset=offset),
    ]


def _poll(process: str, offset: int, value: str, partition: int = 0) -> Poll:
    return Poll(
        time_ms=2, process=process, topic=T, partition=partition, offset=offset, value=value
    )


def _final(*values: str, partition: int = 0, start: int = 0) -> FinalRead:
    records = tuple((start + i, v) for i, v in enumerate(values))
    return FinalRead(
        time_ms=9,
        topic=T,
        partition=partition,
        log_start_offset=start,
        high_watermark=start + len(values),
        records=records,
    )


def test_a_clean_history_is_valid_and_counts_everything() -> None:
    ops = [*_write("p", "p-0", 0), *_write("p", "p-1", 1), _poll("c", 0, "p-0")]
    ops.append(_final("p-0", "p-1"))
    report = check_history(ops)
    assert report.valid, report.violations()
    assert (report.sends, report.acknowledged, report.polls, report.final_records) == (2, 2, 1, 2)
    assert report.unseen.count == 1  # p-1 was never polled: informational only


def test_an_acknowledged_write_missing_from_the_final_read_is_lost() -> None:
    ops = [*_write("p", "p-0", 0), *_write("p", "p-1", 1), _final("p-0")]
    report = check_history(ops)
    assert not report.valid
    assert report.lost.count == 1
    assert "p-1" in report.lost.examples[0]


def test_a_write_below_the_log_start_was_retained_away_not_lost() -> None:
    ops = [*_write("p", "p-0", 0), *_write("p", "p-1", 1), _final("p-1", start=1)]
    assert check_history(ops).valid


def test_a_value_at_two_offsets_is_a_duplicate() -> None:
    ops = [*_write("p", "p-0", 0), _final("p-0", "p-0")]
    report = check_history(ops)
    assert report.duplicated.count == 1


def test_one_offset_read_with_two_values_is_inconsistent() -> None:
    ops = [*_write("p", "p-0", 0), _poll("c", 0, "x-9"), _final("p-0")]
    report = check_history(ops)
    assert report.inconsistent_offsets.count == 1
    assert report.vanished.count == 1  # and x-9 was read, never acknowledged, then gone


def test_a_producers_offsets_going_back_are_non_monotonic() -> None:
    ops = [*_write("p", "p-0", 5), *_write("p", "p-1", 3), _final()]
    report = check_history(ops)
    assert report.non_monotonic_sends.count == 1


def test_acknowledgements_recorded_out_of_order_are_judged_in_send_order() -> None:
    sends = [Send(time_ms=0, process="p", topic=T, partition=0, value=f"p-{i}") for i in (0, 1)]
    acks = [
        Ack(time_ms=1, process="p", topic=T, partition=0, value="p-1", offset=1),
        Ack(time_ms=1, process="p", topic=T, partition=0, value="p-0", offset=0),
    ]
    assert check_history([*sends, *acks, _final("p-0", "p-1")]).valid


def test_a_consumer_going_back_needs_a_seek() -> None:
    polls = [_poll("c", 0, "p-0"), _poll("c", 1, "p-1"), _poll("c", 0, "p-0")]
    base = [*_write("p", "p-0", 0), *_write("p", "p-1", 1)]
    assert check_history([*base, *polls, _final("p-0", "p-1")]).non_monotonic_polls.count == 1
    seek = Seek(time_ms=2, process="c", topic=T, partition=0, offset=0)
    with_seek = [*base, *polls[:2], seek, polls[2], _final("p-0", "p-1")]
    assert check_history(with_seek).valid


def test_an_indeterminate_failure_may_or_may_not_be_in_the_log() -> None:
    failed = SendFailed(
        time_ms=1, process="p", topic=T, partition=0, value="p-0", definite=False, error="timeout"
    )
    sent = Send(time_ms=0, process="p", topic=T, partition=0, value="p-0")
    for final in (_final("p-0"), _final()):
        report = check_history([sent, failed, final])
        assert report.valid
        assert report.failed_indeterminate == 1


def test_partitions_not_read_back_are_not_judged() -> None:
    ops = [*_write("p", "p-0", 0, partition=1), _final(partition=0)]
    assert check_history(ops).valid


def test_the_history_round_trips_through_json_lines() -> None:
    out = io.StringIO()
    history = History(out)
    ops = [*_write("p", "p-0", 0), _poll("c", 0, "p-0"), _final("p-0")]
    for op in ops:
        history.record(op)
    assert list(iter_jsonl(out.getvalue().splitlines())) == ops


@pytest.mark.parametrize("line", ['{"kind": "nope"}', '{"kind": "send", "time_ms": 1}'])
def test_a_malformed_line_is_a_value_error(line: str) -> None:
    with pytest.raises(ValueError):
        from_json(line)
