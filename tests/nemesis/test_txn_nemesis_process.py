"""`kraft nemesis --workload txn` on real processes: confluent-kafka's transactional producers,
read_committed readers and a consume-transform-produce copier through a broker kill, judged
by the transactional checker."""

from __future__ import annotations

from pathlib import Path

import pytest

from replication.nemesis.run import NemesisConfig, run_nemesis

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]


def test_transactions_through_a_broker_kill_are_valid(tmp_path: Path) -> None:
    # Seed 1 draws one kill (broker 102, 3.0-7.8 s) in 10 s; longer runs and the other
    # fault kinds are `kraft nemesis --workload txn` commands (docs/guarantees.md).
    result = run_nemesis(
        NemesisConfig(seed=1, duration_s=10, faults=("kill",), workload="txn", out=tmp_path)
    )
    assert [(f.kind, f.error) for f in result.faults] == [("kill", "")]
    txn = result.txn
    assert txn.valid, (txn.violations(), {n: getattr(txn, n).examples[:3] for n in txn.VIOLATIONS})
    assert result.valid, (result.report.violations(), result.replica_problems)
    assert txn.committed > 0 and txn.aborted > 0, txn
    assert txn.final_records > 0
    assert txn.copies > 0, txn  # the copier committed copies with its offsets, exactly once
    # The contrast: aborted records did reach the log (the read_uncommitted reader saw some),
    # so the read_committed side had something to leave out.
    assert txn.uncommitted_seen > 0, txn
