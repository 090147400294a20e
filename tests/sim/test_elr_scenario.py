"""KIP-966 in the broker simulation: ``kraft sim cluster --scenario last-replica-standing``.

The leader, alone in the ISR after its followers fell out one by one (the last one while the
ISR was below ``min.insync.replicas``, so the high watermark stopped), loses power and with it
every acknowledged record it never flushed (`replication.sim.scenarios`). What eligible leader
replicas change, exactly, and what these tests hold:

- at the moment the old leader is fenced, **with ELR** the follower that left the ISR last
  (which holds every committed record) is elected at once; **without ELR** the partition has
  no leader: its only ISR member is the dead leader;
- when the old leader comes back with its truncated log, **without ELR** it is re-elected and
  the acknowledged records are lost everywhere (the checker reports ``acked_never_lost``, or
  ``committed_identical`` when the first record it finds overwritten is a committed acks=1 one);
  **with ELR** it follows, and every acknowledged record is kept (the run is clean).
"""

from __future__ import annotations

from kraft.metadata import NO_LEADER
from replication.sim import cli_cluster, run_seed

SEEDS = range(4)


def test_with_elr_the_replica_that_left_last_leads_and_nothing_acknowledged_is_lost() -> None:
    for seed in SEEDS:
        result = run_seed(seed, partitions=1, scenario="last-replica-standing")
        assert result.violation is None, f"{result.violation} -- replay: {result.replay}"
        scenario = result.scenario_state
        assert scenario is not None and scenario.roles is not None, result.steps
        old_leader, cut_off, _ = scenario.roles
        assert scenario.fenced_state is not None, result.steps
        leader, isr, elr = scenario.fenced_state
        assert (leader, isr) == (cut_off, (cut_off,)), scenario.fenced_state
        assert old_leader in elr  # fenced, not yet known to have restarted uncleanly
        assert result.acked_all > 0 and result.recovery_ms is not None


def test_without_elr_the_stale_last_isr_member_is_re_elected_and_acknowledged_data_is_lost() -> (
    None
):
    for seed in SEEDS:
        result = run_seed(seed, partitions=1, scenario="last-replica-standing", elr=False)
        scenario = result.scenario_state
        assert scenario is not None and scenario.roles is not None, result.steps
        old_leader, _, _ = scenario.roles
        assert scenario.fenced_state == (NO_LEADER, (old_leader,), ()), scenario.fenced_state
        assert result.violation is not None, f"no loss -- replay: {result.replay}"
        # The first overwritten offset names the loss: an acknowledged acks=all batch, or a
        # committed acks=1 one (either way committed records are gone from every replica).
        assert result.violation.startswith(("acked_never_lost", "committed_identical"))
        assert "--no-elr" in result.replay and "--scenario last-replica-standing" in result.replay


def test_the_scenario_is_a_flag_of_kraft_sim_cluster() -> None:
    assert (
        cli_cluster(["--seed", "0", "--partitions", "1", "--scenario", "last-replica-standing"])
        == 0
    )
    args = ["--seed", "0", "--partitions", "1", "--scenario", "last-replica-standing", "--no-elr"]
    assert cli_cluster(args) == 1
