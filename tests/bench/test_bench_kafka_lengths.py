"""`python -m kraft.bench.kafka_lengths`: each request shape it times is checked whole (the
check ends where the frame ends) and decoded, and it prints a row per shape."""

from __future__ import annotations

import pytest

from kraft.bench import kafka_lengths


def test_every_shape_is_checked_to_its_end_and_timed() -> None:
    rows = kafka_lengths.measure(rounds=1, times=10)
    assert [name for name, *_ in rows] == list(kafka_lengths.shapes())
    for _name, size, check_us, decode_us in rows:
        assert size > 0 and check_us >= 0 and decode_us >= 0


def test_the_command_prints_a_row_per_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert kafka_lengths.main(["--rounds", "1", "--times", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(kafka_lengths.shapes())
    assert lines[-1].startswith("Metadata v12")
