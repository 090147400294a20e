"""Topic decisions: CreateTopics, DeleteTopics and CreatePartitions.

Pure functions of the controller's pending `MetadataImage`. Each request becomes one atomic
batch: CreateTopics writes ``TopicRecord, ConfigRecord..., PartitionRecord...`` per topic (as
Kafka's ``ReplicationControlManager.createTopic`` does), so a topic never appears half-made.

Validation order per topic (Kafka's): duplicate in the request (INVALID_REQUEST), name
(INVALID_TOPIC_EXCEPTION), existence (TOPIC_ALREADY_EXISTS), a ``.``/``_`` collision with an
existing topic (INVALID_TOPIC_EXCEPTION), configs (INVALID_CONFIG), then the partition layout
(INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT).

Before any of that, the request as a whole is bounded (`kraft.controller.limits`): at most
10,000 partitions added and 10,000 records written per request (POLICY_VIOLATION), so no
number inside a request can make placement run long. Error messages quote names with
`quoted` (cut to 100 characters).
"""

from __future__ import annotations

import random
import re
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kraft.controller.limits import (
    reject_create_partitions,
    reject_create_topics,
    reject_delete_topics,
    reject_new_partitions_beyond_batch,
)
from kraft.controller.messages import (
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kraft.controller.placement import UsableBroker, place_replicas
from kraft.controller.quorum_partitions import is_quorum_topic
from kraft.controller.result import ControllerResult
from kraft.metadata.configs import (
    MIN_INSYNC_REPLICAS,
    QUORUM_MODE,
    REPLICATION_MODE,
    check_min_insync_replicas,
    check_quorum_topic_config,
    quoted,
    validate_config,
)
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import (
    NO_LEADER,
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kraft.types import INTERNAL_TOPICS
from storage.errors import ErrorCode, KraftError

TOPIC_NAME_MAX_LENGTH: Final = 249
_LEGAL_TOPIC_NAME: Final = re.compile(r"[a-zA-Z0-9._-]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDefaults:
    """``num.partitions`` and ``default.replication.factor``, used when a request says -1."""

    num_partitions: int = 1
    replication_factor: int = 1


class _Rejected(Exception):
    """Internal: one topic's validation failed with ``code``."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


CLUSTER_METADATA_TOPIC = "__cluster_metadata"
"""Kafka's ``Topic.CLUSTER_METADATA_TOPIC_NAME``: the name of the metadata log, never a topic."""


def validate_topic_name(name: str) -> str | None:
    """Kafka's ``Topic.validate``: why ``name`` is illegal, or ``None``."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > TOPIC_NAME_MAX_LENGTH:
        return f"topic name is longer than {TOPIC_NAME_MAX_LENGTH} characters"
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        return f"topic name {quoted(name)} contains characters other than [a-zA-Z0-9._-]"
    return None


def _collision(image: MetadataImage, name: str) -> str | None:
    # Kafka: '.' and '_' collide in metric names, so "a.b" and "a_b" cannot both exist.
    normalized = name.replace(".", "_")
    for existing in image.topic_ids_by_name:
        if existing != name and existing.replace(".", "_") == normalized:
            return f"topic {name!r} collides with existing topic {existing!r}"
    return None


def new_topic_id(image: MetadataImage, rng: random.Random) -> str:
    """A fresh random (version 4) UUID drawn from the injected ``rng``."""
    while True:
        topic_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if topic_id not in image.topics_by_id:
            return topic_id


def usable_brokers(image: MetadataImage) -> list[UsableBroker]:
    """Brokers placement may use: active ones (unfenced, not shutting down)."""
    return [
        UsableBroker(broker_id=b, rack=image.brokers[b].rack) for b in image.active_broker_ids()
    ]


def _check_manual_assignment(
    image: MetadataImage, assignments: Sequence[Sequence[int]], first_partition: int
) -> None:
    for offset, replicas in enumerate(assignments):
        index = first_partition + offset
        if not replicas:
            raise _Rejected(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {index}: no replicas")
        if len(replicas) > len(image.brokers):
            # Checked first: the checks below are as long as the list.
            raise _Rejected(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"partition {index}: {len(replicas)} replicas but only "
                f"{len(image.brokers)} registered brokers",
            )
        if len(set(replicas)) != len(replicas):
            raise _Rejected(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"partition {index}: duplicate replicas {list(replicas)}",
            )
        unknown = [r for r in replicas if image.broker(r) is None]
        if unknown:
            raise _Rejected(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"partition {index}: brokers {unknown} are not registered",
            )
        if not any(image.is_active_broker(r) for r in replicas):
            raise _Rejected(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"partition {index}: every replica is fenced or shutting down",
            )


def _partition_records(
    image: MetadataImage,
    topic_id: str,
    first_partition: int,
    assignments: Sequence[Sequence[int]],
    *,
    quorum: bool = False,
) -> list[PartitionRecord]:
    """New partitions; a quorum-mode one has every replica as its "ISR" (the Raft voters) and
    no leader until its group elects one (`kraft.controller.quorum_partitions`)."""
    records = []
    for offset, replicas in enumerate(assignments):
        if quorum:
            isr, leader = tuple(replicas), NO_LEADER
        else:
            isr = tuple(r for r in replicas if image.is_active_broker(r))
            leader = isr[0]
        records.append(
            PartitionRecord(
                topic_id=topic_id,
                partition=first_partition + offset,
                replicas=tuple(replicas),
                isr=isr,
                leader=leader,
            )
        )
    return records


def _place(
    image: MetadataImage, count: int, replication_factor: int, first: int, rng: random.Random
) -> list[tuple[int, ...]]:
    try:
        return place_replicas(
            usable_brokers(image), count, replication_factor, start_partition_id=first, rng=rng
        )
    except KraftError as exc:
        raise _Rejected(exc.code, exc.message) from None


def _from_live_broker(image: MetadataImage, request: CreateTopicsRequest) -> bool:
    """The request says it comes from a registered, unfenced broker in its current epoch."""
    if request.broker_id is None or request.broker_epoch is None:
        return False
    broker = image.broker(request.broker_id)
    return broker is not None and not broker.fenced and broker.broker_epoch == request.broker_epoch


def _create_one(
    image: MetadataImage,
    topic: CreatableTopic,
    rng: random.Random,
    defaults: TopicDefaults,
    *,
    internal_allowed: bool = False,
) -> tuple[list[MetadataRecord], CreatableTopicResult]:
    if (problem := validate_topic_name(topic.name)) is not None:
        raise _Rejected(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    if topic.name == CLUSTER_METADATA_TOPIC:
        # Kafka's ControllerApis: the metadata log is no topic (its directory sits beside the
        # partition directories of a broker's log.dirs).
        raise _Rejected(
            ErrorCode.INVALID_REQUEST, f"creation of internal topic {topic.name} is prohibited"
        )
    if topic.name in INTERNAL_TOPICS and not internal_allowed:
        # Kafka's brokers create __consumer_offsets themselves on first use, with its own
        # partition count and configs, which the group coordinator relies on (kraft's: no
        # retention, as only coordinator snapshots move its log start). A user's CreateTopics
        # for it is refused; a broker's names the broker and its current epoch.
        # TODO(#17): once callers are authenticated, require the broker's principal too.
        raise _Rejected(
            ErrorCode.INVALID_REQUEST,
            f"creation of internal topic {topic.name} is prohibited: the brokers create it on "
            f"first use",
        )
    if image.topic(topic.name) is not None:
        raise _Rejected(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists")
    if (problem := _collision(image, topic.name)) is not None:
        raise _Rejected(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    for key, value in topic.configs.items():
        if (problem := validate_config(ConfigResourceType.TOPIC, key, value)) is not None:
            raise _Rejected(ErrorCode.INVALID_CONFIG, problem)
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise _Rejected(
                ErrorCode.INVALID_REQUEST,
                "give either assignments or num_partitions/replication_factor, not both",
            )
        _check_manual_assignment(image, topic.assignments, 0)
        assignments: Sequence[Sequence[int]] = topic.assignments
    else:
        count = defaults.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        rf = (
            defaults.replication_factor
            if topic.replication_factor == -1
            else topic.replication_factor
        )
        assignments = _place(image, count, rf, 0, rng)
    problem = check_min_insync_replicas(topic.configs.get(MIN_INSYNC_REPLICAS), len(assignments[0]))
    mode = topic.configs.get(REPLICATION_MODE, "")
    for key, value in sorted(topic.configs.items()):
        problem = problem or check_quorum_topic_config(key, value, mode)
    if problem is not None:
        raise _Rejected(ErrorCode.INVALID_CONFIG, problem)
    topic_id = new_topic_id(image, rng)
    records: list[MetadataRecord] = [TopicRecord(name=topic.name, topic_id=topic_id)]
    records.extend(
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name=topic.name,
            name=key,
            value=topic.configs[key],
        )
        for key in sorted(topic.configs)
    )
    quorum = topic.configs.get(REPLICATION_MODE) == QUORUM_MODE
    records.extend(_partition_records(image, topic_id, 0, assignments, quorum=quorum))
    result = CreatableTopicResult(
        name=topic.name,
        topic_id=topic_id,
        num_partitions=len(assignments),
        replication_factor=len(assignments[0]),
    )
    return records, result


def handle_create_topics(
    image: MetadataImage,
    request: CreateTopicsRequest,
    *,
    rng: random.Random,
    defaults: TopicDefaults = TopicDefaults(),
) -> ControllerResult[CreateTopicsResponse]:
    """Create topics; each topic succeeds or fails on its own, all records form one batch."""
    rejection = reject_create_topics(request, defaults.num_partitions)
    if rejection is not None:
        return ControllerResult(records=(), response=rejection)
    counts = Counter(t.name for t in request.topics)
    internal_allowed = _from_live_broker(image, request)
    working = image
    records: list[MetadataRecord] = []
    results: list[CreatableTopicResult] = []
    last = len(request.topics) - 1
    for position, topic in enumerate(request.topics):
        try:
            if counts[topic.name] > 1:
                raise _Rejected(
                    ErrorCode.INVALID_REQUEST, f"topic {quoted(topic.name)} appears more than once"
                )
            topic_records, result = _create_one(
                working, topic, rng, defaults, internal_allowed=internal_allowed
            )
        except _Rejected as rejected:
            results.append(
                CreatableTopicResult(
                    name=topic.name, error_code=rejected.code, error_message=rejected.message
                )
            )
            continue
        if request.validate_only:
            result = CreatableTopicResult(
                name=topic.name,
                num_partitions=result.num_partitions,
                replication_factor=result.replication_factor,
            )
        else:
            records.extend(topic_records)
            if position < last:
                # Later topics of the same request must see this one (collisions, ids). NB:
                # not after the last one: the core applies the whole batch to its pending
                # image anyway (a second pass cost ~35% of deciding a 1,000-partition create).
                working = working.apply_batch(topic_records, base_offset=working.last_offset + 1)
        results.append(result)
    return ControllerResult(
        records=tuple(records), response=CreateTopicsResponse(topics=tuple(results))
    )


def handle_delete_topics(
    image: MetadataImage, request: DeleteTopicsRequest
) -> ControllerResult[DeleteTopicsResponse]:
    """Delete topics by name (UNKNOWN_TOPIC_OR_PARTITION) and by id (UNKNOWN_TOPIC_ID)."""
    rejection = reject_delete_topics(request)
    if rejection is not None:
        return ControllerResult(records=(), response=rejection)
    removed: set[str] = set()
    records: list[MetadataRecord] = []
    results: list[DeletableTopicResult] = []

    def remove(topic_id: str) -> None:
        if topic_id not in removed:
            removed.add(topic_id)
            records.append(RemoveTopicRecord(topic_id=topic_id))

    for name in request.topic_names:
        topic = image.topic(name)
        if topic is None:
            results.append(
                DeletableTopicResult(
                    name=name,
                    topic_id="",
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=f"unknown topic {quoted(name)}",
                )
            )
            continue
        remove(topic.topic_id)
        results.append(DeletableTopicResult(name=name, topic_id=topic.topic_id))
    for topic_id in request.topic_ids:
        topic = image.topic_by_id(topic_id)
        if topic is None:
            results.append(
                DeletableTopicResult(
                    name=None,
                    topic_id=topic_id,
                    error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                    error_message=f"unknown topic id {quoted(topic_id)}",
                )
            )
            continue
        remove(topic_id)
        results.append(DeletableTopicResult(name=topic.name, topic_id=topic_id))
    return ControllerResult(
        records=tuple(records), response=DeleteTopicsResponse(topics=tuple(results))
    )


def _grow_one(
    image: MetadataImage, request: CreatePartitionsTopic, rng: random.Random
) -> list[MetadataRecord]:
    topic = image.topic(request.name)
    if topic is None:
        raise _Rejected(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {quoted(request.name)}"
        )
    current = len(topic.partitions)
    if request.count < current:
        raise _Rejected(
            ErrorCode.INVALID_PARTITIONS,
            f"topic currently has {current} partitions, more than the requested {request.count}",
        )
    if request.count == current:
        raise _Rejected(ErrorCode.INVALID_PARTITIONS, f"topic already has {current} partitions")
    added = request.count - current
    replication_factor = len(topic.partitions[0].replicas)
    if request.assignments is not None:
        if len(request.assignments) != added:
            raise _Rejected(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"{len(request.assignments)} assignments for {added} new partitions",
            )
        if any(len(a) != replication_factor for a in request.assignments):
            raise _Rejected(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"inconsistent replication factor: the topic has {replication_factor}",
            )
        _check_manual_assignment(image, request.assignments, current)
        assignments: Sequence[Sequence[int]] = request.assignments
    else:
        assignments = _place(image, added, replication_factor, current, rng)
    quorum = is_quorum_topic(image, topic.name)
    return list(_partition_records(image, topic.topic_id, current, assignments, quorum=quorum))


def handle_create_partitions(
    image: MetadataImage, request: CreatePartitionsRequest, *, rng: random.Random
) -> ControllerResult[CreatePartitionsResponse]:
    """Add partitions to existing topics (never removes any)."""
    rejection = reject_create_partitions(request)
    if rejection is None:
        rejection = reject_new_partitions_beyond_batch(image, request)
    if rejection is not None:
        return ControllerResult(records=(), response=rejection)
    counts = Counter(t.name for t in request.topics)
    records: list[MetadataRecord] = []
    results: list[CreatePartitionsTopicResult] = []
    for topic in request.topics:
        try:
            if counts[topic.name] > 1:
                raise _Rejected(
                    ErrorCode.INVALID_REQUEST, f"topic {quoted(topic.name)} appears more than once"
                )
            topic_records = _grow_one(image, topic, rng)
        except _Rejected as rejected:
            results.append(
                CreatePartitionsTopicResult(
                    name=topic.name, error_code=rejected.code, error_message=rejected.message
                )
            )
            continue
        if not request.validate_only:
            records.extend(topic_records)
        results.append(CreatePartitionsTopicResult(name=topic.name))
    return ControllerResult(
        records=tuple(records), response=CreatePartitionsResponse(results=tuple(results))
    )


__all__ = [
    "TOPIC_NAME_MAX_LENGTH",
    "TopicDefaults",
    "handle_create_partitions",
    "handle_create_topics",
    "handle_delete_topics",
    "new_topic_id",
    "usable_brokers",
    "validate_topic_name",
]
