"""Which partitions changed between two images: what a broker must act on after a batch.

Kafka's brokers act on ``MetadataDelta.topicsDelta().localChanges(brokerId)``: the partitions a
batch touched, never every partition of the cluster. kraft's images share structure (see
`kraft.metadata.delta`: a batch copies only the maps it touches and keeps every untouched
`TopicImage` and `PartitionRegistration` object), so the changes since an earlier image are
found by identity: a topic whose object is the same was not touched, and within a touched topic
a partition whose registration is the same object was not either. The cost is O(partitions of
the touched topics), not O(partitions of the cluster); a broker holding 10,000 partitions that
applied an ISR change of one no longer revisits the other 9,999 (O(n^2) over a large create).

Some changes concern every partition: a topic created or deleted, a config changed (every
topic may resolve it). For those `changed_partitions` answers None: the caller walks every
partition, as before. A broker registered, fenced or unfenced (``after.brokers is not
before.brokers``) concerns only the replicas this broker leads (their view of the followers,
KIP-841), which the caller updates itself: a full pass at each fencing of a 20,000-partition
cluster held a broker's loop long enough to get it fenced in turn.
"""

from __future__ import annotations

from kraft.metadata.image import MetadataImage, PartitionRegistration, TopicImage


def changed_partitions(
    before: MetadataImage, after: MetadataImage
) -> list[tuple[TopicImage, int, PartitionRegistration]] | None:
    """The partitions of ``after`` whose registration is not the one ``before`` holds, topics
    by name and partitions by index; None when the change is one every partition must see
    (topics created or deleted, configs changed: see the module docstring), or when
    ``after`` does not descend from ``before`` (a snapshot was loaded)."""
    if (
        after.topic_ids_by_name is not before.topic_ids_by_name
        or after.configs is not before.configs
    ):
        return None
    if after.topics_by_id is before.topics_by_id:
        return []
    changed: list[tuple[TopicImage, int, PartitionRegistration]] = []
    for name in sorted(after.topic_ids_by_name):
        topic_id = after.topic_ids_by_name[name]
        topic, old = after.topics_by_id[topic_id], before.topics_by_id.get(topic_id)
        if old is None:
            return None  # not a descendant of ``before``
        if topic is old or topic.partitions is old.partitions:
            continue
        old_partitions = old.partitions
        for index in sorted(topic.partitions):
            registration = topic.partitions[index]
            if old_partitions.get(index) is not registration:
                changed.append((topic, index, registration))
    return changed


__all__ = ["changed_partitions"]
