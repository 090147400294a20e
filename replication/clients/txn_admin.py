"""The transaction calls of `AdminClient` (Kafka's ``Admin.listTransactions``,
``describeTransactions`` and ``abortTransaction``, KIP-664), what ``kraft transactions`` runs.

- ``list_transactions`` asks every broker (ListTransactions: each answers for the
  ``__transaction_state`` partitions it leads), as Kafka's admin does;
- ``describe_transactions`` asks each transactional id's coordinator (FindCoordinator with key
  type 1), again after a coordinator error;
- ``abort_transaction`` writes an abort marker for one producer to one partition's leader
  (WriteTxnMarkers, CLUSTER_ACTION): the operator's way out of a hanging transaction, whose
  open batches hold the partition's last stable offset back (KIP-664);
- ``describe_producers`` asks a partition's leader for its producers (DescribeProducers), and
  `abort_spec_at` picks the one whose transaction is open from a given offset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kraft.types import TopicPartition
from replication.clients.group_membership import COORDINATOR_ERRORS, GroupClient
from replication.clients.network import BrokerNetwork
from replication.messages import (
    COORDINATOR_KEY_TYPE_TRANSACTION,
    DescribedTransaction,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListedTransaction,
    ListTransactionsRequest,
    ListTransactionsResponse,
    ProducerDescription,
    TopicPartitions,
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from storage.errors import ErrorCode, LeaderNotAvailableError, error_for


@dataclass(frozen=True, slots=True)
class _Backoff:
    retry_backoff_ms: int = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortSpec:
    """Kafka's ``AbortTransactionSpec``: the producer whose open transaction in ``partition``
    to abort, and the coordinator epoch to write its marker with."""

    partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


class TransactionAdmin:
    """See the module docstring. ``brokers`` gives the addresses of the live brokers."""

    def __init__(
        self, broker_network: BrokerNetwork, timeout: float, brokers: Callable[[], Iterable[str]]
    ) -> None:
        self._network = broker_network
        self._timeout = timeout
        self._brokers = brokers

    def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_filter_ms: int = -1,
    ) -> list[ListedTransaction]:
        """Every transactional id the coordinators know, filtered as Kafka's tool filters
        (states by Kafka's names: ``Ongoing``, ``CompleteCommit``, ...; ``duration_filter_ms``:
        only transactions running longer).

        Raises:
            InvalidRequestError: an unknown state name.
        """
        request = ListTransactionsRequest(
            state_filters=tuple(states),
            producer_id_filters=tuple(producer_ids),
            duration_filter_ms=duration_filter_ms,
        )
        out: dict[str, ListedTransaction] = {}
        for address in self._brokers():
            response = self._network.call(
                address, "ListTransactions", request, ListTransactionsResponse
            )
            if response.unknown_state_filters:
                raise error_for(
                    ErrorCode.INVALID_REQUEST,
                    f"unknown transaction states: {', '.join(response.unknown_state_filters)}",
                )
            if response.error_code is not ErrorCode.NONE:
                raise error_for(response.error_code, "ListTransactions failed")
            for t in response.transactions:
                out[t.transactional_id] = t
        return [out[k] for k in sorted(out)]

    def describe_transaction(self, transactional_id: str) -> DescribedTransaction:
        """The id's state, producer id and epoch, timeout, start and partitions.

        Raises:
            TransactionalIdNotFoundError: the coordinator has no such id.
        """
        client = GroupClient(
            self._network, transactional_id, _Backoff(), key_type=COORDINATOR_KEY_TYPE_TRANSACTION
        )
        found: list[DescribedTransaction] = []

        def attempt(address: str) -> ErrorCode | None:
            request = DescribeTransactionsRequest(transactional_ids=(transactional_id,))
            response = self._network.call(
                address, "DescribeTransactions", request, DescribeTransactionsResponse
            )
            (described,) = response.transactions
            if described.error_code in COORDINATOR_ERRORS:
                return described.error_code
            if described.error_code is not ErrorCode.NONE:
                raise error_for(described.error_code, f"transactional id {transactional_id!r}")
            found.append(described)
            return None

        client.retrying(self._timeout, attempt)
        return found[0]

    def abort_transaction(self, spec: AbortSpec) -> None:
        """Write the abort marker of ``spec``'s producer to its partition's leader.

        Raises:
            KraftError: the leader's error for the partition (e.g. CLUSTER_AUTHORIZATION_FAILED
                without CLUSTER_ACTION, NOT_LEADER_OR_FOLLOWER).
        """
        tp = spec.partition
        request = WriteTxnMarkersRequest(
            markers=(
                WritableTxnMarker(
                    producer_id=spec.producer_id,
                    producer_epoch=spec.producer_epoch,
                    transaction_result=False,
                    coordinator_epoch=spec.coordinator_epoch,
                    topics=(
                        WritableTxnMarkerTopic(name=tp.topic, partition_indexes=(tp.partition,)),
                    ),
                ),
            )
        )
        response = self._network.call(
            self._leader(tp), "WriteTxnMarkers", request, WriteTxnMarkersResponse
        )
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    if p.error_code is not ErrorCode.NONE:
                        raise error_for(p.error_code, f"abort marker for {tp}")

    def describe_producers(self, tp: TopicPartition) -> list[ProducerDescription]:
        """The active producers of ``tp`` at its leader (Kafka's ``Admin.describeProducers``):
        id, epoch, last sequence and timestamp, and the first offset of an open transaction.

        Raises:
            KraftError: the leader's error for the partition.
        """
        request = DescribeProducersRequest(
            topics=(TopicPartitions(name=tp.topic, partitions=(tp.partition,)),)
        )
        response = self._network.call(
            self._leader(tp), "DescribeProducers", request, DescribeProducersResponse
        )
        if response.error_code is not ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message or "DescribeProducers")
        out: list[ProducerDescription] = []
        for p in response.partitions:
            if p.error_code is not ErrorCode.NONE:
                raise error_for(p.error_code, f"producers of {tp}")
            out.extend(p.producers)
        return out

    def _leader(self, tp: TopicPartition) -> str:
        metadata = self._network.fetch_metadata([tp.topic], timeout_s=self._timeout)
        brokers = {b.node_id: b.address for b in metadata.brokers}
        leader = next(
            (
                p.leader_id
                for t in metadata.topics
                if t.name == tp.topic
                for p in t.partitions
                if p.partition_index == tp.partition
            ),
            -1,
        )
        if leader not in brokers:
            raise LeaderNotAvailableError(f"no leader for {tp} in the metadata")
        return brokers[leader]


def abort_spec_at(
    tp: TopicPartition, start_offset: int, producers: Iterable[ProducerDescription]
) -> AbortSpec:
    """The `AbortSpec` of the transaction open in ``tp`` since ``start_offset`` (as
    ``kafka-transactions.sh abort --start-offset`` finds it; coordinator epoch 0, as Kafka's
    tool uses when the leader reports none).

    Raises:
        InvalidRequestError: no producer has a transaction open there from that offset.
    """
    for p in producers:
        if p.current_txn_start_offset == start_offset:
            return AbortSpec(
                partition=tp,
                producer_id=p.producer_id,
                producer_epoch=p.producer_epoch,
                coordinator_epoch=0,
            )
    raise error_for(
        ErrorCode.INVALID_REQUEST,
        f"Could not find any open transactions starting at offset {start_offset} on "
        f"partition {tp.topic}-{tp.partition}",
    )


__all__ = ["AbortSpec", "TransactionAdmin", "abort_spec_at"]
