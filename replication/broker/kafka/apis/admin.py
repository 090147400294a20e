"""The Kafka adapter's admin handlers: topics (CreateTopics, DeleteTopics, CreatePartitions),
leaders and replicas (ElectLeaders, Alter/ListPartitionReassignments), DescribeTopicPartitions,
DescribeLogDirs and DescribeProducers; in the same table (`ADMIN_HANDLERS`), the config APIs of
`replication.broker.kafka.apis.configs`, the ACL APIs of
`replication.broker.kafka.apis.acls` and UpdateFeatures
(`replication.broker.kafka.apis.features`).

Shaped as `replication.broker.kafka.apis.table`. The controller's APIs go to the active
controller through the broker API's ``forward`` (authorized there first, KIP-590), as kraft's
own dataclasses (`kraft.controller.messages`, ...); ``forward`` raises for a request refused
whole or a controller out of reach, and `replication.broker.kafka.apis.forwarding` turns that into
Kafka's answer: the code of each resource. DescribeTopicPartitions (from Metadata),
DescribeLogDirs and DescribeProducers are answered by this broker, from what it holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from kraft.controller.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignableTopic,
)
from kraft.types import INTERNAL_TOPICS, TopicPartition
from replication.broker.api import RequestContext
from replication.broker.kafka.api import ApiSpec, KafkaBrokerApi, Response
from replication.broker.kafka.apis.acls import ACL_HANDLERS
from replication.broker.kafka.apis.configs import CONFIG_HANDLERS
from replication.broker.kafka.apis.features import FEATURE_HANDLERS
from replication.broker.kafka.apis.forwarding import await_metadata, error, forward, forward_parts
from replication.broker.kafka.entities import millis
from replication.broker.kafka.frames import Request
from replication.messages import (
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    MetadataRequest,
    MetadataTopic,
    TopicPartitions,
)
from storage.errors import ErrorCode


def _duplicates(names: Sequence[Any]) -> set[Any]:
    return {n for n, count in Counter(names).items() if count > 1}


def _exists(topic: MetadataTopic | None) -> bool:
    return topic is not None


def _gone(topic: MetadataTopic | None) -> bool:
    return topic is None


def _with_partitions(count: int) -> Callable[[MetadataTopic | None], bool]:
    return lambda topic: topic is not None and len(topic.partitions) >= count


# -- CreateTopics ---------------------------------------------------------------------------------


def creatable_topic(topic: Any) -> CreatableTopic | tuple[int, str]:
    """kraft's `CreatableTopic` of a kio one, or (code, why) for one Kafka refuses as sent."""
    assignments: tuple[tuple[int, ...], ...] = ()
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return (
                ErrorCode.INVALID_REQUEST,
                "both num_partitions or replication_factor and a replica assignment were set",
            )
        by_index = {
            int(a.partition_index): tuple(int(b) for b in a.broker_ids) for a in topic.assignments
        }
        if sorted(by_index) != list(range(len(topic.assignments))):
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "the assigned partitions are not numbered consecutively from 0",
            )
        assignments = tuple(by_index[i] for i in range(len(by_index)))
    configs = {}
    for c in topic.configs:
        if c.value is None:
            return ErrorCode.INVALID_CONFIG, f"null value for the config {c.name!r}"
        configs[c.name] = c.value
    return CreatableTopic(
        name=topic.name,
        num_partitions=int(topic.num_partitions),
        replication_factor=int(topic.replication_factor),
        assignments=assignments,
        configs=configs,
    )


async def handle_create_topics(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    duplicates = _duplicates([t.name for t in body.topics])
    results: dict[str, dict[str, Any]] = {}
    wanted: list[CreatableTopic] = []
    for t in body.topics:
        if t.name in duplicates:
            results[t.name] = {
                "name": t.name,
                **error(ErrorCode.INVALID_REQUEST, "the topic is named twice in the request"),
            }
            continue
        converted = creatable_topic(t)
        if isinstance(converted, tuple):
            results[t.name] = {"name": t.name, **error(*converted)}
        else:
            wanted.append(converted)
    for part, outcome in await forward_parts(
        api,
        ctx,
        wanted,
        lambda ts: CreateTopicsRequest(topics=tuple(ts), validate_only=body.validate_only),
    ):
        if outcome.response is None:
            for t in part:
                results[t.name] = {"name": t.name, **error(outcome.code, outcome.message)}
            continue
        answer: CreateTopicsResponse = outcome.response
        for r in answer.topics:
            ok = r.error_code == ErrorCode.NONE
            results[r.name] = {
                "name": r.name,
                "topic_id": r.topic_id or None,
                **error(r.error_code, r.error_message),
                "num_partitions": r.num_partitions if ok else -1,
                "replication_factor": r.replication_factor if ok else -1,
                # NB: Kafka lists the topic's whole config here (v5+); kraft's admin clients
                # describe it when they need it, so none are listed.
                "configs": [] if ok else None,
            }
    if not body.validate_only:
        created = [n for n, r in results.items() if r["error_code"] == ErrorCode.NONE]
        await await_metadata(api, ctx, dict.fromkeys(created, _exists), millis(body.timeout) / 1000)
    return {"topics": [results[t.name] for t in body.topics if t.name in results]}


# -- DeleteTopics ---------------------------------------------------------------------------------


async def handle_delete_topics(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    states = getattr(body, "topics", None)
    if states is None:  # v1-v5: names only
        named: list[tuple[str | None, str | None]] = [(n, None) for n in body.topic_names]
    else:  # v6: a name or an id each (KIP-516)
        named = [
            (s.name, None)
            if s.name is not None
            else (None, str(s.topic_id) if s.topic_id else None)
            for s in states
        ]
    results: list[dict[str, Any]] = []
    valid = []
    for name, topic_id in named:
        if name is None and topic_id is None:
            results.append(
                {"name": None, **error(ErrorCode.INVALID_REQUEST, "neither a name nor an id")}
            )
        else:
            valid.append((name, topic_id))

    def request_of(ts: Sequence[tuple[str | None, str | None]]) -> DeleteTopicsRequest:
        return DeleteTopicsRequest(
            topic_names=tuple(n for n, _ in ts if n is not None),
            topic_ids=tuple(i for n, i in ts if n is None and i is not None),
        )

    for part, outcome in await forward_parts(api, ctx, valid, request_of):
        if outcome.response is None:
            results.extend(
                {"name": n, "topic_id": i, **error(outcome.code, outcome.message)} for n, i in part
            )
            continue
        answer: DeleteTopicsResponse = outcome.response
        results.extend(
            {
                "name": r.name,
                "topic_id": r.topic_id or None,
                **error(r.error_code, r.error_message),
            }
            for r in answer.topics
        )
    deleted = [r["name"] for r in results if r["error_code"] == ErrorCode.NONE and r["name"]]
    await await_metadata(api, ctx, dict.fromkeys(deleted, _gone), millis(body.timeout) / 1000)
    return {"responses": results}


# -- CreatePartitions -----------------------------------------------------------------------------


async def handle_create_partitions(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    duplicates = _duplicates([t.name for t in body.topics])
    results: list[dict[str, Any]] = [
        {"name": n, **error(ErrorCode.INVALID_REQUEST, "the topic is named twice")}
        for n in sorted(duplicates)
    ]
    wanted = [
        CreatePartitionsTopic(
            name=t.name,
            count=int(t.count),
            assignments=None
            if t.assignments is None
            else tuple(tuple(int(b) for b in a.broker_ids) for a in t.assignments),
        )
        for t in body.topics
        if t.name not in duplicates
    ]
    for part, outcome in await forward_parts(
        api,
        ctx,
        wanted,
        lambda ts: CreatePartitionsRequest(topics=tuple(ts), validate_only=body.validate_only),
    ):
        if outcome.response is None:
            results.extend({"name": t.name, **error(outcome.code, outcome.message)} for t in part)
            continue
        answer: CreatePartitionsResponse = outcome.response
        results.extend(
            {"name": r.name, **error(r.error_code, r.error_message)} for r in answer.results
        )
    if not body.validate_only:
        counts = {t.name: t.count for t in wanted}
        grown = {
            r["name"]: _with_partitions(counts[r["name"]])
            for r in results
            if r["error_code"] == ErrorCode.NONE and r["name"] in counts
        }
        await await_metadata(api, ctx, grown, millis(body.timeout) / 1000)
    return {"results": results}


# -- ElectLeaders, reassignments ------------------------------------------------------------------


async def handle_elect_leaders(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    asked = body.topic_partitions
    partitions = (
        None
        if asked is None
        else tuple(TopicPartition(t.topic, int(p)) for t in asked for p in t.partitions)
    )
    try:
        election = ElectionType(int(getattr(body, "election_type", ElectionType.PREFERRED)))
    except ValueError:
        return {"error_code": ErrorCode.INVALID_REQUEST, "replica_election_results": []}
    outcome = await forward(
        api, ElectLeadersRequest(election_type=election, partitions=partitions), ctx
    )
    answer: ElectLeadersResponse | None = outcome.response
    if answer is None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return {
            "error_code": outcome.code,
            "replica_election_results": [
                {
                    "topic": topic,
                    "partition_result": [
                        {"partition_id": p, **error(outcome.code, outcome.message)} for p in ps
                    ],
                }
                for topic, ps in by_topic.items()
            ],
        }
    return {
        "error_code": answer.error_code,
        "replica_election_results": [
            {
                "topic": r.topic,
                "partition_result": [
                    {"partition_id": p.partition, **error(p.error_code, p.error_message)}
                    for p in r.partition_results
                ],
            }
            for r in answer.replica_election_results
        ],
    }


async def handle_alter_partition_reassignments(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    outcome = await forward(
        api,
        AlterPartitionReassignmentsRequest(
            topics=tuple(
                ReassignableTopic(
                    name=t.name,
                    partitions=tuple(
                        ReassignablePartition(
                            partition_index=int(p.partition_index),
                            replicas=None
                            if p.replicas is None
                            else tuple(int(b) for b in p.replicas),
                        )
                        for p in t.partitions
                    ),
                )
                for t in body.topics
            )
        ),
        ctx,
    )
    answer: AlterPartitionReassignmentsResponse | None = outcome.response
    if answer is None:
        return error(outcome.code, outcome.message) | {"responses": []}
    return {
        **error(answer.error_code, answer.error_message),
        "responses": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, **error(p.error_code, p.error_message)}
                    for p in t.partitions
                ],
            }
            for t in answer.responses
        ],
    }


async def handle_list_partition_reassignments(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    asked = request.body.topics
    outcome = await forward(
        api,
        ListPartitionReassignmentsRequest(
            partitions=None
            if asked is None
            else tuple(TopicPartition(t.name, int(p)) for t in asked for p in t.partition_indexes)
        ),
        ctx,
    )
    answer: ListPartitionReassignmentsResponse | None = outcome.response
    if answer is None:
        return error(outcome.code, outcome.message) | {"topics": []}
    return {
        **error(answer.error_code, answer.error_message),
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "replicas": p.replicas,
                        "adding_replicas": p.adding_replicas,
                        "removing_replicas": p.removing_replicas,
                    }
                    for p in t.partitions
                ],
            }
            for t in answer.topics
        ],
    }


# -- DescribeTopicPartitions ----------------------------------------------------------------------

AUTHORIZED_OPERATIONS_OMITTED: Final = -(2**31)
"""Kafka's "not asked for" value of ``topic_authorized_operations``."""


async def handle_describe_topic_partitions(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    """KIP-966's describe (the Java admin's describeTopics since 3.8): the topics asked for
    (none: every topic the caller may describe), sorted by name, at most
    ``response_partition_limit`` partitions, then a cursor where the next answer starts."""
    body = request.body
    names = sorted({t.name for t in body.topics})
    answer = await api.metadata(MetadataRequest(topics=tuple(names)), ctx)
    by_name = {t.name: t for t in answer.topics}
    if not names:
        names = sorted(by_name)
    cursor = body.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(1, int(body.response_partition_limit))
    topics: list[dict[str, Any]] = []
    next_cursor = None
    for name in names:
        topic = by_name.get(name)
        if topic is None or topic.error_code != ErrorCode.NONE:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic is None else topic.error_code
            topics.append({"error_code": code, "name": name, "topic_id": None, "partitions": []})
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        partitions = sorted(
            (p for p in topic.partitions if p.partition_index >= first),
            key=lambda p: p.partition_index,
        )
        if budget <= 0:
            next_cursor = {"topic_name": name, "partition_index": first}
            break
        if len(partitions) > budget:
            next_cursor = {
                "topic_name": name,
                "partition_index": partitions[budget].partition_index,
            }
            partitions = partitions[:budget]
        budget -= len(partitions)
        topics.append(
            {
                "error_code": ErrorCode.NONE,
                "name": name,
                "topic_id": topic.topic_id or None,
                "is_internal": name in INTERNAL_TOPICS,
                "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
                "partitions": [
                    {
                        "error_code": p.error_code,
                        "partition_index": p.partition_index,
                        "leader_id": p.leader_id,
                        "leader_epoch": p.leader_epoch,
                        "replica_nodes": p.replica_nodes,
                        "isr_nodes": p.isr_nodes,
                        # NB: lists, never null: the Java admin (4.x) streams over both.
                        "eligible_leader_replicas": [],
                        "last_known_elr": [],
                        "offline_replicas": p.offline_replicas,
                    }
                    for p in partitions
                ],
            }
        )
        if next_cursor is not None:
            break
    return {"topics": topics, "next_cursor": next_cursor}


# -- DescribeLogDirs, DescribeProducers (answered by this broker) ---------------------------------


async def handle_describe_log_dirs(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    asked = request.body.topics
    answer = await api.describe_log_dirs(
        DescribeLogDirsRequest(
            topics=None
            if asked is None
            else tuple(
                TopicPartitions(name=t.topic, partitions=tuple(int(p) for p in t.partitions))
                for t in asked
            )
        ),
        ctx,
    )
    if answer.error_code != ErrorCode.NONE:  # refused: CLUSTER DESCRIBE
        return {"error_code": answer.error_code, "results": []}
    topics: dict[str, list[dict[str, Any]]] = {}
    for p in answer.partitions:
        topics.setdefault(p.topic, []).append(
            {
                "partition_index": p.partition,
                "partition_size": p.size_bytes,
                "offset_lag": p.offset_lag,
                "is_future_key": False,
            }
        )
    return {
        "error_code": ErrorCode.NONE,
        "results": [
            {
                "error_code": ErrorCode.NONE,
                "log_dir": answer.log_dir,
                "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
                "total_bytes": answer.total_bytes,
                "usable_bytes": answer.usable_bytes,
            }
        ]
        if answer.log_dir
        else [],
    }


async def handle_describe_producers(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    asked = [(t.name, [int(p) for p in t.partition_indexes]) for t in request.body.topics]
    answer = await api.describe_producers(
        DescribeProducersRequest(
            topics=tuple(TopicPartitions(name=n, partitions=tuple(ps)) for n, ps in asked)
        ),
        ctx,
    )
    if answer.error_code != ErrorCode.NONE:  # refused whole: the code on every partition
        return {
            "topics": [
                {
                    "name": n,
                    "partitions": [
                        {"partition_index": p, **error(answer.error_code, answer.error_message)}
                        for p in ps
                    ],
                }
                for n, ps in asked
            ]
        }
    topics: dict[str, list[dict[str, Any]]] = {}
    for p in answer.partitions:
        topics.setdefault(p.topic, []).append(
            {
                "partition_index": p.partition,
                **error(p.error_code, None),
                "active_producers": [
                    {
                        "producer_id": d.producer_id,
                        "producer_epoch": d.producer_epoch,
                        "last_sequence": d.last_sequence,
                        "last_timestamp": d.last_timestamp_ms,
                        "coordinator_epoch": -1,  # the markers' epoch is not kept per producer
                        "current_txn_start_offset": d.current_txn_start_offset,
                    }
                    for d in p.producers
                ],
            }
        )
    return {"topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}


ADMIN_HANDLERS: Final[Mapping[int, ApiSpec]] = {
    19: ApiSpec("CreateTopics", 2, 7, handle_create_topics),
    20: ApiSpec("DeleteTopics", 1, 6, handle_delete_topics),
    37: ApiSpec("CreatePartitions", 0, 3, handle_create_partitions),
    43: ApiSpec("ElectLeaders", 0, 2, handle_elect_leaders),
    45: ApiSpec("AlterPartitionReassignments", 0, 0, handle_alter_partition_reassignments),
    46: ApiSpec("ListPartitionReassignments", 0, 0, handle_list_partition_reassignments),
    35: ApiSpec("DescribeLogDirs", 1, 4, handle_describe_log_dirs),
    61: ApiSpec("DescribeProducers", 0, 0, handle_describe_producers),
    75: ApiSpec("DescribeTopicPartitions", 0, 0, handle_describe_topic_partitions),
    **CONFIG_HANDLERS,
    **ACL_HANDLERS,
    **FEATURE_HANDLERS,
}
"""API key -> its `ApiSpec`: the admin rows of the Kafka listener's table."""

__all__ = ["ADMIN_HANDLERS"]
