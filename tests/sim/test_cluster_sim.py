"""The broker simulation (controller + ISR brokers + producers under faults): a seed range
holds every invariant, a seed replays exactly, and the checker fails when followers truncate
to their high watermark (Kafka before KIP-101)."""

from __future__ import annotations

import time

import pytest

from replication.sim import cli_cluster, run_seed, run_seeds

SEEDS = 200


def test_a_seed_range_holds_every_invariant_and_recovers_after_the_heal() -> None:
    t0 = time.perf_counter()
    summary = run_seeds(0, SEEDS, processes=2, stop_on_violation=False)
    elapsed = time.perf_counter() - t0
    bad = [f"{r.violation} -- replay: {r.replay}" for r in summary.violations]
    assert not bad, "\n".join(bad)
    assert summary.seeds_run == SEEDS
    assert summary.faults > 5 * SEEDS and summary.acked_records > 100 * SEEDS
    assert elapsed < 60, f"{SEEDS} seeds took {elapsed:.0f}s"


def test_a_seed_replays_exactly() -> None:
    a = run_seed(0x2A, partitions=3)
    b = run_seed(0x2A, partitions=3)
    assert a == b and a.violation is None
    assert a.faults > 0 and a.acked_all > 0 and a.recovery_ms is not None


def test_a_restarted_broker_acts_on_metadata_only_after_its_own_registration() -> None:
    """Seed 0x9e: a leader loses its whole log to a power loss and registers again while its
    image still names it the leader of the old epoch. Acting on that image, it answered its
    followers' fetches with a diverging epoch ending at 0 and they truncated committed
    records. The shell now waits until its image holds its registration (KRaft's catch-up)."""
    assert run_seed(0x9E).violation is None


def test_high_watermark_truncation_loses_acknowledged_or_committed_records() -> None:
    """KIP-101's data loss, found by the same checkers: with followers truncating to their
    own high watermark, some seeds expose two different batches at one committed offset."""
    results = [run_seed(s, hw_truncation=True) for s in range(30)]
    caught = [r for r in results if r.violation is not None]
    assert len(caught) >= 3, [r.line() for r in results]
    assert all(
        r.violation.startswith(("committed_identical", "acked_never_lost", "monotonic_high"))
        for r in caught
        if r.violation is not None
    )
    assert caught[0].replay.endswith("--unsafe-hw-truncation")


def test_cli_prints_a_summary_and_the_replay_command_on_failure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli_cluster(["--seeds", "3", "--start", "10"]) == 0
    assert capsys.readouterr().out.startswith("seeds=3 faults=")
    assert cli_cluster(["--seeds", "20", "--unsafe-hw-truncation"]) == 1
    captured = capsys.readouterr()
    assert "violations=1" in captured.out
    assert "replay: kraft sim cluster --seed 0x" in captured.err
    assert captured.err.rstrip().endswith("--unsafe-hw-truncation")
