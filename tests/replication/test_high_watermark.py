"""Table tests of the math-only helpers: follower progress and the high-watermark candidate."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from replication.core import (
    NEVER_MS,
    ReplicaState,
    ReplicationConfig,
    effective_min_isr,
    high_watermark_candidate,
)
from storage.errors import InvalidConfigError

LAG = 100


@pytest.mark.parametrize(
    ("fetch_offset", "leader_leo", "previous_leader_leo", "expected_caught_up_ms"),
    [
        (10, 10, 0, 1_000),  # reached the leader's LEO now: caught up now
        (12, 10, 0, 1_000),  # (cannot exceed it, but >= counts)
        (8, 10, 8, 900),  # reached the LEO as of the previous fetch: caught up then
        (8, 10, 9, 500),  # reached neither: unchanged
    ],
)
def test_last_caught_up_time_follows_kafka_update_fetch_state(
    fetch_offset: int, leader_leo: int, previous_leader_leo: int, expected_caught_up_ms: int
) -> None:
    """Kafka's ``Replica.updateFetchState``: lastCaughtUpTimeMs is the fetch time if the fetch
    reached the leader's LEO, else the previous fetch's time if it reached the LEO as of the
    previous fetch."""
    before = ReplicaState(
        log_end_offset=5,
        last_fetch_leader_log_end_offset=previous_leader_leo,
        last_fetch_time_ms=900,
        last_caught_up_time_ms=500,
    )
    after = before.update_fetch_state(
        fetch_offset=fetch_offset,
        log_start_offset=0,
        fetch_time_ms=1_000,
        leader_log_end_offset=leader_leo,
        broker_epoch=3,
    )
    assert after.last_caught_up_time_ms == expected_caught_up_ms
    assert (after.log_end_offset, after.last_fetch_time_ms) == (fetch_offset, 1_000)
    assert (after.last_fetch_leader_log_end_offset, after.broker_epoch) == (leader_leo, 3)


@pytest.mark.parametrize(
    ("leo", "leader_leo", "caught_up_ms", "now_ms", "expected"),
    [
        (10, 10, NEVER_MS, 10**6, True),  # at the leader's LEO: always caught up
        (9, 10, 1_000, 1_000 + LAG, True),  # within the lag
        (9, 10, 1_000, 1_001 + LAG, False),
        (-1, 0, NEVER_MS, 0, False),  # unknown LEO, never caught up
    ],
)
def test_is_caught_up(
    leo: int, leader_leo: int, caught_up_ms: int, now_ms: int, expected: bool
) -> None:
    state = ReplicaState(log_end_offset=leo, last_caught_up_time_ms=caught_up_ms)
    assert state.is_caught_up(leader_leo, now_ms, LAG) is expected


def test_reset_gives_isr_members_a_fresh_lag_window_and_others_none() -> None:
    state = ReplicaState(log_end_offset=7, broker_epoch=3)
    in_sync = state.reset(now_ms=50, leader_log_end_offset=9, is_new_leader=False, in_sync=True)
    assert (in_sync.last_caught_up_time_ms, in_sync.log_end_offset) == (50, 7)
    out = state.reset(now_ms=50, leader_log_end_offset=9, is_new_leader=True, in_sync=False)
    assert (out.last_caught_up_time_ms, out.log_end_offset, out.broker_epoch) == (
        NEVER_MS,
        -1,
        None,
    )


def _candidate(
    followers: dict[int, ReplicaState],
    *,
    maximal_isr: set[int],
    isr_size: int | None = None,
    min_isr: int = 1,
    eligible: bool = True,
) -> int | None:
    return high_watermark_candidate(
        leader_log_end_offset=10,
        followers=followers,
        maximal_isr=maximal_isr,
        isr_size=len(maximal_isr) if isr_size is None else isr_size,
        min_isr=min_isr,
        now_ms=1_000,
        replica_lag_time_ms_max=LAG,
        is_isr_eligible=lambda _r: eligible,
    )


def _at(leo: int, caught_up_ms: int = NEVER_MS) -> ReplicaState:
    return ReplicaState(log_end_offset=leo, last_caught_up_time_ms=caught_up_ms)


def test_candidate_is_the_minimum_log_end_over_leader_and_maximal_isr() -> None:
    assert _candidate({2: _at(7), 3: _at(9)}, maximal_isr={1, 2, 3}) == 7
    assert _candidate({2: _at(7), 3: _at(9)}, maximal_isr={1, 3}) == 9
    assert _candidate({}, maximal_isr={1}) == 10


def test_candidate_waits_for_a_caught_up_eligible_follower_outside_the_isr() -> None:
    followers = {2: _at(6, caught_up_ms=950)}
    assert _candidate(followers, maximal_isr={1}) == 6
    assert _candidate(followers, maximal_isr={1}, eligible=False) == 10
    assert _candidate({2: _at(6, caught_up_ms=800)}, maximal_isr={1}) == 10


def test_candidate_is_none_while_the_committed_isr_is_below_min() -> None:
    assert _candidate({2: _at(10)}, maximal_isr={1, 2}, isr_size=1, min_isr=2) is None
    assert _candidate({2: _at(10)}, maximal_isr={1, 2}, isr_size=2, min_isr=2) == 10


def test_unknown_follower_log_end_holds_the_candidate_below_zero() -> None:
    assert _candidate({2: ReplicaState()}, maximal_isr={1, 2}) == -1


@pytest.mark.parametrize(("configured", "replicas", "effective"), [(2, 3, 2), (3, 2, 2), (1, 1, 1)])
def test_effective_min_isr_is_capped_at_the_replication_factor(
    configured: int, replicas: int, effective: int
) -> None:
    assert effective_min_isr(configured, replicas) == effective


def test_config_reads_kafka_keys_and_rejects_bad_values() -> None:
    config = ReplicationConfig.from_properties(
        {"min.insync.replicas": "2", "replica.lag.time.max.ms": "500", "other": "x"}
    )
    assert (config.min_insync_replicas, config.replica_lag_time_ms_max) == (2, 500)
    assert ReplicationConfig.from_properties(config.to_properties()) == config
    with pytest.raises(InvalidConfigError):
        ReplicationConfig(min_insync_replicas=0)
    with pytest.raises(InvalidConfigError):
        ReplicationConfig.from_properties({"replica.lag.time.max.ms": "soon"})


FORBIDDEN = {"grpc", "asyncio", "time", "os", "rocksdict", "socket", "threading", "random"}


def test_core_modules_import_no_io_clock_or_randomness() -> None:
    """The pure-core rule (STYLE §1), for replication/core until tests/test_contract.py lists
    it with the other core directories."""
    root = Path(__file__).resolve().parents[2] / "replication" / "core"
    bad = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            bad += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert not bad, bad
