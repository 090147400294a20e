"""The simulator's transactional workload (issue 28): transactional producers commit and abort
through the transaction coordinator core while brokers crash, lose power and are cut off and
the coordinator fails over; read_committed consumers see exactly the committed records, and a
copier (KIP-447) copies a topic exactly once with its group's offsets committed in its
transactions."""

from __future__ import annotations

import pytest

from replication.sim import BrokerCluster, ClusterChecker, ClusterConfig, cli_cluster
from replication.sim.group_offsets import GroupOffsetsLog
from replication.sim.messages import AppendReq, ProduceResp
from replication.sim.txn import TXN_STATE
from replication.sim.txn_clients import ReadCommittedConsumer, produce_code
from replication.sim.txn_run import run_txn_seed, run_txn_seeds
from storage.control import build_marker_batch
from storage.errors import ErrorCode
from storage.records import build_batch, read_header


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
    # the copier (KIP-447) copied records and committed its group's offsets with them in
    # __consumer_offsets; some of its transactions aborted after their offset commit (those
    # offsets vanished), it crashed and rewound to the committed offsets, and the copies
    # agreed with the offsets in every seed (check_copies)
    assert sum(r.copies for r in results) > 100
    assert all(r.copier_committed > 0 for r in results)
    assert sum(r.offset_commits for r in results) > sum(r.copier_committed for r in results)
    assert sum(r.copier_aborted for r in results) > 3
    assert sum(r.copier_rewinds for r in results) > 10
    assert sum(r.copier_crashes for r in results) > 0


def test_quorum_partitions_run_the_transactional_workload_too() -> None:
    summary = run_txn_seeds(0, 2, mode="quorum")
    assert not summary.violations, [r.line() for r in summary.violations]
    assert summary.committed > 20
    assert summary.copies > 0 and summary.offset_commits > 0


def test_the_checker_fails_offsets_made_visible_before_their_marker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group coordinator that applies a TxnOffsetCommit at once, not on its transaction's
    commit marker: the copier rewinds to the offsets of an aborted transaction and skips
    records it never copied. The checker must notice."""
    replay = GroupOffsetsLog.replay

    def eager(self: GroupOffsetsLog, batch: bytes) -> None:
        replay(self, batch)
        header = read_header(batch)
        if header.is_transactional and not header.is_control:
            replay(
                self,
                build_marker_batch(
                    commit=True,
                    producer_id=header.producer_id,
                    producer_epoch=header.producer_epoch,
                    coordinator_epoch=0,
                    timestamp_ms=0,
                ),
            )

    monkeypatch.setattr(GroupOffsetsLog, "replay", eager)
    violation = run_txn_seed(0).violation
    assert violation is not None and violation.startswith("offsets_not_atomic"), violation


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


def test_a_coordinator_that_loaded_fences_the_appends_of_its_earlier_incarnations() -> None:
    """The simulated coordinator is a node of its own: an append it sent before a failover may
    still be on its way when the next incarnation loads the partition from the leader. The
    load fences it there (ISR seed 0xd4 decided a transaction abort, then commit, without)."""
    cluster = BrokerCluster(seed=1, config=ClusterConfig(), checker=ClusterChecker())
    answers: list[object] = []
    cluster.clients[999] = lambda envelope: answers.append(envelope.payload)
    requests = cluster.brokers[1].requests
    requests.fence(TXN_STATE, 3)
    batch = build_batch([b"x"], timestamp_ms=0)
    requests.handle(999, AppendReq(TXN_STATE, batch, 7, 100, coordinator_epoch=2))
    cluster.scheduler.run_until(20)
    (answer,) = [a for a in answers if isinstance(a, ProduceResp) and a.rpc == 7]
    assert produce_code(answer) is ErrorCode.NOT_COORDINATOR
    requests.handle(999, AppendReq(TXN_STATE, batch, 8, 100, coordinator_epoch=3))
    cluster.scheduler.run_until(40)
    (answer,) = [a for a in answers if isinstance(a, ProduceResp) and a.rpc == 8]
    assert produce_code(answer) is ErrorCode.NOT_LEADER_OR_FOLLOWER  # not fenced: not leading
