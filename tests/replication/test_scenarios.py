"""KIP-101's two failure scenarios and KIP-279's fast double failover, replayed on the cores.

Each scenario runs twice: with leader-epoch truncation (the replicas end identical, and no
acknowledged record is lost where KIP-101 promises it) and with the pre-KIP-101
``HIGH_WATERMARK`` truncation (the same steps lose or diverge data).

Reference: KIP-101 "Alter Replication Protocol to use Leader Epoch rather than High Watermark
for Truncation" (scenarios 1 and 2); KIP-279 "Fix log divergence between leader and follower
after fast leader fail over".
"""

from __future__ import annotations

import pytest

from replication.core import ReplicationConfig, TruncationStrategy
from storage.errors import ErrorCode
from tests.replication.harness import Cluster, batch

A, B = 1, 2
LEADER_EPOCH = TruncationStrategy.LEADER_EPOCH
HIGH_WATERMARK = TruncationStrategy.HIGH_WATERMARK


def _kip101_scenario_1(strategy: TruncationStrategy) -> Cluster:
    """A leads, B follows; m2 is committed (A's HW = 2) but B's HW is still 1. B restarts;
    then A dies before B refetches, B becomes leader, A comes back as its follower."""
    c = Cluster((A, B), strategy=strategy)
    c.elect(A, isr=(A, B))
    first = c.produce(batch(b"m1"))
    c.replicate(rounds=3)  # B has m1 and HW 1
    second = c.produce(batch(b"m2"))
    c.replicate(rounds=2)  # B has m2; A's HW is 2, B learns it only on its next fetch
    assert c.completions[first].error_code is ErrorCode.NONE
    assert c.completions[second].error_code is ErrorCode.NONE  # acks=all: m2 is committed
    assert (c.replicas[A].high_watermark, c.replicas[B].high_watermark) == (2, 1)
    c.flush()
    c.crash(B)
    c.restart(B)  # B follows A again: HIGH_WATERMARK truncates it to its HW (1) here
    c.crash(A)
    c.elect(B, isr=(B,))
    c.restart(A)
    c.replicate(rounds=3)
    return c


def test_kip101_scenario_1_leader_epoch_truncation_keeps_the_committed_record() -> None:
    """KIP-101 scenario 1: "High Watermark Truncation followed by Immediate Leader Election".
    With leader epochs the restarted follower does not truncate to its HW, so the committed m2
    survives the failover on both replicas."""
    c = _kip101_scenario_1(LEADER_EPOCH)
    assert c.log(A).values() == c.log(B).values() == [b"m1", b"m2"]
    assert c.log(A).entries() == c.log(B).entries()


def test_kip101_scenario_1_high_watermark_truncation_loses_the_committed_record() -> None:
    """The old protocol: B truncates m2 away on restart, becomes leader, and A, which had m2
    committed, truncates it too: an acks=all record is gone from every replica."""
    c = _kip101_scenario_1(HIGH_WATERMARK)
    assert c.log(A).values() == c.log(B).values() == [b"m1"]


def _kip101_scenario_2(strategy: TruncationStrategy) -> Cluster:
    """A leads with m1, m2 flushed and HW 2; B had m2 only in its page cache. Both lose
    power; B restarts first, becomes leader and takes m3 at offset 1; A comes back."""
    c = Cluster((A, B), strategy=strategy)
    c.elect(A, isr=(A, B))
    c.produce(batch(b"m1"))
    c.replicate(rounds=3)
    c.flush()
    c.produce(batch(b"m2"))
    c.replicate(rounds=3)
    c.flush(A)  # B's copy of m2 is not flushed
    assert c.replicas[A].high_watermark == 2
    c.crash(A)
    c.crash(B)
    assert c.log(B).values() == [b"m1"]
    c.restart(B)
    c.elect(B, isr=(B,))
    c.produce(batch(b"m3"), acks=1)
    c.restart(A)
    c.replicate(rounds=3)
    return c


def test_kip101_scenario_2_leader_epoch_truncation_converges() -> None:
    """KIP-101 scenario 2: "Replica Divergence on Restart after Multiple Hard Failures". A
    fetches with (offset 2, epoch 1); B answers that epoch 1 ended at 1; A truncates m2 and
    takes m3: the replicas agree at every offset."""
    c = _kip101_scenario_2(LEADER_EPOCH)
    assert c.log(A).entries() == c.log(B).entries()
    assert c.log(A).values() == [b"m1", b"m3"]


def test_kip101_scenario_2_high_watermark_truncation_diverges() -> None:
    """The old protocol: A truncates to its HW (2), keeps m2 at offset 1, and fetches from 2:
    the replicas hold different records at offset 1 for ever."""
    c = _kip101_scenario_2(HIGH_WATERMARK)
    assert c.log(A).values() == [b"m1", b"m2"]
    assert c.log(B).values() == [b"m1", b"m3"]


def _kip279_fast_double_failover(strategy: TruncationStrategy) -> Cluster:
    """Epoch 1: A writes m0 (replicated) and m1, m2 (not replicated: B is cut off). Epoch 2:
    B leads alone and writes m3 at offset 1, then dies at once. Epoch 3: A leads (an unclean
    election, one of the cases KIP-279 covers) and writes m4. B comes back as A's follower,
    its last epoch (2) unknown to A."""
    c = Cluster((A, B), config=ReplicationConfig(min_insync_replicas=1), strategy=strategy)
    c.elect(A, isr=(A, B))
    c.produce(batch(b"m0"))
    c.replicate(rounds=3)
    c.produce(batch(b"m1"), acks=1)
    c.produce(batch(b"m2"), acks=1)
    c.flush()
    c.crash(A)
    c.elect(B, isr=(B,))
    c.produce(batch(b"m3"), acks=1)
    c.flush()
    c.crash(B)
    c.elect(A, isr=(A,))
    c.restart(A)  # straight into leadership: its log is as A left it
    c.produce(batch(b"m4"), acks=1)
    c.restart(B)
    c.replicate(rounds=4)
    return c


def test_kip279_fast_double_failover_leader_epoch_truncation_converges() -> None:
    """B fetches with (offset 2, epoch 2). A has no epoch 2 and answers with its largest epoch
    below, (1, 3). B's own epoch 1 ended at 1, so it truncates to min(3, 1) = 1 (KIP-279), not
    to 3 (the leader's offset alone, which would keep m3 under A's m1)."""
    c = _kip279_fast_double_failover(LEADER_EPOCH)
    assert c.log(A).entries() == c.log(B).entries()
    assert c.log(B).values() == [b"m0", b"m1", b"m2", b"m4"]


def test_kip279_fast_double_failover_high_watermark_truncation_diverges() -> None:
    """The old protocol: B's HW (2) covers its epoch-2 record m3, so it keeps it and appends
    A's records after it: offset 1 holds m3 on B and m1 on A."""
    c = _kip279_fast_double_failover(HIGH_WATERMARK)
    assert c.log(A).values() == [b"m0", b"m1", b"m2", b"m4"]
    assert c.log(B).values() == [b"m0", b"m3", b"m2", b"m4"]


@pytest.mark.parametrize("strategy", [LEADER_EPOCH, HIGH_WATERMARK])
def test_scenarios_leave_a_follower_high_watermark_within_its_log(
    strategy: TruncationStrategy,
) -> None:
    for scenario in (_kip101_scenario_1, _kip101_scenario_2, _kip279_fast_double_failover):
        c = scenario(strategy)
        for replica in c.replicas.values():
            assert replica.high_watermark <= replica.log.log_end_offset
