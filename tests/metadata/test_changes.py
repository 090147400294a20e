"""`changed_partitions`: what a broker acts on after a batch (Kafka's ``localChanges``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kraft.metadata import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    MetadataImage,
    PartitionChangeRecord,
    TopicRecord,
)
from kraft.metadata.changes import changed_partitions
from kraft.metadata.image import PartitionRegistration, TopicImage
from tests.metadata.builders import ImageBuilder, topic_id_for


def _image() -> MetadataImage:
    return (
        ImageBuilder()
        .with_brokers(1, 2, 3)
        .with_topic("a", partitions=50, rf=3)
        .with_topic("b", partitions=50, rf=3)
        .build()
    )


def _isr_change(image: MetadataImage, topic: str, partition: int) -> MetadataImage:
    current = image.partition(topic_id_for(topic), partition)
    assert current is not None
    isr = tuple(r for r in current.isr if r != current.replicas[-1])
    record = PartitionChangeRecord(topic_id=topic_id_for(topic), partition=partition, isr=isr)
    return image.apply(record, image.last_offset + 1)


class _Untouchable(Mapping[int, PartitionRegistration]):
    """A partition map that fails the test if anything reads it."""

    def __getitem__(self, key: int) -> PartitionRegistration:
        raise AssertionError("an untouched topic's partitions were read")

    def __iter__(self) -> Iterator[int]:
        raise AssertionError("an untouched topic's partitions were walked")

    def __len__(self) -> int:
        raise AssertionError("an untouched topic's partitions were counted")


def test_a_change_to_one_partition_reports_that_partition_only() -> None:
    before = _image()
    after = _isr_change(_isr_change(before, "b", 7), "b", 9)
    changed = changed_partitions(before, after)
    assert changed is not None
    assert [(t.name, i) for t, i, _ in changed] == [("b", 7), ("b", 9)]
    assert all(r is after.partition(t.topic_id, i) for t, i, r in changed)


def test_an_untouched_topic_is_not_walked_so_the_cost_is_that_of_the_changed_topics() -> None:
    """O(touched topics), not O(every partition): a broker holding 10,000 partitions that
    applied one ISR change does not revisit the other 9,999 (the O(n^2) of a large create)."""
    base = _image()
    a = base.topic("a")
    assert a is not None
    guarded = TopicImage(name="a", topic_id=a.topic_id, partitions=_Untouchable())
    before = MetadataImage(
        brokers=base.brokers,
        topics_by_id={**base.topics_by_id, a.topic_id: guarded},
        topic_ids_by_name=base.topic_ids_by_name,
        configs=base.configs,
        last_offset=base.last_offset,
        last_epoch=base.last_epoch,
        index=base.partition_index,  # the same partitions: not rebuilt from the guarded map
    )
    after = _isr_change(before, "b", 3)
    changed = changed_partitions(before, after)
    assert changed is not None and [(t.name, i) for t, i, _ in changed] == [("b", 3)]


def test_no_change_reports_nothing() -> None:
    image = _image()
    assert changed_partitions(image, image) == []


def test_a_broker_change_alone_changes_no_partition() -> None:
    """The caller updates its leaders' view of the brokers itself (not a full pass)."""
    before = _image()
    broker = before.brokers[1]
    fenced = before.apply(
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=broker.broker_epoch, fenced=True),
        before.last_offset + 1,
    )
    assert changed_partitions(before, fenced) == []


def test_changes_every_partition_must_see_ask_for_a_full_pass() -> None:
    before = _image()
    configured = before.apply(
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="a",
            name="min.insync.replicas",
            value="2",
        ),
        before.last_offset + 1,
    )
    assert changed_partitions(before, configured) is None
    created = before.apply(TopicRecord(name="c", topic_id="c-id"), before.last_offset + 1)
    assert changed_partitions(before, created) is None


def test_an_image_loaded_from_a_snapshot_asks_for_a_full_pass() -> None:
    before = _image()
    assert changed_partitions(before, MetadataImage.from_snapshot(before.to_snapshot())) is None
