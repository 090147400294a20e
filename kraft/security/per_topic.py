"""Per-topic answers to a request naming topics of which only some are refused, as Kafka's
KafkaApis gives them: the refused topics get TOPIC_AUTHORIZATION_FAILED in the response (per
partition, or per topic for CreateTopics and DeleteTopics), the others a normal answer.

The guard (`kraft.security.guard`) decides which named topics are refused; then `without`
gives the request the servicer runs (the refused topics left out) and `answer_refused` adds
their entries to its response. A request whose every named topic is refused is refused whole
instead (gRPC PERMISSION_DENIED, as before: the clients raise the same error either way).

Methods answered per topic: Produce, Fetch (a consumer's), ListOffsets, OffsetCommit (its
group is checked whole), CreateTopics and DeleteTopics. Metadata and DescribeCluster already
answer per topic (`kraft.security.operations.filter_response`).

Pure: reads and builds proto messages (duck-typed); no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from typing import Any, Final

from storage.errors import ErrorCode

_FAILED: Final = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)

TopicNameOf = Callable[[str], "str | None"]


def _keep(repeated: Any, keep: Callable[[Any], bool]) -> None:
    kept = [item for item in repeated if keep(item)]
    del repeated[:]
    repeated.extend(kept)


def without(key: str, request: Any, refused: Set[str], topic_name: TopicNameOf) -> Any:
    """A copy of ``request`` (to the method ``Service/Method`` ``key``) without the topics
    in ``refused``."""
    reduced = type(request)()
    reduced.CopyFrom(request)
    if key == "Broker/Produce":
        _keep(reduced.topic_data, lambda t: t.name not in refused)
    elif key == "Broker/Fetch":
        _keep(reduced.topics, lambda t: t.topic not in refused)
    elif key in ("Broker/ListOffsets", "Broker/OffsetCommit", "Controller/CreateTopics"):
        _keep(reduced.topics, lambda t: t.name not in refused)
    elif key == "Controller/DeleteTopics":
        _keep(reduced.topic_names, lambda n: n not in refused)
        _keep(reduced.topic_ids, lambda i: topic_name(i) not in refused)
    return reduced


def answer_refused(
    key: str,
    request: Any,
    refused: Set[str],
    response: Any,
    message: Callable[[str], str],
    topic_name: TopicNameOf,
) -> None:
    """Add to ``response`` a TOPIC_AUTHORIZATION_FAILED entry for each topic of ``request``
    (the original one) in ``refused``; ``message(topic)`` says why."""
    if key == "Broker/Produce":
        for t in request.topic_data:
            if t.name in refused:
                answer = response.responses.add(name=t.name)
                for p in t.partition_data:
                    answer.partition_responses.add(
                        index=p.index,
                        error_code=_FAILED,
                        error_message=message(t.name),
                        base_offset=-1,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                    )
    elif key == "Broker/Fetch":
        for f in request.topics:
            if f.topic in refused:
                answer = response.responses.add(topic=f.topic)
                for p in f.partitions:
                    answer.partitions.add(
                        partition_index=p.partition,
                        error_code=_FAILED,
                        error_message=message(f.topic),
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        preferred_read_replica=-1,
                    )
    elif key == "Broker/ListOffsets":
        for o in request.topics:
            if o.name in refused:
                answer = response.topics.add(name=o.name)
                for p in o.partitions:
                    answer.partitions.add(
                        partition_index=p.partition_index,
                        error_code=_FAILED,
                        error_message=message(o.name),
                        timestamp=-1,
                        offset=-1,
                        leader_epoch=-1,
                    )
    elif key == "Broker/OffsetCommit":
        for c in request.topics:
            if c.name in refused:
                answer = response.topics.add(name=c.name)
                for p in c.partitions:
                    answer.partitions.add(partition_index=p.partition_index, error_code=_FAILED)
    elif key == "Controller/CreateTopics":
        for name in dict.fromkeys(t.name for t in request.topics):
            if name in refused:
                response.topics.add(name=name, error_code=_FAILED, error_message=message(name))
    elif key == "Controller/DeleteTopics":
        for name in request.topic_names:
            if name in refused:
                response.topics.add(name=name, error_code=_FAILED, error_message=message(name))
        for topic_id in request.topic_ids:
            name = topic_name(topic_id)
            if name is not None and name in refused:
                # Kafka leaves the name out: a refusal does not tell which topic an id is.
                response.topics.add(topic_id=topic_id, error_code=_FAILED)


PER_TOPIC: Final = frozenset(
    {
        "Broker/Produce",
        "Broker/Fetch",
        "Broker/ListOffsets",
        "Broker/OffsetCommit",
        "Controller/CreateTopics",
        "Controller/DeleteTopics",
    }
)
"""The methods `without` and `answer_refused` know."""


__all__ = ["PER_TOPIC", "answer_refused", "without"]
