"""The broker and controller gauges, computed from a metadata image."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from kraft.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from kraft.metrics.kafka import (
    ACTIVE_BROKERS,
    ACTIVE_CONTROLLER,
    FENCED_BROKERS,
    GROUP_GAUGES,
    GROUP_LAG,
    GROUP_OFFSET,
    LEADER_COUNT,
    OFFLINE_PARTITIONS,
    PARTITION_COUNT,
    UNDER_MIN_ISR,
    UNDER_REPLICATED,
    broker_values,
    controller_values,
    group_values,
)
from kraft.metrics.registry import StateGauges


def _image() -> MetadataImage:
    partitions = {
        0: PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1),
        1: PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2), leader=1),  # under-replicated
        2: PartitionRegistration(replicas=(2, 1, 3), isr=(1,), leader=1),  # under min ISR too
        3: PartitionRegistration(replicas=(2, 3, 4), isr=(2,), leader=2),
        4: PartitionRegistration(replicas=(3, 4, 2), isr=(3,), leader=-1),  # offline
    }
    return MetadataImage(
        brokers={
            b: BrokerRegistration(broker_id=b, incarnation_id=str(b), broker_epoch=b, fenced=b == 4)
            for b in (1, 2, 3, 4)
        },
        topics_by_id={"id": TopicImage(name="t", topic_id="id", partitions=partitions)},
        topic_ids_by_name={"t": "id"},
    )


def test_a_broker_reports_what_it_leads_and_what_of_it_is_short() -> None:
    values = broker_values(_image(), 1, lambda topic: 2)
    assert values == {LEADER_COUNT: 3, UNDER_REPLICATED: 2, UNDER_MIN_ISR: 1, PARTITION_COUNT: 3}
    assert broker_values(_image(), 4, lambda topic: 2)[LEADER_COUNT] == 0


def test_only_the_active_controller_reports_the_cluster_counts() -> None:
    assert controller_values(_image(), active=False) == {ACTIVE_CONTROLLER: 0}
    values = controller_values(_image(), active=True)
    assert values[ACTIVE_CONTROLLER] == 1
    assert values[OFFLINE_PARTITIONS] == 1
    assert (values[FENCED_BROKERS], values[ACTIVE_BROKERS]) == (1, 3)


def test_a_partition_being_reassigned_is_under_replicated_only_if_its_original_set_is() -> None:
    """Kafka's OngoingReassignmentState: the replicas being added do not count yet."""
    moving = PartitionRegistration(
        replicas=(2, 3, 4, 1), isr=(1, 2, 3), leader=1, adding_replicas=(4,), removing_replicas=(1,)
    )
    short = PartitionRegistration(
        replicas=(2, 3, 4, 1), isr=(1, 2), leader=1, adding_replicas=(4,), removing_replicas=(1,)
    )
    image = MetadataImage(
        brokers=_image().brokers,
        topics_by_id={"id": TopicImage(name="t", topic_id="id", partitions={0: moving, 1: short})},
        topic_ids_by_name={"t": "id"},
    )
    assert broker_values(image, 1, lambda topic: 2)[UNDER_REPLICATED] == 1


def test_group_lag_is_the_high_watermark_minus_the_committed_offset_per_partition() -> None:
    committed = [("billing", "orders", 0, 40), ("billing", "orders", 1, 7), ("audit", "t", 0, 5)]
    high_watermarks = {("orders", 0): 100, ("orders", 1): 5}  # no replica of t-0 here
    values = group_values(committed, lambda t, p: high_watermarks.get((t, p)))
    assert values[GROUP_LAG] == {
        ("billing", "orders", "0"): 60,
        ("billing", "orders", "1"): 0,  # a follower's high watermark may trail a commit
    }
    assert values[GROUP_OFFSET] == {
        ("billing", "orders", "0"): 40,
        ("billing", "orders", "1"): 7,
        ("audit", "t", "0"): 5,
    }
    assert group_values([], lambda t, p: 0) == {GROUP_LAG: {}, GROUP_OFFSET: {}}


def test_group_lag_is_exported_with_kafka_exporters_name_and_labels() -> None:
    registry = CollectorRegistry()
    values = group_values([("billing", "orders", 3, 40)], lambda t, p: 52)
    registry.register(StateGauges(GROUP_GAUGES, lambda: values))
    text = generate_latest(registry).decode()
    assert 'kafka_consumergroup_lag{consumergroup="billing",partition="3",topic="orders"} 12.0' in (
        text
    )
    assert (
        'kafka_consumergroup_current_offset{consumergroup="billing",partition="3",topic="orders"}'
        " 40.0" in text
    )
