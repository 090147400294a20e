"""Bounds on one admin request, checked before any work is done for it.

A controller decides on the event loop that also answers Raft and broker heartbeats, so the
work one request can cause must be bounded by the request's *shape*, not by numbers inside it
(``CreatePartitions(count=2**31-1)`` once spun the active controller until it died). Kafka's
QuorumController bounds the same things:

- ``MAX_RECORDS_PER_USER_OP`` (QuorumController): one admin operation writes at most 10,000
  metadata records (one batch); beyond it the operation fails with POLICY_VIOLATION.
- ``MAX_PARTITIONS_PER_BATCH`` (ReplicationControlManager): CreateTopics and CreatePartitions
  add at most 10,000 partitions per request ("Excessively large number of partitions per
  request"), POLICY_VIOLATION, checked before placement.
- Config values: `kraft.metadata.configs.CONFIG_VALUE_MAX_CHARS` (INVALID_CONFIG).
- The request itself: ``socket.request.max.bytes`` at the gRPC layer
  (`kraft.transport.channels`), RESOURCE_EXHAUSTED.

The ``reject_*`` functions are pure functions of the request alone (no image): the shell may
run them off the event loop, next to decoding a large request, and answer without involving
the core; the core runs them again first thing, so its tests and the simulator see the same
rules. Each returns the complete rejection response, or ``None`` when the request is in bounds.
"""

from __future__ import annotations

from collections.abc import Sized
from typing import Final

from kraft.controller.messages import (
    AlterConfigsResourceResult,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kraft.metadata.image import MetadataImage
from storage.errors import ErrorCode

MAX_RECORDS_PER_USER_OP: Final = 10_000
"""Kafka's ``QuorumController.MAX_RECORDS_PER_USER_OP``: records one admin operation may write."""

MAX_PARTITIONS_PER_BATCH: Final = 10_000
"""Kafka's ``ReplicationControlManager.MAX_PARTITIONS_PER_BATCH``: partitions one CreateTopics
or CreatePartitions request may add."""

TOO_MANY_PARTITIONS: Final = "excessively large number of partitions per request"
TOO_MANY_RECORDS: Final = "the request would write more than {} metadata records"


def too_many_partitions_message(count: int) -> str:
    return f"{TOO_MANY_PARTITIONS}: {count} > {MAX_PARTITIONS_PER_BATCH}"


def _too_many_records(count: int) -> str:
    return f"{TOO_MANY_RECORDS.format(MAX_RECORDS_PER_USER_OP)} (at least {count})"


def _len(value: Sized | None) -> int:
    return 0 if value is None else len(value)


def reject_create_topics(
    request: CreateTopicsRequest, default_num_partitions: int
) -> CreateTopicsResponse | None:
    """POLICY_VIOLATION for every topic when the request adds more than
    `MAX_PARTITIONS_PER_BATCH` partitions or writes more than `MAX_RECORDS_PER_USER_OP`
    records (a TopicRecord, its ConfigRecords and PartitionRecords per topic); Kafka's
    ``validateTotalNumberOfPartitions``, counted the same way (-1 is ``num.partitions``)."""
    partitions = 0
    records = 0
    for topic in request.topics:
        if topic.assignments:
            count = len(topic.assignments)
        elif topic.num_partitions == -1:
            count = default_num_partitions
        else:
            count = max(topic.num_partitions, 0)
        partitions += count
        records += 1 + len(topic.configs) + count
    if partitions > MAX_PARTITIONS_PER_BATCH:
        message = too_many_partitions_message(partitions)
    elif records > MAX_RECORDS_PER_USER_OP:
        message = _too_many_records(records)
    else:
        return None
    return CreateTopicsResponse(
        topics=tuple(
            CreatableTopicResult(
                name=t.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=message
            )
            for t in request.topics
        )
    )


def reject_create_partitions(request: CreatePartitionsRequest) -> CreatePartitionsResponse | None:
    """POLICY_VIOLATION for every topic when the request names more topics, or carries more
    manual assignments, than one operation may add partitions. (How many partitions a count
    adds depends on the image: `topic_control` checks that before placing anything.)"""
    assigned = sum(_len(t.assignments) for t in request.topics)
    if len(request.topics) > MAX_RECORDS_PER_USER_OP:
        return _create_partitions_violation(request, _too_many_records(len(request.topics)))
    if assigned > MAX_PARTITIONS_PER_BATCH:
        return _create_partitions_violation(request, too_many_partitions_message(assigned))
    return None


def reject_new_partitions_beyond_batch(
    image: MetadataImage, request: CreatePartitionsRequest
) -> CreatePartitionsResponse | None:
    """POLICY_VIOLATION for every topic when the counts add more than `MAX_PARTITIONS_PER_BATCH`
    partitions to the topics that exist (the image's half of the check, made before any
    placement)."""
    added = 0
    for t in request.topics:
        topic = image.topic(t.name)
        if topic is not None:
            added += max(0, t.count - len(topic.partitions))
    if added <= MAX_PARTITIONS_PER_BATCH:
        return None
    return _create_partitions_violation(request, too_many_partitions_message(added))


def _create_partitions_violation(
    request: CreatePartitionsRequest, message: str
) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(
        results=tuple(
            CreatePartitionsTopicResult(
                name=t.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=message
            )
            for t in request.topics
        )
    )


def reject_delete_topics(request: DeleteTopicsRequest) -> DeleteTopicsResponse | None:
    """POLICY_VIOLATION for every entry when the request deletes more topics than one
    operation may write records."""
    count = len(request.topic_names) + len(request.topic_ids)
    if count <= MAX_RECORDS_PER_USER_OP:
        return None
    message = _too_many_records(count)
    code = ErrorCode.POLICY_VIOLATION
    return DeleteTopicsResponse(
        topics=tuple(
            DeletableTopicResult(name=n, topic_id="", error_code=code, error_message=message)
            for n in request.topic_names
        )
        + tuple(
            DeletableTopicResult(name=None, topic_id=i, error_code=code, error_message=message)
            for i in request.topic_ids
        )
    )


def reject_incremental_alter_configs(
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse | None:
    """POLICY_VIOLATION for every resource when the request changes more keys than one
    operation may write records (Kafka's BoundedList in ConfigurationControlManager)."""
    count = sum(len(r.configs) for r in request.resources)
    if count <= MAX_RECORDS_PER_USER_OP and len(request.resources) <= MAX_RECORDS_PER_USER_OP:
        return None
    message = _too_many_records(max(count, len(request.resources)))
    return IncrementalAlterConfigsResponse(
        responses=tuple(
            AlterConfigsResourceResult(
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                error_code=ErrorCode.POLICY_VIOLATION,
                error_message=message,
            )
            for r in request.resources
        )
    )


def reject_elect_leaders(request: ElectLeadersRequest) -> ElectLeadersResponse | None:
    """POLICY_VIOLATION (request level) when the request names more partitions than one
    operation may write records."""
    count = _len(request.partitions)
    if count <= MAX_RECORDS_PER_USER_OP:
        return None
    return ElectLeadersResponse(
        error_code=ErrorCode.POLICY_VIOLATION, error_message=_too_many_records(count)
    )


__all__ = [
    "MAX_PARTITIONS_PER_BATCH",
    "MAX_RECORDS_PER_USER_OP",
    "reject_create_partitions",
    "reject_create_topics",
    "reject_delete_topics",
    "reject_elect_leaders",
    "reject_incremental_alter_configs",
    "reject_new_partitions_beyond_batch",
    "too_many_partitions_message",
]
