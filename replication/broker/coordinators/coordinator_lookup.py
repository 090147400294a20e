"""FindCoordinator's answer for a key hashed onto an internal topic, and that topic's creation:
shared by the group coordinator (``__consumer_offsets``, key type 0) and the transaction
coordinator (``__transaction_state``, key type 1, KIP-98).

A key lives on partition ``abs(hashCode(key)) % partitions`` of its topic (Kafka's
``partitionFor``, `replication.group.partition_for_group`); its coordinator is that partition's
leader. The first lookup that finds no topic asks the controller to create it and is answered
COORDINATOR_NOT_AVAILABLE, as Kafka does, until the partition has a leader.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import structlog

from replication.group import partition_for_group
from replication.messages import Coordinator
from storage.errors import ErrorCode, KraftError, TopicAlreadyExistsError

if TYPE_CHECKING:
    from replication.broker.host import GroupHost

_FOREVER = str(-1)
OFFSETS_TOPIC_SEGMENT_BYTES = 8 * 1024 * 1024
OFFSETS_TOPIC_CONFIGS: Mapping[str, str] = {
    "cleanup.policy": "compact",
    "retention.ms": _FOREVER,
    "retention.bytes": _FOREVER,
    "segment.bytes": str(OFFSETS_TOPIC_SEGMENT_BYTES),
}
"""The offsets topic is compacted (Kafka's ``offsets.topic`` configs: ``cleanup.policy=compact``):
the coordinator's records are keyed, latest-wins, so the cleaner keeps what a replay needs.
Coordinator snapshots also move its start (`replication.broker.coordinators.group_runtime`);
segments of 8 MiB let both reclaim space soon."""

_log = structlog.get_logger("replication.broker.coordinators.coordinator_lookup")


class InternalTopic:
    """An internal topic created on first use.

    Args:
        server: the broker.
        name: the topic.
        shape: its partitions and wanted replication factor (from the broker's config; the
            factor is capped at the live brokers).
        configs: its topic configs.
    """

    def __init__(
        self,
        server: GroupHost,
        name: str,
        shape: Callable[[], tuple[int, int]],
        configs: Mapping[str, str],
    ) -> None:
        self._server = server
        self.name = name
        self._shape = shape
        self._configs = configs
        self._creating: asyncio.Task[None] | None = None
        self._logger = _log.bind(node_id=server.node_id, topic=name)

    def partitions(self) -> int | None:
        """Its partition count, or None while it does not exist."""
        description = self._server.image.describe_topic(self.name)
        if description is None or not description.partitions:
            return None
        return len(description.partitions)

    def find(self, key: str, listener: str = "") -> Coordinator:
        """The coordinator of ``key`` at its endpoint on ``listener`` (creating the topic)."""
        image = self._server.image
        description = image.describe_topic(self.name)
        if description is None or not description.partitions:
            self.ensure()
            return Coordinator(
                key=key,
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                error_message=f"creating {self.name}",
            )
        partition = description.partitions[partition_for_group(key, len(description.partitions))]
        broker = image.broker(partition.leader) if partition.leader >= 0 else None
        endpoint = None if broker is None or broker.fenced else broker.endpoint(listener)
        if endpoint is None:
            return Coordinator(
                key=key,
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                error_message=f"{self.name}-{partition.partition} has no leader",
            )
        return Coordinator(
            key=key, node_id=partition.leader, host=endpoint.host, port=endpoint.port
        )

    def ensure(self) -> None:
        """Ask the controller to create the topic (once at a time)."""
        if self._creating is not None and not self._creating.done():
            return
        self._creating = asyncio.create_task(self._create(), name=f"create-{self.name}")

    async def _create(self) -> None:
        partitions, wanted = self._shape()
        live = sum(1 for b in self._server.image.brokers.values() if not b.fenced)
        replication_factor = max(1, min(wanted, live))
        configs = dict(self._configs)
        if "min.insync.replicas" in configs:  # never above the factor it got
            configs["min.insync.replicas"] = str(
                min(int(configs["min.insync.replicas"]), replication_factor)
            )
        try:
            await self._server.create_internal_topic(
                self.name, partitions, replication_factor, configs
            )
        except TopicAlreadyExistsError:
            return
        except KraftError as e:
            self._logger.warning("internal_topic_creation_failed", error=repr(e))
            return
        self._logger.info(
            "internal_topic_created", partitions=partitions, replication_factor=replication_factor
        )


__all__ = ["OFFSETS_TOPIC_CONFIGS", "OFFSETS_TOPIC_SEGMENT_BYTES", "InternalTopic"]
