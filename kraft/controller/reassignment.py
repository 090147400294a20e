"""Partition reassignment (KIP-455): the controller's decisions, as pure functions of an image.

Theory of operation
-------------------
A reassignment lives in the partition's own registration, as in Kafka's KRaft controller:

- **start** (`handle_alter_partition_reassignments` with target replicas): one
  `PartitionChangeRecord` sets ``replicas`` to the target followed by the current replicas
  that are not in it (the union: every old replica keeps replicating), ``adding_replicas`` to
  the target replicas that are new and ``removing_replicas`` to the current ones that are not
  in the target (Kafka's ``PartitionReassignmentReplicas``). The brokers of the adding replicas
  open them and fetch from the leader; the leader adds each to the ISR with an AlterPartition
  once it has caught up, as for any follower. A new reassignment of a partition that is being
  reassigned replaces the old one, computed from the current (union) replicas, as in Kafka.
- **completion** (`complete_reassignment`): once every target replica is in the ISR, one record
  sets ``replicas`` to the target, drops the removing replicas from the ISR, clears
  ``adding_replicas`` / ``removing_replicas``, and elects a leader from the target if the
  leader was removed. The brokers of the removed replicas stop them and delete their logs.
  `ControllerCore` checks completion after every committed ISR change (AlterPartition) in the
  same batch, and once for every partition when it becomes active.
- **cancel** (target ``None``): back to the original replicas (``replicas`` minus the adding
  ones), the adding replicas leave the ISR, and a leader that was an adding replica gives way
  to one of the original replicas (Kafka's ``PartitionReassignmentRevert``).

min.insync.replicas. A reassignment step never takes the ISR below
``min(min.insync.replicas, size of the ISR before the step)``: a target smaller than
``min.insync.replicas`` is refused (INVALID_REPLICATION_FACTOR), completion waits while it
would break the rule (min.insync.replicas raised meanwhile), and a cancel that would break it
is refused (INVALID_REPLICA_ASSIGNMENT; Kafka refuses the unclean case the same way), so
acknowledged ``acks=all`` records always stay on at least ``min.insync.replicas`` replicas.

Quorum-mode topics (``replication.mode=quorum``) cannot be reassigned: their replicas are the
voters of a Raft group, and changing a voter set needs KIP-853's one-at-a-time protocol, which
partitions do not run. Such a request gets INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from structlog.typing import FilteringBoundLogger

from kraft.controller.limits import MAX_RECORDS_PER_USER_OP
from kraft.controller.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    ReassignablePartition,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kraft.controller.partition_change import PartitionChangeBuilder
from kraft.controller.quorum_partitions import is_quorum_topic
from kraft.controller.result import ControllerResult
from kraft.metadata.configs import MIN_INSYNC_REPLICAS, quoted
from kraft.metadata.delta import check_partition, merge_partition_change
from kraft.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from kraft.metadata.partition_index import sorted_keys
from kraft.metadata.records import NO_LEADER, MetadataRecord, PartitionChangeRecord
from storage.errors import ErrorCode

_QUORUM_REFUSED = (
    "a quorum-mode partition cannot be reassigned: its replicas are its Raft group's voters"
)

Verdict = tuple[ErrorCode, str, PartitionChangeRecord | None]


def reject_alter_partition_reassignments(
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse | None:
    """POLICY_VIOLATION (request level) when the request names more partitions than one
    operation may write records (`kraft.controller.limits`); None when in bounds."""
    count = sum(len(t.partitions) for t in request.topics)
    if count <= MAX_RECORDS_PER_USER_OP:
        return None
    return AlterPartitionReassignmentsResponse(
        error_code=ErrorCode.POLICY_VIOLATION,
        error_message=(
            f"the request would write more than {MAX_RECORDS_PER_USER_OP} metadata records "
            f"(at least {count})"
        ),
    )


def handle_alter_partition_reassignments(
    image: MetadataImage, request: AlterPartitionReassignmentsRequest
) -> ControllerResult[AlterPartitionReassignmentsResponse]:
    """Start, replace or cancel the reassignment of each named partition (one record each).

    Per partition: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (quorum-mode topic, or a
    partition named twice), INVALID_REPLICA_ASSIGNMENT (an empty or duplicate target, an
    unregistered broker, a cancel that would shrink the ISR below min.insync.replicas),
    INVALID_REPLICATION_FACTOR (a target smaller than min.insync.replicas),
    NO_REASSIGNMENT_IN_PROGRESS (a cancel of a partition that is not being reassigned).
    """
    rejection = reject_alter_partition_reassignments(request)
    if rejection is not None:
        return ControllerResult(records=(), response=rejection)
    records: list[MetadataRecord] = []
    responses: list[ReassignableTopicResponse] = []
    seen: set[tuple[str, int]] = set()
    for topic_request in request.topics:
        results: list[ReassignablePartitionResponse] = []
        topic = image.topic(topic_request.name)
        for p in topic_request.partitions:
            key = (topic_request.name, p.partition_index)
            if key in seen:
                code, message, record = ErrorCode.INVALID_REQUEST, "partition named twice", None
            else:
                seen.add(key)
                code, message, record = _alter_one(image, topic, topic_request.name, p)
            if record is not None:
                records.append(record)
            results.append(
                ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=code, error_message=message
                )
            )
        responses.append(
            ReassignableTopicResponse(name=topic_request.name, partitions=tuple(results))
        )
    return ControllerResult(
        records=tuple(records),
        response=AlterPartitionReassignmentsResponse(responses=tuple(responses)),
    )


def _alter_one(
    image: MetadataImage, topic: TopicImage | None, name: str, p: ReassignablePartition
) -> Verdict:
    partition = None if topic is None else topic.partitions.get(p.partition_index)
    if topic is None or partition is None:
        message = f"unknown partition {quoted(name)}-{p.partition_index}"
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message, None
    if is_quorum_topic(image, topic.name):
        return ErrorCode.INVALID_REQUEST, _QUORUM_REFUSED, None
    if p.replicas is None:
        return cancel_reassignment(image, topic, p.partition_index, partition)
    return start_reassignment(image, topic, p.partition_index, partition, p.replicas)


def _min_isr(image: MetadataImage, topic: TopicImage) -> int:
    return int(image.topic_config(topic.name, MIN_INSYNC_REPLICAS))


def _ids(ids: Iterable[int], limit: int = 10) -> str:
    """Broker ids for an error message, cut to ``limit`` of them (never echo unbounded input)."""
    listed = list(ids)
    if len(listed) <= limit:
        return str(listed)
    return f"{listed[:limit]}... ({len(listed)} ids)"


def start_reassignment(
    image: MetadataImage,
    topic: TopicImage,
    index: int,
    partition: PartitionRegistration,
    target: tuple[int, ...],
) -> Verdict:
    """Validate ``target`` and build the record that starts (or replaces) the reassignment;
    when every target replica already is in the ISR, the record completes it at once."""
    where = f"{topic.name}-{index}"
    if not target:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"{where}: the target is empty", None
    if len(set(target)) != len(target):
        message = f"{where}: the target {_ids(target)} has duplicate brokers"
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, message, None
    unknown = [b for b in target if image.broker(b) is None]
    if unknown:
        message = f"{where}: the target names brokers that are not registered: {_ids(unknown)}"
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, message, None
    min_isr = _min_isr(image, topic)
    if len(target) < min_isr:
        message = (
            f"{where}: the target has {len(target)} replicas, fewer than "
            f"min.insync.replicas={min_isr}"
        )
        return ErrorCode.INVALID_REPLICATION_FACTOR, message, None
    current = partition.replicas
    if target == current and not partition.is_reassigning:
        return ErrorCode.NONE, "", None  # nothing to move (Kafka answers NONE too)
    target_set, current_set = set(target), set(current)
    removing = tuple(r for r in current if r not in target_set)
    adding = tuple(r for r in target if r not in current_set)
    started = replace(
        partition,
        replicas=tuple(target) + removing,
        adding_replicas=adding,
        removing_replicas=removing,
    )
    final = _completed(image, topic, index, started) or started
    return ErrorCode.NONE, "", _change_record(topic.topic_id, index, partition, final)


def cancel_reassignment(
    image: MetadataImage, topic: TopicImage, index: int, partition: PartitionRegistration
) -> Verdict:
    """Build the record that reverts to the original replicas (Kafka's
    ``PartitionReassignmentRevert``), or refuse when that would shrink the ISR below
    min.insync.replicas or leave no eligible leader."""
    where = f"{topic.name}-{index}"
    if not partition.is_reassigning:
        message = f"{where} has no reassignment in progress"
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, message, None
    adding = set(partition.adding_replicas)
    isr = tuple(r for r in partition.isr if r not in adding)
    floor = min(_min_isr(image, topic), len(partition.isr))
    if len(isr) < floor:
        message = (
            f"{where}: cancelling now would shrink the ISR {_ids(partition.isr)} to "
            f"{_ids(isr)}, below min.insync.replicas; retry once the original replicas are "
            "back in sync"
        )
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, message, None
    reverted = replace(
        partition,
        replicas=partition.original_replicas,
        isr=isr,
        adding_replicas=(),
        removing_replicas=(),
    )
    final = _with_leader(image, topic, index, partition, reverted)
    if final is None:
        message = f"{where}: no original replica in the ISR {_ids(isr)} can lead"
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, message, None
    return ErrorCode.NONE, "", _change_record(topic.topic_id, index, partition, final)


def complete_reassignment(
    image: MetadataImage, topic: TopicImage, index: int
) -> PartitionChangeRecord | None:
    """The record that completes the reassignment of ``topic``-``index`` if it can complete
    now (every target replica in the ISR, min.insync.replicas kept, a leader available)."""
    partition = topic.partitions.get(index)
    if partition is None or not partition.is_reassigning:
        return None
    final = _completed(image, topic, index, partition)
    if final is None:
        return None
    return _change_record(topic.topic_id, index, partition, final)


def with_completed_reassignments(
    pending: MetadataImage,
    next_offset: int,
    result: ControllerResult[AlterPartitionResponse],
    log: FilteringBoundLogger,
) -> ControllerResult[AlterPartitionResponse]:
    """An AlterPartition ``result`` (to be appended at ``next_offset`` onto ``pending``) with
    the completion of every reassignment its ISR changes made complete, in the same batch
    (Kafka's builder does it in the same record; the response still reports the ISR change,
    and the leader learns the rest from metadata)."""
    touched = [
        (r.topic_id, r.partition)
        for r in result.records
        if isinstance(r, PartitionChangeRecord)
        and r.isr is not None
        and (p := pending.partition(r.topic_id, r.partition)) is not None
        and p.is_reassigning
    ]
    if not touched:
        return result
    completions = complete_reassignments(pending.apply_batch(result.records, next_offset), touched)
    for record in completions:
        log.info(
            "partition_reassignment_completed",
            topic_id=record.topic_id,
            partition=record.partition,
            replicas=None if record.replicas is None else list(record.replicas),
            leader=record.leader,
        )
    if not completions:
        return result
    return ControllerResult(records=(*result.records, *completions), response=result.response)


def complete_reassignments(
    image: MetadataImage, partitions: Iterable[tuple[str, int]] | None = None
) -> list[PartitionChangeRecord]:
    """`complete_reassignment` for each (topic id, partition) named, or for every partition
    being reassigned (``None``: a scan, when a controller becomes active)."""
    if partitions is None:
        partitions = sorted_keys(image.partition_index.reassigning, image.topics_by_id)
    records: list[PartitionChangeRecord] = []
    for topic_id, index in partitions:
        topic = image.topic_by_id(topic_id)
        if topic is None or is_quorum_topic(image, topic.name):
            continue
        record = complete_reassignment(image, topic, index)
        if record is not None:
            records.append(record)
    return records


def _completed(
    image: MetadataImage, topic: TopicImage, index: int, partition: PartitionRegistration
) -> PartitionRegistration | None:
    """The registration after completing ``partition``'s reassignment, or None if it cannot
    complete yet."""
    if not partition.is_reassigning:
        return None
    target = partition.target_replicas
    if not set(target) <= set(partition.isr):
        return None  # KIP-455: the adding replicas must be in sync first
    removing = set(partition.removing_replicas)
    isr = tuple(r for r in partition.isr if r not in removing)
    if len(isr) < min(_min_isr(image, topic), len(partition.isr)):
        return None  # min.insync.replicas was raised above the target's size: wait
    done = replace(partition, replicas=target, isr=isr, adding_replicas=(), removing_replicas=())
    return _with_leader(image, topic, index, partition, done)


def _with_leader(
    image: MetadataImage,
    topic: TopicImage,
    index: int,
    before: PartitionRegistration,
    after: PartitionRegistration,
) -> PartitionRegistration | None:
    """``after`` with a leader from its ISR: the current one if it stays, else the first
    eligible replica in ``after.replicas`` order (the election rules of
    `kraft.controller.partition_change`); None when a partition that has a leader would lose
    it."""
    if before.leader != NO_LEADER and before.leader in after.isr:
        return after
    candidate = replace(after, leader=NO_LEADER)
    leader, unclean = PartitionChangeBuilder(
        candidate, topic.topic_id, index, is_acceptable_leader=image.is_active_broker
    ).elect_leader()
    if unclean or (leader == NO_LEADER and before.leader != NO_LEADER):
        return None
    return replace(after, leader=leader)


def _change_record(
    topic_id: str, index: int, before: PartitionRegistration, after: PartitionRegistration
) -> PartitionChangeRecord | None:
    """The record that turns ``before`` into ``after`` (replicas, ISR, leader, reassignment
    fields; None when they are equal), checked against the partition invariants."""
    record = PartitionChangeRecord(
        topic_id=topic_id,
        partition=index,
        replicas=None if after.replicas == before.replicas else after.replicas,
        isr=None if after.isr == before.isr else after.isr,
        leader=None if after.leader == before.leader else after.leader,
        adding_replicas=(
            None if after.adding_replicas == before.adding_replicas else after.adding_replicas
        ),
        removing_replicas=(
            None if after.removing_replicas == before.removing_replicas else after.removing_replicas
        ),
    )
    if (
        record.replicas is None
        and record.isr is None
        and record.leader is None
        and record.adding_replicas is None
        and record.removing_replicas is None
    ):
        return None
    # Fail here, at decision time, rather than on replay on every node.
    check_partition(merge_partition_change(before, record), f"{topic_id}-{index}")
    return record


def handle_list_partition_reassignments(
    image: MetadataImage, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    """The reassignments in progress, of the named partitions or of all (Kafka's
    ``listPartitionReassignments``; a named partition that is not being reassigned, or does
    not exist, is left out)."""
    found: dict[str, list[OngoingPartitionReassignment]] = {}
    if request.partitions is None:
        candidates = [(t.name, i, p) for t, i, p in image.iter_partitions()]
    else:
        candidates = []
        for tp in request.partitions:
            p = image.partition_by_name(tp)
            if p is not None:
                candidates.append((tp.topic, tp.partition, p))
    for name, index, p in candidates:
        if p.is_reassigning:
            found.setdefault(name, []).append(
                OngoingPartitionReassignment(
                    partition_index=index,
                    replicas=p.replicas,
                    adding_replicas=p.adding_replicas,
                    removing_replicas=p.removing_replicas,
                )
            )
    topics = tuple(
        OngoingTopicReassignment(name=name, partitions=tuple(ps))
        for name, ps in sorted(found.items())
    )
    return ListPartitionReassignmentsResponse(topics=topics)


__all__ = [
    "cancel_reassignment",
    "complete_reassignment",
    "complete_reassignments",
    "handle_alter_partition_reassignments",
    "handle_list_partition_reassignments",
    "reject_alter_partition_reassignments",
    "start_reassignment",
]
