"""The rules a broker reconciles its replicas by, as pure functions of the metadata image: the
broker (`ReplicaManager.reconcile`) and the simulator's broker (`SimBroker`) both follow them.

- `may_reconcile`: act on partition metadata only once the image holds this broker's own
  registration (its offset is the broker epoch). Before it, a restarted broker still sees the
  leaderships of its previous incarnation, and leading an old epoch on a log that lost its
  tail would make followers truncate committed records (found by `kraft sim cluster`, seed
  0x9e). Kafka's brokers wait the same way.
- `hosted_partitions`: the partitions whose ``replicas`` include this broker; the others it
  holds are stopped and their logs deleted (a deleted topic, a reassignment, KIP-455).
- `broker_statuses`: every broker's epoch and state, which a leader core uses to keep fenced
  or shutting-down brokers out of the ISR (KIP-841).
- `is_adding_replica`: a broker a reassignment is adding to a partition (its fetches are
  reassignment traffic, throttled: `replication.broker.replicas.throttle`).
"""

from __future__ import annotations

from collections.abc import Iterator

from kraft.metadata import MetadataImage
from kraft.metadata.image import PartitionRegistration, TopicImage
from kraft.types import TopicPartition
from replication.core import BrokerStatus


def may_reconcile(image: MetadataImage, broker_epoch: int | None) -> bool:
    """Whether the image holds this broker's registration (it registered, and the image
    reached the offset of that registration, its ``broker_epoch``)."""
    return broker_epoch is not None and image.last_offset >= broker_epoch


def hosted_partitions(
    image: MetadataImage, node_id: int
) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    """Every partition of ``image`` that ``node_id`` is a replica of."""
    for topic, index, registration in image.iter_partitions():
        if node_id in registration.replicas:
            yield topic, index, registration


def broker_statuses(image: MetadataImage) -> dict[int, BrokerStatus]:
    """Every registered broker's epoch, fencing and controlled shutdown, by id."""
    return {
        broker_id: BrokerStatus(
            broker_epoch=r.broker_epoch,
            fenced=r.fenced,
            in_controlled_shutdown=r.in_controlled_shutdown,
        )
        for broker_id, r in image.brokers.items()
    }


def is_adding_replica(image: MetadataImage, tp: TopicPartition, replica_id: int) -> bool:
    """``replica_id`` is being added to ``tp`` by a reassignment (KIP-455)."""
    registration = image.partition_by_name(tp)
    return registration is not None and replica_id in registration.adding_replicas


__all__ = ["broker_statuses", "hosted_partitions", "is_adding_replica", "may_reconcile"]
