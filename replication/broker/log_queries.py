"""The broker's read-only partition queries: ListOffsets, DescribeLogDirs, DescribeProducers.

What `replication.broker.service.BrokerService` answers from its replicas' logs and producer
state without changing them; like it, over what they need of the broker (`ReplicaHost`).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from kraft.types import TopicPartition
from replication.broker.replicas.stable_reads import READ_COMMITTED, last_stable_offset
from replication.core import fence_leader_epoch
from replication.messages import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
    LogDirPartition,
    PartitionProducers,
    ProducerDescription,
    TopicPartitions,
)
from storage.errors import ErrorCode, KraftError
from storage.records import iter_batches, iter_records

if TYPE_CHECKING:
    from replication.broker.host import ReplicaHost, ServedReplica


def leading(server: ReplicaHost, tp: TopicPartition) -> ServedReplica | None:
    """``tp``'s replica here if it leads it."""
    replica = server.replicas.get(tp)
    return replica if replica is not None and replica.driver.is_leader else None


def not_leader_code(server: ReplicaHost, tp: TopicPartition) -> ErrorCode:
    """What a request for a partition not led here is answered: unknown, or not the leader."""
    if server.image.partition_by_name(tp) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.NOT_LEADER_OR_FOLLOWER


def list_offsets(server: ReplicaHost, request: ListOffsetsRequest) -> ListOffsetsResponse:
    """ListOffsets: earliest, latest (the high watermark for consumers, the last stable offset
    for read_committed ones, the log end for a replica), or the first offset at or after a
    timestamp, from the partitions this broker leads."""
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            replica = leading(server, tp)
            if replica is None:
                parts.append(
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=not_leader_code(server, tp)
                    )
                )
                continue
            leader_epoch = replica.driver.leader_epoch
            fenced = fence_leader_epoch(p.current_leader_epoch, leader_epoch)
            if fenced is not None:
                parts.append(
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=fenced
                    )
                )
                continue
            log = replica.log
            timestamp = -1  # Kafka's answer for earliest and latest
            if p.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                offset: int | None = log.log_start_offset
            elif p.timestamp == LATEST_TIMESTAMP:
                offset = replica.high_watermark if request.replica_id < 0 else log.log_end_offset
                if request.isolation_level == READ_COMMITTED and request.replica_id < 0:
                    offset = last_stable_offset(replica.producer_state, offset)
            else:
                try:
                    offset = replica.offset_for_timestamp(p.timestamp)
                    if offset is not None and offset >= replica.high_watermark:
                        offset = None
                    if offset is not None:  # the found record's (Kafka's answer)
                        timestamp = _timestamp_at(log.read(offset, 1), offset)
                except KraftError as e:
                    parts.append(
                        ListOffsetsPartitionResponse(
                            partition_index=p.partition_index, error_code=e.code
                        )
                    )
                    continue
            parts.append(
                ListOffsetsPartitionResponse(
                    partition_index=p.partition_index,
                    timestamp=timestamp,
                    offset=-1 if offset is None else offset,
                    leader_epoch=leader_epoch,
                )
            )
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=tuple(parts)))
    return ListOffsetsResponse(topics=tuple(topics))


def describe_log_dirs(
    server: ReplicaHost, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    """The partitions this broker holds (those asked for) with their sizes, in its one log
    directory (the data directory every replica's log lives under)."""
    replicas = server.replicas
    wanted = _selected(request.topics, replicas)
    held = [(tp, replicas[tp]) for tp in wanted if tp in replicas]
    directory = next((r.log.directory.parent for _, r in held), None)
    if directory is None and replicas:
        directory = next(iter(replicas.values())).log.directory.parent
    total = usable = -1
    if directory is not None:
        try:
            usage = shutil.disk_usage(directory)
            total, usable = usage.total, usage.free
        except OSError:
            pass
    return DescribeLogDirsResponse(
        log_dir="" if directory is None else str(directory),
        partitions=tuple(
            LogDirPartition(
                topic=tp.topic,
                partition=tp.partition,
                size_bytes=replica.log.size_bytes,
                offset_lag=max(0, replica.high_watermark - replica.log.log_end_offset),
            )
            for tp, replica in held
        ),
        total_bytes=total,
        usable_bytes=usable,
    )


def describe_producers(
    server: ReplicaHost, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    """The producers of each partition this broker leads (Kafka's DescribeProducers)."""
    answers = []
    for tp in _selected(request.topics, ()):
        replica = leading(server, tp)
        if replica is None:
            answers.append(
                PartitionProducers(
                    topic=tp.topic, partition=tp.partition, error_code=not_leader_code(server, tp)
                )
            )
            continue
        entries = replica.producer_state.entries
        answers.append(
            PartitionProducers(
                topic=tp.topic,
                partition=tp.partition,
                producers=tuple(
                    ProducerDescription(
                        producer_id=e.producer_id,
                        producer_epoch=e.producer_epoch,
                        last_sequence=e.last_sequence,
                        last_timestamp_ms=e.batches[-1].timestamp_ms if e.batches else -1,
                        current_txn_start_offset=e.current_txn_first_offset,
                    )
                    for _, e in sorted(entries.items())
                ),
            )
        )
    return DescribeProducersResponse(partitions=tuple(answers))


def _selected(
    topics: Sequence[TopicPartitions] | None, hosted: Iterable[TopicPartition]
) -> list[TopicPartition]:
    if topics is None:
        return sorted(hosted)
    return [TopicPartition(t.name, p) for t in topics for p in t.partitions]


def _timestamp_at(batches: bytes, offset: int) -> int:
    """The timestamp of the record at ``offset`` in ``batches`` (read from the batch that
    holds it), or -1 if it is not there."""
    for pos, header in iter_batches(batches):
        if header.base_offset <= offset <= header.last_offset:
            batch = memoryview(batches)[pos : pos + header.size_bytes]
            return next((r.timestamp_ms for r in iter_records(batch) if r.offset == offset), -1)
    return -1


__all__ = ["describe_log_dirs", "describe_producers", "leading", "list_offsets", "not_leader_code"]
