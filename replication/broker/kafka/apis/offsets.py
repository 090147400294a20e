"""The Kafka adapter's ListOffsets: earliest, latest, by timestamp and max timestamp (KIP-734),
from v1 (KIP-896's floor) to v8."""

from __future__ import annotations

from replication.broker.api import RequestContext
from replication.broker.kafka.api import KafkaBrokerApi, Response
from replication.broker.kafka.frames import Request
from replication.messages import (
    CONSUMER_REPLICA_ID,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)

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
