"""The Kafka adapter's Produce and InitProducerId: kio request -> kraft dataclass -> broker API
-> kio response.

Record batches pass through as the v2 bytes the client sent. A Produce every partition of which
succeeded comes back `Encoded`, its bytes written without kio's entities
(`replication.broker.kafka.apis.produce_answer`); None means no response (acks=0). From v13 topics
are named by id (KIP-516), and from v10 a moved leader's endpoint is answered (KIP-951).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final

from replication.broker.api import RequestContext
from replication.broker.kafka.api import KafkaBrokerApi, Response
from replication.broker.kafka.apis.fetch import current_leader, leader_endpoints
from replication.broker.kafka.apis.produce_answer import (
    PRODUCE_TOPIC_IDS_VERSION,
    TopicAnswer,
    encode_produce_success,
)
from replication.broker.kafka.entities import millis
from replication.broker.kafka.frames import Encoded, Request
from replication.messages import (
    InitProducerIdRequest,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from storage.errors import ErrorCode

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
