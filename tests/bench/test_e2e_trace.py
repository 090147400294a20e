"""`kraft.bench.e2e_trace.breakdown`: a record's steps from the brokers' trace lines."""

from __future__ import annotations

from pathlib import Path

from kraft.bench.e2e_trace import STEPS, breakdown

MS = 1_000_000


def test_breakdown_joins_each_record_to_its_events_by_partition_and_offset(tmp_path: Path) -> None:
    """Partition 2, offsets 10-14 in one batch: sent at 0 ms, at the leader at 1, appended
    at 2, on the followers at 4 and 7, covered by the high watermark at 11, answered at 12,
    at the consumer at 14, polled at 17; a second batch (15-19) shifted by 100 ms."""
    leader, one, two = (tmp_path / f"broker-{n}.log" for n in (1, 2, 3))
    lines_leader, lines_one, lines_two = [], [], []
    for shift, base in ((0, 10), (100, 15)):
        t = shift * MS
        lines_leader += [
            f"{t + 2 * MS} append 2 {base} {base + 5} 1",
            f"{t + 11 * MS} hw 2 {base + 5}",
            f"{t + 11 * MS} produce {t + 1 * MS} 2:{base}",
            f"{t + 12 * MS} fetch {t - 50 * MS} 2:{base + 5}",
        ]
        lines_one.append(f"{t + 4 * MS} append 2 {base} {base + 5} 0")
        lines_two.append(f"{t + 7 * MS} append 2 {base} {base + 5} 0")
    for path, lines in ((leader, lines_leader), (one, lines_one), (two, lines_two)):
        path.write_text("\n".join(lines) + "\n")
    records = [(2, o, (o // 15) * 100 * MS, (o // 15) * 100 * MS + 17 * MS) for o in range(10, 20)]
    arrived = {(2, o): (o // 15) * 100 * MS + 14 * MS for o in range(10, 20)}
    steps = breakdown(tmp_path, records, arrived)
    assert list(steps) == list(STEPS)
    assert [step["p50_ms"] for step in steps.values()] == [1, 1, 2, 3, 4, 1, 2, 3]


def test_a_record_with_an_untraced_step_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "broker-1.log").write_text(f"{2 * MS} append 0 0 1 1\n")  # no follower, no hw
    steps = breakdown(tmp_path, [(0, 0, 0, 5 * MS)] * 20, {(0, 0): 4 * MS})
    assert all(step["p50_ms"] != step["p50_ms"] for step in steps.values())  # NaN: no record
