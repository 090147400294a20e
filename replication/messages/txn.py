"""Dataclasses of the transaction APIs (KIP-98, KIP-447, KIP-664): AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions and ListTransactions. Each mirrors
the message of the same name in ``proto/kraft/v1/broker.proto`` (kraft's transactional producer
and ``kraft transactions`` call them over gRPC; the Kafka listener maps Kafka's versions onto
them). WriteTxnMarkers, which brokers send each other, is in `replication.messages`.
DescribeProducers (KIP-664), which ``kraft transactions abort --start-offset`` asks, is here."""

from __future__ import annotations

from dataclasses import dataclass

from replication.messages.groups import OffsetCommitRequest
from storage.errors import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnTopic:
    name: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: tuple[TxnTopic, ...] = ()
    verify_only: bool = False
    """KIP-890 part 1 (v4+, from a partition leader): only check they were added."""
    transaction_version: int = 0
    """KIP-890 part 2: 2 when a partition leader adds the partition for a version-2 client
    (Produce v12+, TxnOffsetCommit v5+), which sends no AddPartitionsToTxn itself."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnPartitionResult:
    partition_index: int
    error_code: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnTopicResult:
    name: str
    partitions: tuple[TxnPartitionResult, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnResponse:
    results: tuple[TxnTopicResult, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnBatchRequest:
    """KIP-890 part 1: a partition leader's ``verify_only`` entries to one coordinator broker
    (AddPartitionsToTxn v4+'s broker form)."""

    transactions: tuple[AddPartitionsToTxnRequest, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnBatchResult:
    transactional_id: str
    results: tuple[TxnTopicResult, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnBatchResponse:
    transactions: tuple[AddPartitionsToTxnBatchResult, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddOffsetsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    transaction_version: int = 0
    """The client's transaction version: 2 (EndTxn v5+) bumps the epoch (KIP-890 part 2)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTxnResponse:
    """EndTxn's answer; with transaction version 2, the producer id and epoch to use next."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnErrorResponse:
    """AddOffsetsToTxn's answer: one error code."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequest:
    """TxnOffsetCommit: the group's offsets in the producer's transaction (KIP-447: checked
    by the group's generation or member epoch and member id, as an OffsetCommit). The answer
    is an `OffsetCommitResponse`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: OffsetCommitRequest
    transaction_version: int = 0
    """2 (TxnOffsetCommit v5+): the group's ``__consumer_offsets`` partition joins the
    transaction here, the client sent no AddOffsetsToTxn (KIP-890 part 2)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTransactionsRequest:
    transactional_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedTransaction:
    transactional_id: str
    error_code: ErrorCode = ErrorCode.NONE
    state: str = ""
    """Kafka's name: ``Empty``, ``Ongoing``, ``PrepareCommit``, ..."""
    timeout_ms: int = -1
    start_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    topics: tuple[TxnTopic, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTransactionsResponse:
    transactions: tuple[DescribedTransaction, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListTransactionsRequest:
    state_filters: tuple[str, ...] = ()
    producer_id_filters: tuple[int, ...] = ()
    duration_filter_ms: int = -1
    """v1: only transactions running longer than this (-1: all)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ListTransactionsResponse:
    error_code: ErrorCode = ErrorCode.NONE
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[ListedTransaction, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    """Some partitions of one topic (a request's selection)."""

    name: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeProducersRequest:
    """DescribeProducers (KIP-664): the producers of partitions their leader holds (what
    ``kraft transactions abort --start-offset`` finds the open transaction's producer with)."""

    topics: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerDescription:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    current_txn_start_offset: int = -1
    """The first offset of the producer's open transaction here (KIP-98), -1 if none."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionProducers:
    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    producers: tuple[ProducerDescription, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeProducersResponse:
    error_code: ErrorCode = ErrorCode.NONE
    """A refusal of the whole request (else per partition)."""
    error_message: str = ""
    partitions: tuple[PartitionProducers, ...] = ()


__all__ = [
    "AddOffsetsToTxnRequest",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "DescribeProducersRequest",
    "DescribeProducersResponse",
    "DescribeTransactionsRequest",
    "DescribeTransactionsResponse",
    "DescribedTransaction",
    "EndTxnRequest",
    "EndTxnResponse",
    "ListTransactionsRequest",
    "ListTransactionsResponse",
    "ListedTransaction",
    "PartitionProducers",
    "ProducerDescription",
    "TopicPartitions",
    "TxnErrorResponse",
    "TxnOffsetCommitRequest",
    "TxnPartitionResult",
    "TxnTopic",
    "TxnTopicResult",
]
