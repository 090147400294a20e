"""The Kafka adapter's handlers: kio request -> kraft dataclass -> broker API -> kio response.

One function per API, in one table (`HANDLERS`, Kafka's ``KafkaApis.handle`` match on the API
key); the same table is what ApiVersions advertises, so the two cannot drift. A handler only
converts: it reads the kio request (``getattr`` with a default for a field its version lacks),
calls the broker API with the context, and returns the response as a mapping of kio's field
names for the newest version; `replication.broker.kafka.entities.build` makes the version the
client asked for. None means no response (Produce with acks=0); a Produce every partition of
which succeeded comes back `Encoded`, its bytes written without kio's entities
(`replication.broker.kafka.produce_answer`). Record batches pass through as bytes both ways.
Fetch, with its sessions and topic ids, has a module of its own
(`replication.broker.kafka.fetch_handler`).

Versions start at Kafka 4.0's floors (KIP-896) and end where this adapter stops understanding
the schema (ListOffsets' -5 and timeouts, ...): see
docs/kafka-compatibility.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode as KioErrorCode

from kraft.metadata.features import SUPPORTED_FEATURES
from kraft.types import INTERNAL_TOPICS
from replication.broker.api import RequestContext
from replication.broker.kafka.admin_handlers import ADMIN_HANDLERS
from replication.broker.kafka.api import KafkaBrokerApi
from replication.broker.kafka.classic_handlers import CLASSIC_HANDLERS
from replication.broker.kafka.entities import millis
from replication.broker.kafka.fetch_handler import current_leader, handle_fetch, leader_endpoints
from replication.broker.kafka.frames import Encoded, Request
from replication.broker.kafka.group_handlers import GROUP_HANDLERS
from replication.broker.kafka.produce_answer import (
    PRODUCE_TOPIC_IDS_VERSION,
    TopicAnswer,
    encode_produce_success,
)
from replication.broker.kafka.txn_handlers import TXN_HANDLERS
from replication.messages import (
    CONSUMER_REPLICA_ID,
    InitProducerIdRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
    MetadataRequest,
    MetadataResponse,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from storage.errors import ErrorCode

Response = Mapping[str, Any] | Encoded | None
Handler = Callable[[KafkaBrokerApi, Request, RequestContext], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    name: str
    """Kafka's name of the API (``RequestContext.api``)."""
    min_version: int
    max_version: int
    handle: Handler


def _controller_id(answer: MetadataResponse) -> int:
    """The ``controller_id`` a Kafka client gets: in KRaft a broker (Kafka answers a random
    alive one), since clients cannot reach the controllers and brokers forward admin requests
    (KIP-590); here the lowest id, so answers do not flap. kraft's own Metadata names the
    active controller instead."""
    return min((b.node_id for b in answer.brokers), default=-1)


# -- Produce --------------------------------------------------------------------------------------


PRODUCE_NODE_ENDPOINTS_VERSION: Final = 10
"""Produce v10 answers the new leaders' endpoints with ``current_leader`` (KIP-951)."""


def _produce_topic_names(
    api: KafkaBrokerApi, request: Request
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Produce v13+ (KIP-516): each topic id the broker knows -> its name, and the answer
    for each it does not (UNKNOWN_TOPIC_ID on every partition, as Kafka's KafkaApis)."""
    names: dict[str, str] = {}
    unknown = []
    for t in request.body.topic_data:
        topic_id = str(t.topic_id)  # NB: kio reads the zero id as None, which names no topic
        name = api.topic_name(topic_id) if t.topic_id is not None else None
        if name is None:
            unknown.append(
                {
                    "topic_id": t.topic_id,
                    "partition_responses": [
                        {
                            "index": p.index,
                            "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                            "base_offset": -1,
                        }
                        for p in t.partition_data
                    ],
                }
            )
        else:
            names[topic_id] = name
    return names, unknown


async def handle_produce(api: KafkaBrokerApi, request: Request, ctx: RequestContext) -> Response:
    body = request.body
    by_id = request.api_version >= PRODUCE_TOPIC_IDS_VERSION
    names, unknown = _produce_topic_names(api, request) if by_id else ({}, [])
    ids = {name: topic_id for topic_id, name in names.items()}
    topics = tuple(
        ProduceTopicData(
            name=names[str(t.topic_id)] if by_id else t.name,
            partition_data=tuple(
                ProducePartitionData(index=p.index, records=p.records or b"")
                for p in t.partition_data
            ),
        )
        for t in body.topic_data
        if not by_id or str(t.topic_id) in names
    )
    if body.acks not in (0, 1, -1):  # Kafka: INVALID_REQUIRED_ACKS for every partition
        return {
            "responses": [
                {
                    "name": t.name,
                    "topic_id": ids.get(t.name),
                    "partition_responses": [
                        {"index": p.index, "error_code": ErrorCode.INVALID_REQUIRED_ACKS}
                        for p in t.partition_data
                    ],
                }
                for t in topics
            ]
            + unknown
        }
    answer = await api.produce(
        ProduceRequest(
            acks=body.acks,
            timeout_ms=millis(body.timeout),
            topic_data=topics,
            transactional_id=getattr(body, "transactional_id", None) or "",
        ),
        ctx,
    )
    if body.acks == 0:
        return None
    if not unknown and (successes := _successes(answer, ids, by_id)) is not None:
        return Encoded(encode_produce_success(request.api_version, successes))
    endpoints = []
    if request.api_version >= PRODUCE_NODE_ENDPOINTS_VERSION:
        endpoints = await leader_endpoints(
            api,
            ctx,
            (
                (p.error_code, p.current_leader)
                for t in answer.responses
                for p in t.partition_responses
            ),
        )
    return {
        "node_endpoints": endpoints,
        "responses": [
            {
                "name": t.name,
                "topic_id": ids.get(t.name),
                "partition_responses": [
                    {
                        "index": p.index,
                        "error_code": p.error_code,
                        "base_offset": p.base_offset,
                        "log_append_time": p.log_append_time_ms,
                        "log_start_offset": p.log_start_offset,
                        "error_message": p.error_message or None,
                        **(
                            {"current_leader": current_leader(p.current_leader)}
                            if p.current_leader is not None
                            else {}
                        ),
                    }
                    for p in t.partition_responses
                ],
            }
            for t in answer.responses
        ]
        + unknown,
    }


def _successes(
    answer: ProduceResponse, ids: Mapping[str, str], by_id: bool
) -> list[TopicAnswer] | None:
    """The answer as `encode_produce_success` takes it when every partition succeeded (the
    common answer, encoded without kio's entities); None when one did not."""
    topics: list[TopicAnswer] = []
    for t in answer.responses:
        partitions = []
        for p in t.partition_responses:
            if p.error_code != ErrorCode.NONE or p.error_message or p.current_leader is not None:
                return None
            partitions.append((p.index, p.base_offset, p.log_append_time_ms, p.log_start_offset))
        topic_id = ids.get(t.name)
        if by_id and topic_id is None:
            return None
        topics.append((t.name, uuid.UUID(topic_id) if topic_id else None, partitions))
    return topics


# -- ListOffsets ----------------------------------------------------------------------------------


async def handle_list_offsets(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    answer = await api.list_offsets(
        ListOffsetsRequest(
            replica_id=CONSUMER_REPLICA_ID,
            isolation_level=getattr(body, "isolation_level", 0),
            topics=tuple(
                ListOffsetsTopic(
                    name=t.name,
                    partitions=tuple(
                        ListOffsetsPartition(
                            partition_index=p.partition_index,
                            current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                            timestamp=p.timestamp,
                        )
                        for p in t.partitions
                    ),
                )
                for t in body.topics
            ),
        ),
        ctx,
    )
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": p.error_code,
                        "timestamp": p.timestamp,
                        "offset": p.offset,
                        "leader_epoch": p.leader_epoch,
                    }
                    for p in t.partitions
                ],
            }
            for t in answer.topics
        ]
    }


# -- Metadata -------------------------------------------------------------------------------------


async def handle_metadata(api: KafkaBrokerApi, request: Request, ctx: RequestContext) -> Response:
    body = request.body
    requested = body.topics
    if request.api_version == 0 and not requested:
        requested = None  # v0: an empty list means every topic
    # NB: topics asked for by name are named to the broker API, whose authorization answers
    # one the caller may not DESCRIBE with TOPIC_AUTHORIZATION_FAILED (a listing hides it).
    names = tuple(r.name for r in requested or () if getattr(r, "name", None))
    by_names = requested is not None and len(names) == len(requested)
    answer = await api.metadata(MetadataRequest(topics=names if by_names else ()), ctx)
    by_name = {t.name: t for t in answer.topics}
    if requested is None:
        topics = list(answer.topics)  # internal ones too, marked, as Kafka answers
        unknown: list[dict[str, Any]] = []
    else:
        by_id = {t.topic_id: t for t in answer.topics if t.topic_id}
        topics, unknown = [], []
        for r in requested:
            name = getattr(r, "name", None)
            topic_id = getattr(r, "topic_id", None)
            found = by_name.get(name) if name else by_id.get(str(topic_id)) if topic_id else None
            if found is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name else ErrorCode.UNKNOWN_TOPIC_ID
                unknown.append({"error_code": code, "name": name, "topic_id": topic_id})
            else:
                topics.append(found)
    return {
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack or None}
            for b in answer.brokers
        ],
        # NB: "" rather than null while kraft has no cluster id: librdkafka 2.16's
        # describe_cluster dereferences a null one.
        "cluster_id": answer.cluster_id,
        "controller_id": _controller_id(answer),
        "topics": [
            *(
                {
                    "error_code": t.error_code,
                    "name": t.name,
                    "topic_id": t.topic_id or None,
                    "is_internal": t.name in INTERNAL_TOPICS,
                    "partitions": [
                        {
                            "error_code": p.error_code,
                            "partition_index": p.partition_index,
                            "leader_id": p.leader_id,
                            "leader_epoch": p.leader_epoch,
                            "replica_nodes": p.replica_nodes,
                            "isr_nodes": p.isr_nodes,
                            "offline_replicas": p.offline_replicas,
                        }
                        for p in t.partitions
                    ],
                }
                for t in topics
            ),
            *unknown,
        ],
    }


# -- DescribeCluster ------------------------------------------------------------------------------

BROKERS_ENDPOINT_TYPE = 1
"""DescribeCluster v1 (KIP-919): 1 asks for the brokers, 2 for the controllers."""


async def handle_describe_cluster(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    """The brokers (this listener's endpoints) and a broker as the controller, as Metadata."""
    if getattr(request.body, "endpoint_type", BROKERS_ENDPOINT_TYPE) != BROKERS_ENDPOINT_TYPE:
        return {
            "error_code": KioErrorCode.unsupported_endpoint_type,
            "error_message": "a broker describes the brokers only (endpoint type 1)",
            "cluster_id": "",
            "brokers": [],
        }
    # NB: one topic name no topic has: the brokers, without describing every topic.
    answer = await api.metadata(MetadataRequest(topics=("",)), ctx)
    return {
        "error_code": ErrorCode.NONE,
        "cluster_id": answer.cluster_id,
        "controller_id": _controller_id(answer),
        "brokers": [
            {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack or None}
            for b in answer.brokers
        ],
    }


# -- InitProducerId -------------------------------------------------------------------------------


async def handle_init_producer_id(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    answer = await api.init_producer_id(
        InitProducerIdRequest(
            transaction_timeout_ms=millis(body.transaction_timeout),
            producer_id=getattr(body, "producer_id", -1),
            producer_epoch=getattr(body, "producer_epoch", -1),
            transactional_id=body.transactional_id or "",
        ),
        ctx,
    )
    return {
        "error_code": answer.error_code,
        "producer_id": answer.producer_id,
        "producer_epoch": answer.producer_epoch,
    }


# -- ApiVersions, SaslHandshake -------------------------------------------------------------------


async def handle_api_versions(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    epoch, finalized = api.finalized_features()
    return {
        "error_code": ErrorCode.NONE,
        "api_keys": [
            {"api_key": key, "min_version": spec.min_version, "max_version": spec.max_version}
            for key, spec in sorted(HANDLERS.items())
        ],
        # KIP-584: the features this broker runs and the levels the controller finalized
        # (`kraft.metadata.features`); below v4 a feature whose minimum is 0 is left out, as
        # Kafka does (older clients refuse a 0 minimum).
        "supported_features": [
            {"name": name, "min_version": low, "max_version": high}
            for name, (low, high) in sorted(SUPPORTED_FEATURES.items())
            if low > 0 or request.api_version >= 4
        ],
        "finalized_features_epoch": epoch,
        "finalized_features": [
            {"name": name, "max_version_level": level, "min_version_level": level}
            for name, level in sorted(finalized.items())
            if level > 0
        ],
    }


async def handle_sasl_handshake(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    """A listener without SASL: no mechanism is enabled."""
    return {"error_code": KioErrorCode.unsupported_sasl_mechanism, "mechanisms": []}


HANDLERS: Final[Mapping[int, ApiSpec]] = {
    0: ApiSpec("Produce", 3, 13, handle_produce),
    1: ApiSpec("Fetch", 4, 18, handle_fetch),
    2: ApiSpec("ListOffsets", 1, 8, handle_list_offsets),
    3: ApiSpec("Metadata", 0, 12, handle_metadata),
    17: ApiSpec("SaslHandshake", 0, 1, handle_sasl_handshake),
    18: ApiSpec("ApiVersions", 0, 4, handle_api_versions),
    22: ApiSpec("InitProducerId", 0, 5, handle_init_producer_id),
    60: ApiSpec("DescribeCluster", 0, 1, handle_describe_cluster),
    **{key: ApiSpec(*spec) for key, spec in GROUP_HANDLERS.items()},
    **{key: ApiSpec(*spec) for key, spec in ADMIN_HANDLERS.items()},
    **{key: ApiSpec(*spec) for key, spec in CLASSIC_HANDLERS.items()},
    **{key: ApiSpec(*spec) for key, spec in TXN_HANDLERS.items()},
}
"""API key -> name, the versions served, the handler: the dispatch table and ApiVersions."""

SUPPORTED_VERSIONS: Final[Mapping[int, tuple[int, int]]] = {
    key: (spec.min_version, spec.max_version) for key, spec in HANDLERS.items()
}

__all__ = ["HANDLERS", "SUPPORTED_VERSIONS", "ApiSpec", "Handler", "Response"]
