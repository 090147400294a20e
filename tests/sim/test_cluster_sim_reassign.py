"""The broker simulation with an operator moving partitions (KIP-455) while the nemesis runs:
every invariant holds, and the checkers catch a controller that drops the old replicas before
the new ones are in sync."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kraft.controller import reassignment
from kraft.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from replication.sim import run_seed

SEEDS = 3


def test_moving_partitions_during_faults_holds_every_invariant() -> None:
    results = [run_seed(s, brokers=5, reassign=True) for s in range(SEEDS)]
    assert all(r.violation is None for r in results), [r.line() for r in results]
    assert sum(r.reassignments for r in results) >= 3 * SEEDS, [r.line() for r in results]
    assert sum(r.replicas_removed for r in results) >= SEEDS, [r.line() for r in results]


def test_completing_before_the_new_replicas_are_in_sync_loses_acknowledged_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The KIP-455 rule that matters: the old replicas go only once every target replica is in
    the ISR. A controller that counts the new replicas as in sync at once (an ISR of replicas
    that have nothing) makes the checker fail."""
    completed = reassignment._completed

    def eager(
        image: MetadataImage, topic: TopicImage, index: int, partition: PartitionRegistration
    ) -> PartitionRegistration | None:
        isr = tuple(dict.fromkeys((*partition.isr, *partition.target_replicas)))
        return completed(image, topic, index, replace(partition, isr=isr))

    monkeypatch.setattr(reassignment, "_completed", eager)
    # NB: seed 0 fails today; the generator stops at the first failing seed.
    failing = next((s for s in range(6) if run_seed(s, brokers=5, reassign=True).violation), None)
    assert failing is not None, "six seeds of eager completions lost nothing"
