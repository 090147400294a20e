"""The Kafka adapter's Fetch: fetch sessions (KIP-227) and topic ids (KIP-516) around the broker
API's fetch.

A Fetch goes through the broker's `replication.core.fetch_session.FetchSessionCache`
(``BrokerApi.fetch_sessions``, one per broker, shared by its listeners): the cache says which
partitions to fetch (a full request's, or every partition of an incremental request's session),
the broker API fetches them (authorization, long poll and limits as for any fetch), and the
cache says which of them the answer holds and under which session id.

From Fetch v13 a request names topics by id: each id is resolved in the broker's metadata image
at every request (a session outlives a topic); an unknown id (a deleted topic, the zero id) is
answered UNKNOWN_TOPIC_ID for each of its partitions, as Kafka's ``KafkaApis`` does, and the
answer names topics by the ids the client sent. A partition whose leader moved
(NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH) carries the new leader, and from v16 the answer
that leader's endpoint on this listener (KIP-951), so the client goes there without a Metadata
round trip.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final

from kio.schema.errors import ErrorCode as KioErrorCode

from replication.broker.api import RequestContext
from replication.broker.kafka.api import KafkaBrokerApi
from replication.broker.kafka.entities import millis
from replication.broker.kafka.frames import Request
from replication.core.fetch_session import (
    INVALID_SESSION_ID,
    PartitionAnswer,
    PartitionKey,
    PartitionRequest,
    SessionError,
)
from replication.messages import (
    CONSUMER_REPLICA_ID,
    BrokerFetchRequest,
    FetchPartition,
    FetchPartitionData,
    FetchTopic,
    LeaderIdAndEpoch,
    MetadataRequest,
)
from storage.errors import ErrorCode, InvalidRequestError

TOPIC_IDS_VERSION: Final = 13
"""Fetch v13 names topics by id (KIP-516)."""
NODE_ENDPOINTS_VERSION: Final = 16
"""Fetch v16 answers the new leaders' endpoints with ``current_leader`` (KIP-951)."""
_LEADER_MOVED: Final = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})
READ_COMMITTED: Final = 1
_ZERO_ID: Final = str(uuid.UUID(int=0))
_SESSION_ERRORS: Final = {
    SessionError.ID_NOT_FOUND: KioErrorCode.fetch_session_id_not_found,
    SessionError.EPOCH: KioErrorCode.invalid_fetch_session_epoch,
    SessionError.TOPIC_ID: KioErrorCode.fetch_session_topic_id_error,
}


def _topic_ref(topic: Any, by_id: bool) -> str:
    """A request topic's key in the session: its id (v13+) or its name."""
    if not by_id:
        return str(topic.topic)
    topic_id = getattr(topic, "topic_id", None)
    return _ZERO_ID if topic_id is None else str(topic_id)


def current_leader(leader: LeaderIdAndEpoch | None) -> dict[str, int]:
    """A response's ``current_leader`` (KIP-951)."""
    if leader is None:
        return {"leader_id": -1, "leader_epoch": -1}
    return {"leader_id": leader.leader_id, "leader_epoch": leader.leader_epoch}


async def leader_endpoints(
    api: KafkaBrokerApi,
    ctx: RequestContext,
    answers: Iterable[tuple[ErrorCode, LeaderIdAndEpoch | None]],
) -> list[dict[str, Any]]:
    """KIP-951's ``node_endpoints``: the endpoints, on the listener the request came in on, of
    the leaders named in ``answers`` (error, ``current_leader``) whose error says the leader
    moved (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH), so the client sends there without a
    Metadata round trip."""
    leaders = {
        leader.leader_id
        for code, leader in answers
        if code in _LEADER_MOVED and leader is not None and leader.leader_id >= 0
    }
    if not leaders:
        return []
    brokers = await api.metadata(MetadataRequest(topics=("",)), ctx)  # no topic: brokers
    return [
        {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack or None}
        for b in brokers.brokers
        if b.node_id in leaders
    ]


def _answer_of(data: FetchPartitionData) -> PartitionAnswer:
    return PartitionAnswer(
        error=data.error_code is not ErrorCode.NONE,
        high_watermark=data.high_watermark,
        last_stable_offset=data.last_stable_offset,
        log_start_offset=data.log_start_offset,
        has_records=bool(data.records),
        must_answer=data.preferred_read_replica >= 0 or data.diverging_epoch is not None,
    )


def _runs(
    partitions: Iterable[tuple[PartitionKey, PartitionRequest]], names: Mapping[str, str | None]
) -> tuple[FetchTopic, ...]:
    """The partitions whose topic is known, as topics of consecutive partitions (the order of
    the session, which ``max_bytes`` serves in)."""
    topics: list[FetchTopic] = []
    run: list[FetchPartition] = []
    run_topic: str | None = None
    for (ref, index), p in partitions:
        name = names[ref]
        if name is None:
            continue
        if name != run_topic and run:
            topics.append(FetchTopic(topic=str(run_topic), partitions=tuple(run)))
            run = []
        run_topic = name
        run.append(
            FetchPartition(
                partition=index,
                current_leader_epoch=p.current_leader_epoch,
                fetch_offset=p.fetch_offset,
                partition_max_bytes=p.partition_max_bytes,
            )
        )
    if run:
        topics.append(FetchTopic(topic=str(run_topic), partitions=tuple(run)))
    return tuple(topics)


def _partition(data: FetchPartitionData, read_committed: bool) -> dict[str, Any]:
    return {
        "partition_index": data.partition_index,
        "error_code": data.error_code,
        "high_watermark": data.high_watermark,
        "last_stable_offset": data.last_stable_offset,
        "log_start_offset": data.log_start_offset,
        "preferred_read_replica": data.preferred_read_replica,
        "aborted_transactions": [
            {"producer_id": a.producer_id, "first_offset": a.first_offset}
            for a in data.aborted_transactions
        ]
        if read_committed
        else None,
        "records": data.records,
        **(
            {"current_leader": current_leader(data.current_leader)}
            if data.current_leader is not None
            else {}
        ),
    }


async def handle_fetch(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> dict[str, Any]:
    body = request.body
    by_id = request.api_version >= TOPIC_IDS_VERSION
    sessions = api.fetch_sessions
    context = sessions.new_context(
        session_id=getattr(body, "session_id", INVALID_SESSION_ID),
        epoch=getattr(body, "session_epoch", -1),
        uses_topic_ids=by_id,
        partitions=[
            (
                (_topic_ref(t, by_id), p.partition),
                PartitionRequest(
                    fetch_offset=p.fetch_offset,
                    partition_max_bytes=p.partition_max_bytes,
                    current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                ),
            )
            for t in body.topics
            for p in t.partitions
        ],
        forgotten=[
            (_topic_ref(t, by_id), index)
            for t in getattr(body, "forgotten_topics_data", ()) or ()
            for index in t.partitions
        ],
        now_ms=_now_ms(),
    )
    if context.error is not None:
        return {"error_code": _SESSION_ERRORS[context.error], "session_id": 0, "responses": []}
    names: dict[str, str | None] = {}
    for (ref, _), _p in context.partitions:
        if ref not in names:
            names[ref] = (api.topic_name(ref) if ref != _ZERO_ID else None) if by_id else ref
    read_committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
    try:
        answer = await api.fetch(
            BrokerFetchRequest(
                # NB: replication stays on gRPC: a Kafka client's fetch is always a consumer's.
                replica_id=CONSUMER_REPLICA_ID,
                max_wait_ms=millis(body.max_wait),
                min_bytes=body.min_bytes,
                max_bytes=getattr(body, "max_bytes", 0x7FFFFFFF),
                isolation_level=getattr(body, "isolation_level", 0),
                rack_id=getattr(body, "rack_id", "") or "",
                topics=_runs(context.partitions, names),
            ),
            ctx,
        )
        error = answer.error_code
    except InvalidRequestError:
        # More partitions than a request may name (`replication.broker.limits`), which a
        # session can reach by adding a few at a time.
        error = ErrorCode.INVALID_REQUEST
    if error is not ErrorCode.NONE:
        # A top-level error ends the session: the client starts over with a full fetch
        # (Kafka's clients do after one).
        if context.session is not None:
            sessions.close(context.session.id)
        return {"error_code": error, "session_id": 0, "responses": []}
    fetched = {(t.topic, p.partition_index): p for t in answer.responses for p in t.partitions}
    missing = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    data: dict[PartitionKey, FetchPartitionData] = {}
    for key, _p in context.partitions:
        ref, index = key
        name = names[ref]
        found = None if name is None else fetched.get((name, index))
        data[key] = found or FetchPartitionData(
            partition_index=index,
            error_code=missing,
        )
    session_id, answered = sessions.answered(
        context, {key: _answer_of(d) for key, d in data.items()}, _now_ms()
    )
    endpoints = []
    if request.api_version >= NODE_ENDPOINTS_VERSION:
        endpoints = await leader_endpoints(
            api, ctx, ((data[key].error_code, data[key].current_leader) for key in answered)
        )
    topics: list[dict[str, Any]] = []
    for ref, index in answered:
        if not topics or topics[-1]["ref"] != ref:
            topics.append({"ref": ref, "partitions": []})
        topics[-1]["partitions"].append(_partition(data[ref, index], read_committed))
    return {
        "error_code": ErrorCode.NONE,
        "session_id": session_id,
        "responses": [
            {
                ("topic_id" if by_id else "topic"): t["ref"],
                "partitions": t["partitions"],
            }
            for t in topics
        ],
        "node_endpoints": endpoints,
    }


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


__all__ = ["TOPIC_IDS_VERSION", "current_leader", "handle_fetch", "leader_endpoints"]
