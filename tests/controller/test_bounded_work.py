"""The active controller's routine work is bounded by what changed, not by the partition count.

Measured before (py-spy of the active controller in ``kraft bench metadata --partitions
10000``): every tick walked every partition for leaderless ones (`elect_offline_leaders`,
~6-9 ms a call, the controller's largest consumer), every heartbeat walked every partition for
offline replicas (~6 ms), and a controlled shutdown or a restarted broker's registration wrote
all of the broker's ~10,000 partition changes in one batch. The counters here are partitions
*walked* (a partition map iterated) and records per batch, not wall time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kraft.controller import (
    BrokerHeartbeatRequest,
    CreatableTopic,
    CreateTopicsRequest,
    RegisterBrokerRequest,
)
from kraft.controller.cluster_control import PARTITION_CHANGES_PER_BATCH
from kraft.metadata import NO_LEADER, BrokerRegistrationChangeRecord, MetadataImage
from kraft.metadata.image import PartitionRegistration, TopicImage
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness

PARTITIONS = 3 * PARTITION_CHANGES_PER_BATCH


class _Walks:
    count = 0


class _CountingPartitions(Mapping[int, PartitionRegistration]):
    """A topic's partition map that counts the partitions walked (point lookups are free)."""

    def __init__(self, inner: Mapping[int, PartitionRegistration]) -> None:
        self._inner = dict(inner)

    def __getitem__(self, key: int) -> PartitionRegistration:
        return self._inner[key]

    def __contains__(self, key: object) -> bool:
        return key in self._inner

    def __iter__(self) -> Iterator[int]:
        _Walks.count += len(self._inner)
        return iter(self._inner)

    def __len__(self) -> int:
        return len(self._inner)


def _cluster(rf: int = 3, brokers: tuple[int, ...] = (1, 2, 3)) -> ControllerHarness:
    h = ControllerHarness()
    h.start_brokers(*brokers)
    response = h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(
            topics=(CreatableTopic(name="t", num_partitions=PARTITIONS, replication_factor=rf),)
        ),
    )
    assert response.topics[0].error_code is ErrorCode.NONE
    return h


def _counting(h: ControllerHarness) -> ControllerHarness:
    """The same controller, on an image whose partition maps count walks."""
    image = h.image
    topics = {
        tid: TopicImage(name=t.name, topic_id=tid, partitions=_CountingPartitions(t.partitions))
        for tid, t in image.topics_by_id.items()
    }
    counted = MetadataImage(
        brokers=image.brokers,
        topics_by_id=topics,
        topic_ids_by_name=image.topic_ids_by_name,
        configs=image.configs,
        next_producer_id=image.next_producer_id,
        last_offset=image.last_offset,
        last_epoch=image.last_epoch,
        index=image.partition_index,
    )
    out = ControllerHarness(counted, now_ms=h.now_ms, epoch=h.epoch + 1)
    for b in image.unfenced_broker_ids():
        out.heartbeat(b)
    _Walks.count = 0
    return out


def test_a_tick_and_a_heartbeat_with_nothing_to_do_walk_no_partition() -> None:
    h = _counting(_cluster())
    h.core._tick_wanted_at_ms = h.now_ms  # as after any request that wrote records
    assert h.tick(h.now_ms) == ()
    response = h.heartbeat(1)
    assert response.error_code is ErrorCode.NONE
    assert _Walks.count == 0, f"{_Walks.count} partitions walked"


def test_a_tick_electing_offline_leaders_visits_the_leaderless_partitions_only() -> None:
    h = _cluster(rf=1, brokers=(1, 2))
    # broker 2 fenced: its partitions (RF 1) are leaderless; broker 1's are not visited
    h.now_ms = 2_000
    h.heartbeat(1)
    while not h.image.brokers[2].fenced:
        h.tick(3_500)
    leaderless = len(h.image.partition_index.leaderless())
    assert 0 < leaderless < PARTITIONS
    h = _counting(h)
    h.core._tick_wanted_at_ms = h.now_ms
    assert h.tick(h.now_ms) == ()  # nothing electable (their only replica is fenced)
    assert _Walks.count == 0


def test_a_controlled_shutdown_moves_leaderships_and_isr_memberships_in_bounded_batches() -> None:
    """Before: the first heartbeat asking to shut down wrote every change in one batch."""
    h = _cluster()
    victim = 1
    assert h.image.partition_index.led_by(victim)
    batches: list[tuple[object, ...]] = []
    shut_down = False
    for _ in range(50):
        result = h.propose(h.core.handle_broker_heartbeat_request, _hb(h, victim))
        h.commit()
        batches.append(result.records)
        if result.response.should_shut_down:
            shut_down = True
            break
        batches.append(h.tick(h.now_ms))  # the ticks between heartbeats take steps too
    assert shut_down, "the controlled shutdown did not end"
    assert all(len(b) <= PARTITION_CHANGES_PER_BATCH + 1 for b in batches)
    # it was in all 1,500 ISRs: three full steps at least
    assert sum(len(b) >= PARTITION_CHANGES_PER_BATCH for b in batches) >= 3
    index = h.image.partition_index
    assert not index.led_by(victim) and not index.in_isr_of(victim)
    assert h.image.brokers[victim].fenced
    assert not index.leaderless()


def test_a_restarted_broker_registers_once_the_paced_fencing_of_its_old_incarnation_is_done() -> (
    None
):
    """Before: the registration removed every remaining ISR membership in its own batch."""
    h = _cluster()
    h.now_ms = 2_000
    h.heartbeat(2)
    h.heartbeat(3)
    first = h.tick(3_500)  # the session of broker 1 expired: one step of its fencing
    assert first and not any(isinstance(r, BrokerRegistrationChangeRecord) for r in first)
    request = RegisterBrokerRequest(broker_id=1, incarnation_id="new-incarnation")
    refused = h.run(h.core.handle_register_broker_request, request)
    assert refused.error_code is ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert "being fenced" in (refused.error_message or "")
    for _ in range(50):
        if h.image.brokers[1].fenced:
            break
        h.tick(3_500)
    result = h.propose(h.core.handle_register_broker_request, request)
    h.commit()
    assert result.response.error_code is ErrorCode.NONE
    assert len(result.records) <= PARTITION_CHANGES_PER_BATCH + 1
    assert all(p.leader != NO_LEADER for p in h.image.topic("t").partitions.values())  # type: ignore[union-attr]


def _hb(h: ControllerHarness, broker_id: int) -> BrokerHeartbeatRequest:
    """A heartbeat of ``broker_id`` that asks to shut down."""
    return BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=h.core.pending_image.brokers[broker_id].broker_epoch,
        current_metadata_offset=h.image.last_offset,
        want_shutdown=True,
    )
