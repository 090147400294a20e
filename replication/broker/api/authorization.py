"""Authorization in the broker API: `AccessGuard`'s decisions applied to the API dataclasses.

The rules (what each Kafka API needs: TOPIC WRITE for Produce, TOPIC READ and GROUP READ for
OffsetCommit, CLUSTER ALTER for ElectLeaders, ...) are `kraft.security.operations`'s, keyed by
API name; `AccessGuard.decide_api` applies them to a request. This module gives the answers
Kafka's KafkaApis gives, on the dataclasses:

- a request refused whole is answered in its own shape with the refusal's code
  (`refused_response`): TOPIC_AUTHORIZATION_FAILED on every partition of a Produce,
  GROUP_AUTHORIZATION_FAILED in a heartbeat's error code, CLUSTER_AUTHORIZATION_FAILED in a
  follower fetch's, ...;
- a request of which only some named topics are refused runs without them (`without_topics`)
  and gets TOPIC_AUTHORIZATION_FAILED for them in its answer (`answer_refused`);
- a listing (Metadata, ListGroups, OffsetFetch of every topic, DescribeCluster) is filtered to
  what the caller may DESCRIBE (`filter_listing`).

Pure: dataclasses in, dataclasses out; no transport.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from dataclasses import dataclass, replace
from typing import Any, Final

from kraft.controller.messages import (
    CreatableTopicResult,
    DeletableTopicResult,
    DeleteTopicsRequest,
)
from kraft.security.acls import AclOperation, ResourceType
from kraft.security.guard import Caller
from kraft.security.operations import Need
from replication.broker.api.context import RequestContext
from replication.group import PartitionResult
from replication.group.classic import DescribedGroup as ClassicDescribedGroup
from replication.messages import (
    Coordinator,
    DeletableGroupResult,
    DescribedGroup,
    FetchPartitionData,
    FetchTopicResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
    MetadataTopic,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    ProducePartitionResponse,
    ProduceTopicResponse,
)
from storage.errors import ErrorCode

TopicNameOf = Callable[[str], "str | None"]
May = Callable[[Need], bool]

_FAILED: Final = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_TLS: Final = frozenset({"SSL", "SASL_SSL"})


@dataclass(frozen=True, slots=True)
class Refused:
    """A request refused whole: Kafka's code (TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED)
    and why."""

    code: ErrorCode
    message: str


def caller_of(ctx: RequestContext) -> Caller:
    """The guard's `Caller` of a request context."""
    return Caller(ctx.principal, ctx.client_host, tls=ctx.security_protocol in _TLS)


# -- per topic ----------------------------------------------------------------------------------

PER_TOPIC: Final = frozenset(
    {
        "Produce",
        "Fetch",
        "ListOffsets",
        "OffsetCommit",
        "OffsetDelete",
        "CreateTopics",
        "DeleteTopics",
        "DescribeGroups",
        "ConsumerGroupDescribe",
        "DeleteGroups",
        "FindCoordinator",
    }
)
"""The APIs answered per topic (the group APIs per group, FindCoordinator per key; the others
are allowed or refused whole)."""


def without_topics(api: str, request: Any, refused: Set[str], topic_name: TopicNameOf) -> Any:
    """``request`` to ``api`` without the topics in ``refused``."""
    if api == "Produce":
        return replace(
            request, topic_data=tuple(t for t in request.topic_data if t.name not in refused)
        )
    if api == "Fetch":
        return replace(request, topics=tuple(t for t in request.topics if t.topic not in refused))
    if api in ("ListOffsets", "OffsetCommit", "CreateTopics"):
        return replace(request, topics=tuple(t for t in request.topics if t.name not in refused))
    if api == "OffsetDelete":
        return replace(
            request, partitions=tuple(tp for tp in request.partitions if tp[0] not in refused)
        )
    if api in ("DescribeGroups", "ConsumerGroupDescribe"):
        return replace(request, group_ids=tuple(g for g in request.group_ids if g not in refused))
    if api == "DeleteGroups":
        return replace(
            request, groups_names=tuple(g for g in request.groups_names if g not in refused)
        )
    if api == "FindCoordinator":
        return replace(
            request, coordinator_keys=tuple(k for k in request.coordinator_keys if k not in refused)
        )
    if api == "DeleteTopics":
        assert isinstance(request, DeleteTopicsRequest)
        return replace(
            request,
            topic_names=tuple(n for n in request.topic_names if n not in refused),
            topic_ids=tuple(i for i in request.topic_ids if topic_name(i) not in refused),
        )
    return request


def answer_refused(
    api: str,
    request: Any,
    refused: Set[str],
    response: Any,
    message: Callable[[str], str],
    topic_name: TopicNameOf,
    code: ErrorCode = _FAILED,
) -> Any:
    """``response`` with an entry answering ``code`` for each topic of ``request`` (the
    original) in ``refused``; ``message(topic)`` says why."""
    if api == "Produce":
        extra: tuple[Any, ...] = tuple(
            ProduceTopicResponse(
                name=t.name,
                partition_responses=tuple(
                    ProducePartitionResponse(
                        index=p.index, error_code=code, error_message=message(t.name)
                    )
                    for p in t.partition_data
                ),
            )
            for t in request.topic_data
            if t.name in refused
        )
        return replace(response, responses=(*response.responses, *extra))
    if api == "Fetch":
        extra = tuple(
            FetchTopicResponse(
                topic=t.topic,
                partitions=tuple(
                    FetchPartitionData(
                        partition_index=p.partition, error_code=code, error_message=message(t.topic)
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
            if t.topic in refused
        )
        return replace(response, responses=(*response.responses, *extra))
    if api == "ListOffsets":
        extra = tuple(
            ListOffsetsTopicResponse(
                name=t.name,
                partitions=tuple(
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=code,
                        error_message=message(t.name),
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
            if t.name in refused
        )
        return replace(response, topics=(*response.topics, *extra))
    if api == "OffsetCommit":
        extra = tuple(
            OffsetCommitResponseTopic(
                name=t.name,
                partitions=tuple(
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
            if t.name in refused
        )
        return replace(response, topics=(*response.topics, *extra))
    if api == "OffsetDelete":
        refused_partitions = tuple(
            PartitionResult(topic=topic, partition=partition, error_code=code)
            for topic, partition in dict.fromkeys(request.partitions)
            if topic in refused
        )
        if response.error_code != ErrorCode.NONE:
            return response  # Kafka: a group error answers the request alone
        return replace(response, partitions=(*response.partitions, *refused_partitions))
    if api == "DescribeGroups":  # Kafka: the refused groups first, state unknown ("")
        extra = tuple(
            ClassicDescribedGroup(group_id=g, error_code=code)
            for g in request.group_ids
            if g in refused
        )
        return replace(response, groups=(*extra, *response.groups))
    if api == "ConsumerGroupDescribe":  # Kafka: the refused groups first
        extra = tuple(
            DescribedGroup(group_id=g, error_code=code, error_message=message(g))
            for g in request.group_ids
            if g in refused
        )
        return replace(response, groups=(*extra, *response.groups))
    if api == "DeleteGroups":  # Kafka: the refused groups after, each once
        extra = tuple(
            DeletableGroupResult(group_id=g, error_code=code, error_message=message(g))
            for g in dict.fromkeys(request.groups_names)
            if g in refused
        )
        return replace(response, results=(*response.results, *extra))
    if api == "FindCoordinator":  # each key in the request's order
        answered = iter(response.coordinators)
        return replace(
            response,
            coordinators=tuple(
                Coordinator(key=k, error_code=code, error_message=message(k))
                if k in refused
                else next(answered)
                for k in request.coordinator_keys
            ),
        )
    if api == "CreateTopics":
        extra = tuple(
            CreatableTopicResult(name=name, error_code=code, error_message=message(name))
            for name in dict.fromkeys(t.name for t in request.topics)
            if name in refused
        )
        return replace(response, topics=(*response.topics, *extra))
    if api == "DeleteTopics":
        by_name = tuple(
            DeletableTopicResult(
                name=name, topic_id="", error_code=code, error_message=message(name)
            )
            for name in request.topic_names
            if name in refused
        )
        # Kafka leaves the name out: a refusal does not tell which topic an id is.
        by_id = tuple(
            DeletableTopicResult(name=None, topic_id=topic_id, error_code=code)
            for topic_id in request.topic_ids
            if (name := topic_name(topic_id)) is not None and name in refused
        )
        return replace(response, topics=(*response.topics, *by_name, *by_id))
    return response


# -- refused whole ------------------------------------------------------------------------------


def refused_response(api: str, request: Any, empty: Any, refusal: Refused) -> Any:
    """The answer to ``request`` refused whole, in Kafka's shape: ``empty`` (the API's empty
    response) with the refusal's code on every entry the request named, or in its error code.
    """
    code, why = refusal.code, refusal.message
    if api in ("Produce", "ListOffsets") or (api == "Fetch" and request.replica_id < 0):
        names = {t.name for t in request.topic_data} if api == "Produce" else None
        if names is None:
            key = "topic" if api == "Fetch" else "name"
            names = {getattr(t, key) for t in request.topics}
        return answer_refused(api, request, names, empty, lambda _: why, lambda _: None, code)
    if api == "FindCoordinator":
        return replace(
            empty,
            coordinators=tuple(
                Coordinator(key=k, error_code=code, error_message=why)
                for k in request.coordinator_keys
            ),
        )
    if api == "ConsumerGroupDescribe":
        return replace(
            empty,
            groups=tuple(
                DescribedGroup(group_id=g, error_code=code, error_message=why)
                for g in request.group_ids
            ),
        )
    if api == "DescribeGroups":  # Kafka answers each group with the refusal
        return replace(
            empty,
            groups=tuple(
                ClassicDescribedGroup(group_id=g, error_code=code) for g in request.group_ids
            ),
        )
    if api == "OffsetDelete" and code == _FAILED:  # every topic refused: per partition
        names = {t for t, _ in request.partitions}
        return answer_refused(api, request, names, empty, lambda _: why, lambda _: None, code)
    if api == "DeleteGroups":
        return replace(
            empty,
            results=tuple(
                DeletableGroupResult(group_id=g, error_code=code, error_message=why)
                for g in request.groups_names
            ),
        )
    if hasattr(empty, "error_code"):  # a follower Fetch, InitProducerId, the group APIs, ...
        fields = {"error_code": code}
        if hasattr(empty, "error_message"):
            fields["error_message"] = why  # type: ignore[assignment]
        return replace(empty, **fields)
    return empty


# -- listings -----------------------------------------------------------------------------------

FILTERED: Final = frozenset({"Metadata", "DescribeCluster", "ListGroups", "OffsetFetch"})
"""The APIs whose answers `filter_listing` edits."""


def _describable(may: May, name: str) -> bool:
    return may(Need(ResourceType.TOPIC, AclOperation.DESCRIBE, name))


def filter_listing(api: str, request: Any, response: Any, may: May) -> Any:
    """``response`` without what the caller may not DESCRIBE (Kafka's Metadata, ListGroups and
    OffsetFetch filtering); a topic the request named is answered TOPIC_AUTHORIZATION_FAILED
    instead, without its partitions, so a refusal does not tell whether the topic exists."""
    if api in ("Metadata", "DescribeCluster"):
        named = bool(request.topics) if api == "Metadata" else request.topic_names is not None
        kept = []
        for topic in response.topics:
            if _describable(may, topic.name):
                kept.append(topic)
            elif named:
                refused = (
                    MetadataTopic(name=topic.name, error_code=_FAILED)
                    if api == "Metadata"
                    else type(topic)(name=topic.name, error_code=_FAILED)
                )
                kept.append(refused)
        return replace(response, topics=tuple(kept))
    if api == "ListGroups":
        groups = tuple(
            g
            for g in response.groups
            if may(Need(ResourceType.GROUP, AclOperation.DESCRIBE, g.group_id))
        )
        return replace(response, groups=groups)
    if api == "OffsetFetch" and not request.topics:
        return replace(
            response, topics=tuple(t for t in response.topics if _describable(may, t.name))
        )
    return response


__all__ = [
    "FILTERED",
    "PER_TOPIC",
    "Refused",
    "answer_refused",
    "caller_of",
    "filter_listing",
    "refused_response",
    "without_topics",
]
