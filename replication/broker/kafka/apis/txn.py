"""The Kafka adapter's transaction handlers (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, TxnOffsetCommit, DescribeTransactions and ListTransactions (KIP-664), kio <->
`replication.messages.txn` around the broker API, as `replication.broker.kafka.apis.table` does
for the others (InitProducerId with a transactional id is there: one handler per API).

Versions: AddPartitionsToTxn 0-5 (v4+ batches transactions and carries KIP-890's
``verify_only``), AddOffsetsToTxn 0-4, EndTxn 0-5 (v5 is KIP-890 part 2's: the epoch bumped at
every transaction's end, answered), WriteTxnMarkers 1 (Kafka 4.0's floor; brokers of kraft send
it each other over gRPC), TxnOffsetCommit 0-5 (v5: the group's partition joins implicitly),
DescribeTransactions 0, ListTransactions 0-1. Clients use EndTxn v5 and TxnOffsetCommit v5
when the ``transaction.version`` feature is finalized at 2 (ApiVersions).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kraft.metadata.features import TRANSACTION_VERSION_2
from replication.broker.api import RequestContext
from replication.broker.kafka.api import ApiSpec, KafkaBrokerApi, Response
from replication.broker.kafka.apis.groups import offset_commit_answer, offset_commit_request
from replication.broker.kafka.frames import Request
from replication.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    EndTxnRequest,
    ListTransactionsRequest,
    TxnOffsetCommitRequest,
    TxnTopic,
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from storage.errors import ErrorCode

END_TXN_V2_VERSION: Final = 5
"""EndTxn v5+ is a transaction-version-2 client's (KIP-890 part 2): the epoch is bumped at the
transaction's end and the answer carries the producer id and epoch to go on with."""
TXN_OFFSET_COMMIT_V2_VERSION: Final = 5
"""TxnOffsetCommit v5+: the group's partition joins the transaction implicitly (KIP-890)."""


def _topics(topics: Any) -> tuple[TxnTopic, ...]:
    return tuple(TxnTopic(name=t.name, partitions=tuple(t.partitions)) for t in topics or ())


def _results(answer: AddPartitionsToTxnResponse) -> list[dict[str, Any]]:
    return [
        {
            "name": t.name,
            "results_by_partition": [
                {"partition_index": p.partition_index, "partition_error_code": p.error_code}
                for p in t.partitions
            ],
        }
        for t in answer.results
    ]


async def handle_add_partitions_to_txn(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    if request.api_version <= 3:
        answer = await api.add_partitions_to_txn(
            AddPartitionsToTxnRequest(
                transactional_id=body.v3_and_below_transactional_id,
                producer_id=body.v3_and_below_producer_id,
                producer_epoch=body.v3_and_below_producer_epoch,
                topics=_topics(body.v3_and_below_topics),
            ),
            ctx,
        )
        return {"results_by_topic_v3_and_below": _results(answer)}
    out = []
    for txn in body.transactions:
        answer = await api.add_partitions_to_txn(
            AddPartitionsToTxnRequest(
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                topics=_topics(txn.topics),
                verify_only=txn.verify_only,
            ),
            ctx,
        )
        out.append({"transactional_id": txn.transactional_id, "topic_results": _results(answer)})
    return {"error_code": ErrorCode.NONE, "results_by_transaction": out}


async def handle_add_offsets_to_txn(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    answer = await api.add_offsets_to_txn(
        AddOffsetsToTxnRequest(
            transactional_id=body.transactional_id,
            producer_id=body.producer_id,
            producer_epoch=body.producer_epoch,
            group_id=body.group_id,
        ),
        ctx,
    )
    return {"error_code": answer.error_code}


async def handle_end_txn(api: KafkaBrokerApi, request: Request, ctx: RequestContext) -> Response:
    body = request.body
    v2 = request.api_version >= END_TXN_V2_VERSION
    answer = await api.end_txn(
        EndTxnRequest(
            transactional_id=body.transactional_id,
            producer_id=body.producer_id,
            producer_epoch=body.producer_epoch,
            committed=body.committed,
            transaction_version=TRANSACTION_VERSION_2 if v2 else 0,
        ),
        ctx,
    )
    if not v2:
        return {"error_code": answer.error_code}
    return {
        "error_code": answer.error_code,
        "producer_id": answer.producer_id,
        "producer_epoch": answer.producer_epoch,
    }


async def handle_write_txn_markers(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    answer = await api.write_txn_markers(
        WriteTxnMarkersRequest(
            markers=tuple(
                WritableTxnMarker(
                    producer_id=m.producer_id,
                    producer_epoch=m.producer_epoch,
                    transaction_result=m.transaction_result,
                    coordinator_epoch=m.coordinator_epoch,
                    topics=tuple(
                        WritableTxnMarkerTopic(
                            name=t.name, partition_indexes=tuple(t.partition_indexes)
                        )
                        for t in m.topics
                    ),
                )
                for m in request.body.markers
            )
        ),
        ctx,
    )
    return {
        "markers": [
            {
                "producer_id": m.producer_id,
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [
                            {"partition_index": p.partition_index, "error_code": p.error_code}
                            for p in t.partitions
                        ],
                    }
                    for t in m.topics
                ],
            }
            for m in answer.markers
        ]
    }


async def handle_txn_offset_commit(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    answer = await api.txn_offset_commit(
        TxnOffsetCommitRequest(
            transactional_id=body.transactional_id,
            producer_id=body.producer_id,
            producer_epoch=body.producer_epoch,
            commit=offset_commit_request(body, getattr(body, "generation_id", -1)),
            transaction_version=(
                TRANSACTION_VERSION_2 if request.api_version >= TXN_OFFSET_COMMIT_V2_VERSION else 0
            ),
        ),
        ctx,
    )
    return offset_commit_answer(body, answer)


async def handle_describe_transactions(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    answer = await api.describe_transactions(
        DescribeTransactionsRequest(transactional_ids=tuple(request.body.transactional_ids)), ctx
    )
    return {
        "transaction_states": [
            {
                "error_code": t.error_code,
                "transactional_id": t.transactional_id,
                "transaction_state": t.state,
                "transaction_timeout": max(t.timeout_ms, 0),
                "transaction_start_time": t.start_ms,
                "producer_id": t.producer_id,
                "producer_epoch": t.producer_epoch,
                "topics": [{"topic": p.name, "partitions": list(p.partitions)} for p in t.topics],
            }
            for t in answer.transactions
        ]
    }


async def handle_list_transactions(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    answer = await api.list_transactions(
        ListTransactionsRequest(
            state_filters=tuple(body.state_filters),
            producer_id_filters=tuple(body.producer_id_filters),
            duration_filter_ms=getattr(body, "duration_filter", -1),
        ),
        ctx,
    )
    return {
        "error_code": answer.error_code,
        "unknown_state_filters": list(answer.unknown_state_filters),
        "transaction_states": [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.state,
            }
            for t in answer.transactions
        ],
    }


TXN_HANDLERS: Final[Mapping[int, ApiSpec]] = {
    24: ApiSpec("AddPartitionsToTxn", 0, 5, handle_add_partitions_to_txn),
    25: ApiSpec("AddOffsetsToTxn", 0, 4, handle_add_offsets_to_txn),
    26: ApiSpec("EndTxn", 0, 5, handle_end_txn),
    27: ApiSpec("WriteTxnMarkers", 1, 1, handle_write_txn_markers),
    28: ApiSpec("TxnOffsetCommit", 0, 5, handle_txn_offset_commit),
    65: ApiSpec("DescribeTransactions", 0, 0, handle_describe_transactions),
    66: ApiSpec("ListTransactions", 0, 1, handle_list_transactions),
}
"""API key -> Kafka's name, the versions served, the handler."""

__all__ = ["TXN_HANDLERS"]
