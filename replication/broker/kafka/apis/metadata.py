"""The Kafka adapter's Metadata and DescribeCluster: the brokers and topics a client sees, with
the endpoints of the listener the request came in on."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode as KioErrorCode

from kraft.types import INTERNAL_TOPICS
from replication.broker.api import RequestContext
from replication.broker.kafka.api import KafkaBrokerApi, Response
from replication.broker.kafka.frames import Request
from replication.messages import (
    MetadataRequest,
    MetadataResponse,
)
from storage.errors import ErrorCode


def _controller_id(answer: MetadataResponse) -> int:
    """The ``controller_id`` a Kafka client gets: in KRaft a broker (Kafka answers a random
    alive one), since clients cannot reach the controllers and brokers forward admin requests
    (KIP-590); here the lowest id, so answers do not flap. kraft's own Metadata names the
    active controller instead."""
    return min((b.node_id for b in answer.brokers), default=-1)


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
