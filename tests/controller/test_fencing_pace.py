"""Fencing a broker that leads many partitions is paced: bounded batches, leaderships first.

Measured before (``kraft bench metadata --partitions 10000``): fencing one broker of an RF-3
cluster wrote ~10,000 records in one batch, and deciding, encoding and replaying it held the
active controller's event loop for 8-12 s; the quorum lost its leader, the batch was dropped,
and the next controller fenced again: a loop of elections.
"""

from __future__ import annotations

from kraft.controller import CreatableTopic, CreateTopicsRequest
from kraft.controller.cluster_control import PARTITION_CHANGES_PER_BATCH
from kraft.metadata import NO_LEADER, BrokerRegistrationChangeRecord, PartitionChangeRecord
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness


def _cluster(partitions: int, *, rf: int, brokers: tuple[int, ...]) -> ControllerHarness:
    h = ControllerHarness()
    h.start_brokers(*brokers)
    response = h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(
            topics=(CreatableTopic(name="t", num_partitions=partitions, replication_factor=rf),)
        ),
    )
    assert response.topics[0].error_code is ErrorCode.NONE
    return h


def _fence_steps(h: ControllerHarness, victim: int, now_ms: int) -> list[tuple[object, ...]]:
    """Tick until ``victim`` is fenced; every batch, committed as it is produced."""
    batches: list[tuple[object, ...]] = []
    while not h.image.brokers[victim].fenced:
        assert len(batches) < 100, "the fencing does not end"
        batches.append(h.tick(now_ms))
    return batches


def test_a_broker_in_every_isr_is_fenced_in_bounded_batches_its_leaderships_first() -> None:
    h = _cluster(2 * PARTITION_CHANGES_PER_BATCH + 200, rf=3, brokers=(1, 2, 3))
    victim = 1
    led = {i for i, p in h.image.topic("t").partitions.items() if p.leader == victim}  # type: ignore[union-attr]
    assert led
    h.now_ms = 2_000
    h.heartbeat(2)
    h.heartbeat(3)
    batches = _fence_steps(h, victim, 3_500)
    assert len(batches) == 3
    assert all(len(b) <= PARTITION_CHANGES_PER_BATCH + 1 for b in batches)
    # the fence record only in the last batch, with the last changes (one atomic batch)
    fences = [r for b in batches for r in b if isinstance(r, BrokerRegistrationChangeRecord)]
    assert len(fences) == 1 and fences[0] in batches[-1]
    # every partition it led got a new leader before any ISR-only change
    changes = [r for b in batches for r in b if isinstance(r, PartitionChangeRecord)]
    first = [r.partition for r in changes[: len(led)]]
    assert set(first) == led and all(r.leader not in (None, NO_LEADER) for r in changes[: len(led)])
    for p in h.image.topic("t").partitions.values():  # type: ignore[union-attr]
        assert victim not in p.isr and p.leader not in (victim, NO_LEADER)


def test_a_broker_being_fenced_is_not_elected_again_between_the_steps() -> None:
    """Its sole-ISR partitions lose their leader in the first step; the same tick's offline
    election must not give them back to it (it is still unfenced until the last step)."""
    h = _cluster(PARTITION_CHANGES_PER_BATCH + 100, rf=1, brokers=(1,))
    first = h.tick(3_500)
    assert not any(isinstance(r, BrokerRegistrationChangeRecord) for r in first)
    assert not h.image.brokers[1].fenced
    leaderless = [p for p in h.image.topic("t").partitions.values() if p.leader == NO_LEADER]  # type: ignore[union-attr]
    assert len(leaderless) == PARTITION_CHANGES_PER_BATCH
    _fence_steps(h, 1, 3_500)
    assert all(p.leader == NO_LEADER for p in h.image.topic("t").partitions.values())  # type: ignore[union-attr]


def test_unfencing_elects_the_offline_partitions_in_bounded_batches_then_every_one() -> None:
    """Before: the unfence batch held every election it enabled (6,500 records in one batch
    in the 10,000-partition bench)."""
    h = _cluster(PARTITION_CHANGES_PER_BATCH + 100, rf=1, brokers=(1,))
    _fence_steps(h, 1, 3_500)
    h.now_ms = 4_000
    response = h.heartbeat(1)
    assert not response.is_fenced
    leaderless = [p for p in h.image.topic("t").partitions.values() if p.leader == NO_LEADER]  # type: ignore[union-attr]
    assert len(leaderless) == 100, "the first batch elected the bound, no more"
    deadline = h.core.next_deadline_ms()
    assert deadline is not None and deadline <= h.now_ms, "a tick elects the rest at once"
    batch = h.tick(h.now_ms)
    assert 0 < len(batch) <= PARTITION_CHANGES_PER_BATCH
    assert all(p.leader == 1 for p in h.image.topic("t").partitions.values())  # type: ignore[union-attr]
