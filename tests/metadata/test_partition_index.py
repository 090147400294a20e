"""`PartitionIndex`: kept by each batch's delta, always equal to a build from scratch."""

from __future__ import annotations

from kraft.metadata import NO_LEADER, MetadataImage, PartitionChangeRecord, RemoveTopicRecord
from kraft.metadata.partition_index import PartitionIndex
from tests.metadata.builders import ImageBuilder, topic_id_for


def _apply(
    image: MetadataImage, *records: PartitionChangeRecord | RemoveTopicRecord
) -> MetadataImage:
    after = image.apply_batch(records, image.last_offset + 1)
    assert after.partition_index == PartitionIndex.of(after.topics_by_id)
    return after


def test_the_index_follows_leaders_isr_elr_offline_replicas_reassignments_and_removals() -> None:
    image = (
        ImageBuilder()
        .with_brokers(1, 2, 3, 4)
        .with_topic("a", partitions=4, rf=3)
        .with_topic("b", partitions=2, rf=2)
        .build()
    )
    a, b = topic_id_for("a"), topic_id_for("b")
    index = image.partition_index
    assert index == PartitionIndex.of(image.topics_by_id)
    led_by_1 = {k for k in index.led_by(1)}
    assert led_by_1 and all(image.partition(t, i).leader == 1 for t, i in led_by_1)  # type: ignore[union-attr]
    assert not index.leaderless()

    p0 = image.partition(a, 0)
    assert p0 is not None
    others = tuple(r for r in p0.isr if r != p0.leader)
    # the leader leaves: leaderless is the last member alone
    image = _apply(
        image, PartitionChangeRecord(topic_id=a, partition=0, isr=others[:1], leader=NO_LEADER)
    )
    assert (a, 0) in image.partition_index.leaderless()
    assert (a, 0) not in image.partition_index.led_by(p0.leader)
    assert (a, 0) not in image.partition_index.in_isr_of(others[1])
    # an ELR member and an offline replica
    image = _apply(
        image,
        PartitionChangeRecord(
            topic_id=a,
            partition=0,
            leader=others[0],
            eligible_leader_replicas=(others[1],),
            offline_replicas=(p0.leader,),
        ),
    )
    assert image.partition_index.in_elr_of(others[1]) == {(a, 0)}
    assert image.partition_index.offline_on(p0.leader) == {(a, 0)}
    assert not image.partition_index.leaderless()
    # a reassignment in progress, then done
    p1 = image.partition(a, 1)
    assert p1 is not None
    spare = next(r for r in (1, 2, 3, 4) if r not in p1.replicas)
    image = _apply(
        image,
        PartitionChangeRecord(
            topic_id=a, partition=1, replicas=(*p1.replicas, spare), adding_replicas=(spare,)
        ),
    )
    assert image.partition_index.reassigning == {(a, 1)}
    image = _apply(image, PartitionChangeRecord(topic_id=a, partition=1, adding_replicas=()))
    assert not image.partition_index.reassigning
    # removing a topic drops every entry of its partitions
    image = _apply(image, RemoveTopicRecord(topic_id=a))
    index = image.partition_index
    for sets in (index.by_leader, index.by_isr, index.by_elr, index.by_offline):
        assert all(t == b for members in sets.values() for t, _ in members)


def test_an_image_from_a_snapshot_has_the_same_index() -> None:
    image = ImageBuilder().with_brokers(1, 2, 3).with_topic("t", partitions=30, rf=3).build()
    loaded = MetadataImage.from_snapshot(image.to_snapshot())
    assert loaded.index is not None  # built by the snapshot's delta, not on first use
    assert loaded.partition_index == image.partition_index
