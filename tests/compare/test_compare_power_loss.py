"""The simulator's power-loss case of ``kraft compare``: deterministic, so its figures are
asserted exactly as the claim states them."""

from __future__ import annotations

from kraft.compare.losses import power_loss_sim


def test_a_correlated_power_loss_loses_acknowledged_isr_batches_and_no_fsynced_quorum_batch() -> (
    None
):
    isr = power_loss_sim(7, min_insync_replicas=2, correlated=True)
    quorum = power_loss_sim(7, mode="quorum", correlated=True)
    cached = power_loss_sim(7, mode="quorum", write_caching=True, correlated=True)
    assert isr["acked_batches_before_power_loss"] > 100
    assert isr["lost_acked_batches"] > 0  # acknowledged from the page cache, cut by the loss
    assert quorum["acked_batches_before_power_loss"] > 100
    assert quorum["lost_acked_batches"] == 0  # a majority fsynced before the acknowledgement
    assert cached["lost_acked_batches"] > 0  # quorum.write.caching: acknowledged before it


def test_the_last_isr_replica_standing_loses_what_it_acknowledged_alone() -> None:
    alone = power_loss_sim(7, min_insync_replicas=1)
    assert alone["acked_while_leader_alone"] > 0
    assert alone["lost_acked_batches"] >= alone["acked_while_leader_alone"]
