"""The simulator's transactional workload (issue 28): transactional producers commit and abort
through the transaction coordinator core while brokers crash, lose power and are cut off and
the coordinator fails over; read_committed consumers see exactly the committed records."""

from __future__ import annotations

import pytest

from replication.sim import cli_cluster
from replication.sim.txn_clients import ReadCommittedConsumer
from replication.sim.txn_run import run_txn_seed, run_txn_seeds


def test_a_seed_range_of_transactions_under_faults_is_valid() -> None:
    results = [run_txn_seed(seed) for seed in range(6)]
    assert all(r.violation is None for r in results), [r.line() for r in results]
    # the run did what it claims: faults struck the brokers and the coordinator, both
    # outcomes happened, the consumers dropped aborted records and read every committed one
    assert sum(r.faults for r in results) > 30
    assert all(r.coordinator_failovers > 0 for r in results)
    assert sum(r.committed for r in results) > 50 and sum(r.aborted for r in results) > 20
    assert sum(r.skipped for r in results) > 20
    assert all(r.read == r.committed_records > 0 for r in results)
    # the coordinator's appends to __transaction_state failed under the faults, and it
    # loaded its state again from the partition's committed records
    assert sum(r.coordinator_reloads for r in results) > 0


def test_quorum_partitions_run_the_transactional_workload_too() -> None:
    summary = run_txn_seeds(0, 2, mode="quorum")
    assert not summary.violations, [r.line() for r in summary.violations]
    assert summary.committed > 20


def test_the_checker_fails_a_consumer_that_reads_past_the_lso(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """read_uncommitted returns records of open transactions: the checker must notice."""
    monkeypatch.setattr(ReadCommittedConsumer, "isolation_level", 0)
    violation = run_txn_seed(0).violation
    assert violation is not None and violation.startswith("lso_never_passes_open_txn")


def test_cli_runs_the_transactional_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_cluster(["--workload", "transactions", "--seed", "0x1"]) == 0
    out = capsys.readouterr().out
    assert "seed=0x1 " in out and "violation=none" in out
    with pytest.raises(SystemExit):
        cli_cluster(["--workload", "transactions", "--seed", "1", "--reassign"])
