"""ListOffsets for the admin client (Kafka's ``Admin.listOffsets``, kafka-get-offsets.sh).

The controller's view (`DescribeClusterResponse`: every broker's address and every partition's
leader and leader epoch) says where to ask; one ListOffsets goes to each leader broker with all
of its partitions, fenced by the leader epoch (KIP-320). Offsets live on brokers only, so this
works the same whether the admin client was pointed at brokers or at the controllers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kraft.controller.messages import DescribeClusterResponse
from kraft.security.tls import TlsConfig
from kraft.types import TopicPartition
from replication.clients.network import BrokerNetwork
from replication.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_UNCOMMITTED,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from storage.errors import (
    ErrorCode,
    KraftError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
    error_for,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedOffset:
    """One partition's answer: the offset (-1 when no record has a timestamp at or after the
    one asked for), the timestamp of that record (-1 for earliest/latest), the leader epoch."""

    offset: int
    timestamp: int = -1
    leader_epoch: int = -1


def offset_spec(spec: int | str) -> int:
    """``"earliest"`` -> -2, ``"latest"`` -> -1, a timestamp (ms, >= 0) -> itself (the
    sentinels -2 and -1 pass as they are).

    Raises:
        ValueError: anything else.
    """
    if isinstance(spec, int) and not isinstance(spec, bool):
        if spec in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
            return spec  # already a sentinel
        value = spec
    else:
        text = str(spec).strip().lower()
        if text in ("earliest", "latest"):
            return EARLIEST_TIMESTAMP if text == "earliest" else LATEST_TIMESTAMP
        if not text.lstrip("-").isdigit():
            raise ValueError(
                f"offset spec must be earliest, latest or a timestamp in ms, got {text[:40]!r}"
            )
        value = int(text)
    if value < 0:
        raise ValueError(f"a timestamp must be >= 0 ms, got {value}")
    return value


def list_offsets(
    cluster: DescribeClusterResponse,
    queries: Mapping[TopicPartition, int],
    *,
    isolation_level: int = READ_UNCOMMITTED,
    timeout: float = 10.0,
    tls: TlsConfig | None = None,
) -> dict[TopicPartition, ListedOffset | KraftError]:
    """``{partition: timestamp}`` (-2 earliest, -1 latest, else milliseconds since the epoch)
    -> each partition's `ListedOffset`, or the error it got (UNKNOWN_TOPIC_OR_PARTITION,
    LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, a network error, ...)."""
    topics = {t.name: t for t in cluster.topics}
    addresses = {b.broker_id: b.address for b in cluster.brokers}
    out: dict[TopicPartition, ListedOffset | KraftError] = {}
    by_leader: dict[int, dict[str, list[ListOffsetsPartition]]] = {}
    for tp, timestamp in queries.items():
        topic = topics.get(tp.topic)
        part = None
        if topic is not None:
            part = next((p for p in topic.partitions if p.partition == tp.partition), None)
        if part is None:
            out[tp] = UnknownTopicOrPartitionError(f"unknown partition {tp}")
            continue
        if part.leader < 0 or not addresses.get(part.leader):
            out[tp] = LeaderNotAvailableError(f"{tp} has no leader")
            continue
        by_leader.setdefault(part.leader, {}).setdefault(tp.topic, []).append(
            ListOffsetsPartition(
                partition_index=tp.partition,
                current_leader_epoch=part.leader_epoch,
                timestamp=timestamp,
            )
        )
    if not by_leader:
        return out
    network = BrokerNetwork(
        sorted({addresses[b] for b in by_leader}), request_timeout_s=timeout, tls=tls
    )
    try:
        for leader, parts in by_leader.items():
            request = ListOffsetsRequest(
                isolation_level=isolation_level,
                topics=tuple(
                    ListOffsetsTopic(name=name, partitions=tuple(ps)) for name, ps in parts.items()
                ),
            )
            try:
                response = network.call(
                    addresses[leader], "ListOffsets", request, ListOffsetsResponse
                )
            except KraftError as e:
                for name, ps in parts.items():
                    for p in ps:
                        out[TopicPartition(name, p.partition_index)] = e
                continue
            for t in response.topics:
                for r in t.partitions:
                    tp = TopicPartition(t.name, r.partition_index)
                    out[tp] = (
                        ListedOffset(
                            offset=r.offset, timestamp=r.timestamp, leader_epoch=r.leader_epoch
                        )
                        if r.error_code is ErrorCode.NONE
                        else error_for(r.error_code, r.error_message or f"ListOffsets {tp}")
                    )
    finally:
        network.close()
    return out


__all__ = ["ListedOffset", "list_offsets", "offset_spec"]
