"""The consumer-group simulation: a share of the clean seeds, exact replay, and checkers that
fail when the coordinator or the members break the rules."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from kraft.sim.checker import InvariantViolated
from replication.group import (
    GroupConfig,
    GroupCoordinator,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    PartitionResult,
    Result,
)
from replication.group import coordinator as coordinator_module
from replication.groupsim import GroupChecker, SimMember, cli_group, run_seed, run_seeds
from replication.groupsim.data import DataTopics

SEEDS = 16
"""A share of the 300+ seeds ``kraft sim group --seeds 300`` runs clean (~1 s per seed)."""


def test_a_share_of_the_seeds_is_clean_and_exercises_the_faults() -> None:
    summary = run_seeds(1000, SEEDS, stop_on_violation=False)
    bad = [f"{r.violation} -- replay: {r.replay}" for r in summary.violations]
    assert not bad, "\n".join(bad)
    assert summary.seeds_run == SEEDS
    assert summary.coordinator_crashes >= SEEDS
    assert summary.processed > 500 * SEEDS


def test_a_seed_replays_exactly() -> None:
    a, b = run_seed(0x2A), run_seed(0x2A)
    assert a == b and a.violation is None, a.line()
    assert a.incarnations > a.slots and a.commits > 0 and a.drain_ms is not None


def test_the_command_line_runs_a_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_group(["--seed", "3"]) == 0
    assert "seed=0x3" in capsys.readouterr().out


def _first_violation(seeds: range) -> str | None:
    for seed in seeds:
        v = run_seed(seed).violation
        if v is not None:
            return v
    return None


@pytest.fixture
def unsafe_reconcile(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A coordinator that hands a partition over before its old owner revoked it."""
    from replication.group.reconciliation import reconcile as real

    def eager(current, target_epoch, target, held_by_others, owned):  # type: ignore[no-untyped-def]
        return real(current, target_epoch, target, {}, ())

    monkeypatch.setattr(coordinator_module, "reconcile", eager)
    yield


def test_the_ownership_checker_catches_handing_over_before_revocation(
    unsafe_reconcile: None,
) -> None:
    v = _first_violation(range(10))
    assert v is not None and v.startswith("exclusive_ownership"), v


def test_the_ownership_checker_catches_members_that_ignore_their_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_lease(self: SimMember, now_ms: int) -> set[tuple[str, int]]:
        return set(self.owned) if self.alive else set()

    monkeypatch.setattr(SimMember, "view", no_lease)
    v = _first_violation(range(20))
    assert v is not None and v.startswith("exclusive_ownership"), v


def test_the_fencing_checker_catches_a_coordinator_that_accepts_old_epochs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = GroupCoordinator.commit_offsets

    def lax(
        self: GroupCoordinator, req: OffsetCommitRequest, now_ms: int
    ) -> Result[OffsetCommitResponse]:
        group = self.groups().get(req.group_id)
        member = None if group is None else group.members.get(req.member_id)
        if member is not None:
            req = dataclasses.replace(req, member_epoch=member.member_epoch)
        return real(self, req, now_ms)

    monkeypatch.setattr(GroupCoordinator, "commit_offsets", lax)
    v = _first_violation(range(40))
    assert v is not None and v.split(":")[0] in {
        "fenced_commit_rejected",
        "committed_never_back",
    }, v


def _commit(checker: GroupChecker, member: str, epoch: int, offset: int) -> None:
    req = OffsetCommitRequest(
        group_id="g",
        member_id=member,
        member_epoch=epoch,
        partitions=(OffsetCommitPartition(topic="t", partition=0, offset=offset),),
    )
    ok = OffsetCommitResponse(partitions=(PartitionResult(topic="t", partition=0),))
    checker.on_replayed(GroupCoordinator(GroupConfig()), req, ok)


def test_the_offset_checkers_catch_a_commit_going_back_or_past_unprocessed_records() -> None:
    data = DataTopics()
    data.create("t", 1)
    data.produce(("t-id", 0), 10)
    checker = GroupChecker("g", data)
    with pytest.raises(InvariantViolated, match="at_least_once"):
        _commit(checker, "m", 1, 3)  # nothing was processed yet
    checker = GroupChecker("g", data)
    member = SimMember.__new__(SimMember)
    member.alive, member.owned = True, {("t-id", 0)}
    member._lease_send_ms, member._session_timeout_ms = 0, 10**9
    member._revoke_deadline_ms, member.member_id = None, "m"
    checker.on_processed(member, ("t-id", 0), 0, 5)
    _commit(checker, "m", 1, 5)
    with pytest.raises(InvariantViolated, match="committed_never_back"):
        _commit(checker, "m", 1, 4)
    _commit(checker, "", -1, 0)  # an admin reset may go back
    assert checker.committed[("t", 0)] == 0


def test_a_member_that_leaves_with_a_heartbeat_in_flight_does_not_retake_partitions() -> None:
    """Seed 0x73: the member began leaving while a heartbeat that revoked some partitions was
    in flight; the late response made it take back its kept partitions after it had dropped
    them, and it owned them together with their next owner."""
    r = run_seed(0x73)
    assert r.violation is None, r.line()
