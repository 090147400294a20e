"""`ImageBuilder`: metadata images for tests, built by replaying real records.

    image = ImageBuilder().with_brokers(1, 2, 3).with_topic("t", partitions=3, rf=3).build()

Brokers register (broker epoch = the offset of their RegisterBrokerRecord) and are unfenced
unless listed in ``fenced=``; topics are placed round-robin (partition p's replicas are the
brokers rotated by p), with ISR = replicas and leader = first replica unless overridden.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Self

from kraft.metadata import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    MetadataImage,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)


def topic_id_for(name: str) -> str:
    """The deterministic topic id `ImageBuilder` gives topic ``name``."""
    return f"{name}-id"


class ImageBuilder:
    def __init__(self) -> None:
        self._records: list[MetadataRecord] = []
        self._broker_ids: list[int] = []
        self._partitions: dict[tuple[str, int], PartitionRecord] = {}
        self._topic_order: list[TopicRecord] = []
        self._configs: list[ConfigRecord] = []

    def with_brokers(
        self,
        *broker_ids: int,
        racks: Mapping[int, str] | None = None,
        fenced: Iterable[int] = (),
        shutting_down: Iterable[int] = (),
    ) -> Self:
        fenced_set, shutting = set(fenced), set(shutting_down)
        for broker_id in broker_ids:
            epoch = len(self._records)
            self._records.append(
                RegisterBrokerRecord(
                    broker_id=broker_id,
                    incarnation_id=f"incarnation-{broker_id}",
                    broker_epoch=epoch,
                    listeners=(
                        Endpoint(name="PLAINTEXT", host="127.0.0.1", port=9000 + broker_id),
                    ),
                    rack=(racks or {}).get(broker_id),
                    fenced=True,
                )
            )
            if broker_id not in fenced_set:
                self._records.append(
                    BrokerRegistrationChangeRecord(
                        broker_id=broker_id,
                        broker_epoch=epoch,
                        fenced=False,
                        in_controlled_shutdown=broker_id in shutting or None,
                    )
                )
            self._broker_ids.append(broker_id)
        return self

    def with_topic(
        self,
        name: str,
        *,
        partitions: int = 1,
        rf: int = 1,
        assignments: Sequence[Sequence[int]] | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> Self:
        topic_id = topic_id_for(name)
        self._topic_order.append(TopicRecord(name=name, topic_id=topic_id))
        brokers = sorted(self._broker_ids)
        if assignments is None:
            assignments = [
                tuple(brokers[(p + i) % len(brokers)] for i in range(rf)) for p in range(partitions)
            ]
        for p, replicas in enumerate(assignments):
            self._partitions[(name, p)] = PartitionRecord(
                topic_id=topic_id,
                partition=p,
                replicas=tuple(replicas),
                isr=tuple(replicas),
                leader=replicas[0],
            )
        for key, value in (configs or {}).items():
            self._configs.append(
                ConfigRecord(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name=name,
                    name=key,
                    value=value,
                )
            )
        return self

    def with_partition(
        self,
        topic: str,
        partition: int,
        *,
        isr: Sequence[int] | None = None,
        leader: int | None = None,
        leader_epoch: int | None = None,
        partition_epoch: int | None = None,
    ) -> Self:
        """Override one partition's state (leader defaults to the first ISR member)."""
        current = self._partitions[(topic, partition)]
        new_isr = current.isr if isr is None else tuple(isr)
        if leader is None:
            leader = new_isr[0] if new_isr and current.leader not in new_isr else current.leader
            if not new_isr:
                leader = NO_LEADER
        self._partitions[(topic, partition)] = replace(
            current,
            isr=new_isr,
            leader=leader,
            leader_epoch=current.leader_epoch if leader_epoch is None else leader_epoch,
            partition_epoch=current.partition_epoch if partition_epoch is None else partition_epoch,
        )
        return self

    def with_cluster_config(self, key: str, value: str) -> Self:
        self._configs.append(
            ConfigRecord(
                resource_type=ConfigResourceType.BROKER, resource_name="", name=key, value=value
            )
        )
        return self

    def records(self) -> list[MetadataRecord]:
        out = list(self._records)
        for topic in self._topic_order:
            out.append(topic)
            out.extend(
                record
                for (name, _), record in sorted(self._partitions.items())
                if name == topic.name
            )
        out.extend(self._configs)
        return out

    def build(self) -> MetadataImage:
        records = self.records()
        return MetadataImage.empty().apply_batch(records, base_offset=0, epoch=1)
