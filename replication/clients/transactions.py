"""A transactional producer's side of KIP-98 and KIP-447: Kafka's ``TransactionManager``, for
`replication.clients.producer.Producer` with ``transactional.id``.

Theory of operation
-------------------
The transactional id's coordinator is the leader of its ``__transaction_state`` partition,
found with FindCoordinator (key type 1) and found again after NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS (`GroupClient` with
``key_type=COORDINATOR_KEY_TYPE_TRANSACTION``). The client's states (Kafka's)::

    UNINITIALIZED --init_transactions--> READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> COMMITTING --EndTxn(commit)--> READY
    IN_TRANSACTION | ABORTABLE_ERROR --abort_transaction--> ABORTING --EndTxn(abort)--> READY
    IN_TRANSACTION --a failed batch, AddPartitionsToTxn or TxnOffsetCommit--> ABORTABLE_ERROR
    any --ProducerFenced, InvalidProducerEpoch, a producer id mapping lost--> FATAL_ERROR

*InitProducerId* with the transactional id and ``transaction.timeout.ms`` gives the producer
id and a new epoch: every older producer of the id is fenced (its next request gets
PRODUCER_FENCED) and its open transaction aborted. CONCURRENT_TRANSACTIONS (the previous
transaction's markers are still being written) is retried.

*Partitions.* ``send`` only queues (it raises `InvalidTxnStateError` outside a transaction);
the sender thread asks `partitions_to_add` for the queued partitions not yet in the
transaction and sends ONE AddPartitionsToTxn for them before draining, and drains only the
partitions the coordinator has added (`is_added`), so no batch reaches a leader before its
partition is in the transaction (which KIP-890 part 1's leaders would refuse).

*Offsets* (``send_offsets_to_transaction``, KIP-447): AddOffsetsToTxn puts the group's
``__consumer_offsets`` partition in the transaction, then TxnOffsetCommit gives the group
coordinator the offsets with the consumer's member id and epoch (a zombie consumer's are
refused); they become visible only with the commit marker.

*Ending.* ``commit_transaction`` flushes (every batch acknowledged), then EndTxn(commit); a
batch that failed makes the transaction abortable instead (the caller must abort).
``abort_transaction`` drops what is still queued after an error, waits for what is in flight,
then EndTxn(abort). Either returns once the coordinator has written PREPARE_*: the markers
follow (with ``transaction.version`` 2 the answer carries the epoch the coordinator bumped,
KIP-890 part 2, and the producer's next transaction uses it, sequences from 0), and a new
transaction's first AddPartitionsToTxn waits for them
(CONCURRENT_TRANSACTIONS, retried). After an abort caused by a lost sequence (a batch that
failed for good), InitProducerId with the current id and epoch bumps the epoch (KIP-360).
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final

import structlog

from kraft.metadata.features import TRANSACTION_VERSION_2
from kraft.types import TopicPartition
from replication.clients.group_membership import (
    COORDINATOR_ERRORS,
    ConsumerGroupMetadata,
    GroupClient,
    commit_topics,
)
from replication.messages import (
    COORDINATOR_KEY_TYPE_TRANSACTION,
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    TxnErrorResponse,
    TxnOffsetCommitRequest,
    TxnTopic,
)
from storage.errors import ErrorCode, InvalidTxnStateError, KraftError, error_for

if TYPE_CHECKING:
    from replication.clients.config import ProducerConfig
    from replication.clients.network import BrokerNetwork

log = structlog.get_logger("kraft.producer.txn")

FATAL_TXN_ERRORS: Final = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.INVALID_TRANSACTION_TIMEOUT,
    }
)
"""The producer cannot go on (Kafka's fatal errors): every later call raises it."""
_RETRY: Final = COORDINATOR_ERRORS | {ErrorCode.CONCURRENT_TRANSACTIONS}


class TxnClientState(enum.Enum):
    """Kafka's ``TransactionManager.State``."""

    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"


_SENDING: Final = frozenset(
    {TxnClientState.IN_TRANSACTION, TxnClientState.COMMITTING, TxnClientState.ABORTING}
)
"""States whose queued batches are sent (an abort without an error sends them, then aborts)."""


class TransactionManager:
    """The transaction of one `Producer` (see the module docstring). Thread-safe: the
    application thread calls the public methods, the sender thread `partitions_to_add`,
    `add_partitions`, `is_added` and `on_batch_failed`.

    Args:
        network: the producer's connections.
        config: the producer's config (``transactional.id``, ``transaction.timeout.ms``).
        on_fatal: the producer's hook for a fatal error (it fails every queued batch).
    """

    def __init__(
        self,
        network: BrokerNetwork,
        config: ProducerConfig,
        on_fatal: Callable[[KraftError], None],
    ) -> None:
        self.transactional_id = config.transactional_id
        self._config = config
        self._network = network
        self._coordinator = GroupClient(
            network, config.transactional_id, config, key_type=COORDINATOR_KEY_TYPE_TRANSACTION
        )
        self._on_fatal = on_fatal
        self._mutex = threading.Lock()
        self.state = TxnClientState.UNINITIALIZED
        self._error: KraftError | None = None
        self._added: set[TopicPartition] = set()
        self._started = False  # the coordinator has something of this transaction: EndTxn
        self._retry_add_at = 0.0

    # -- the application's calls ---------------------------------------------------------------

    def init(self, timeout_s: float, producer_id: int, producer_epoch: int) -> tuple[int, int]:
        """InitProducerId for the transactional id: (producer id, epoch). ``producer_id`` and
        ``producer_epoch`` are the current ones (-1: none) for KIP-360's bump after an abort.

        Raises:
            InvalidTxnStateError: already initialized (a bump, with the current id, is only
                between transactions).
            KraftError: a fatal error (e.g. INVALID_TRANSACTION_TIMEOUT), or a retriable one
                when ``timeout_s`` ran out.
        """
        with self._mutex:
            self._check_not_fatal()
            bump = producer_id >= 0 and self.state is TxnClientState.READY
            if self.state is not TxnClientState.UNINITIALIZED and not bump:
                raise InvalidTxnStateError(f"init_transactions in state {self.state.value}")
            if not bump:
                self.state = TxnClientState.INITIALIZING
        request = InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self._config.transaction_timeout_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )
        answer: list[InitProducerIdResponse] = []

        def attempt(address: str) -> ErrorCode | None:
            response = self._network.call(
                address, "InitProducerId", request, InitProducerIdResponse
            )
            if response.error_code in _RETRY:
                return response.error_code
            if response.error_code is not ErrorCode.NONE:
                raise error_for(response.error_code, response.error_message)
            answer.append(response)
            return None

        try:
            self._coordinator.retrying(timeout_s, attempt)
        except KraftError as e:
            self._fail(e)
            raise
        with self._mutex:
            self.state = TxnClientState.READY
        log.info(
            "transactions_initialized",
            transactional_id=self.transactional_id,
            producer_id=answer[0].producer_id,
            producer_epoch=answer[0].producer_epoch,
        )
        return answer[0].producer_id, answer[0].producer_epoch

    def begin(self) -> None:
        with self._mutex:
            self._check_not_fatal()
            if self.state is not TxnClientState.READY:
                raise InvalidTxnStateError(f"begin_transaction in state {self.state.value}")
            self.state = TxnClientState.IN_TRANSACTION

    def check_send(self) -> None:
        """``send`` may queue a record now (Kafka's ``maybeAddPartition`` checks).

        Raises:
            InvalidTxnStateError: no transaction is open; KraftError: the abortable or fatal
                error the transaction hit (abort it, or close the producer).
        """
        state = self.state
        if state is TxnClientState.IN_TRANSACTION:
            return
        if self._error is not None:
            raise self._error
        raise InvalidTxnStateError(
            f"send outside a transaction (state {state.value}): call begin_transaction()"
        )

    def send_offsets(
        self,
        offsets: Mapping[TopicPartition, int],
        group: ConsumerGroupMetadata,
        timeout_s: float,
        producer_id: int,
        producer_epoch: int,
    ) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator (KIP-447).

        Raises:
            InvalidTxnStateError: no transaction is open.
            KraftError: the coordinator's error (the transaction is then abortable, or the
                producer fenced).
        """
        with self._mutex:
            self._check_open("send_offsets_to_transaction")
        add = AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            group_id=group.group_id,
        )
        request = TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            commit=OffsetCommitRequest(
                group_id=group.group_id,
                generation_id_or_member_epoch=group.generation_id,
                member_id=group.member_id,
                topics=commit_topics(offsets),
            ),
        )

        def commit(address: str) -> ErrorCode | None:
            response = self._network.call(address, "TxnOffsetCommit", request, OffsetCommitResponse)
            codes = [response.error_code]
            codes += [p.error_code for t in response.topics for p in t.partitions]
            failed = [c for c in codes if c is not ErrorCode.NONE]
            if not failed:
                return None
            if failed[0] in _RETRY:
                return failed[0]
            message = response.error_message or f"TxnOffsetCommit: {failed[0].name}"
            raise error_for(failed[0], message)

        try:
            self._coordinator.retrying(
                timeout_s, lambda a: self._txn_call(a, "AddOffsetsToTxn", add)
            )
            with self._mutex:
                self._started = True
            GroupClient(self._network, group.group_id, self._config).retrying(timeout_s, commit)
        except KraftError as e:
            self._fail(e)
            raise

    def end(
        self, *, commit: bool, timeout_s: float, producer_id: int, producer_epoch: int
    ) -> tuple[int, int]:
        """EndTxn (when the coordinator has anything of this transaction), then READY.

        Returns:
            The producer id and epoch to go on with: with ``transaction.version`` 2 finalized
            the coordinator bumps the epoch at every end (KIP-890 part 2), else the same.

        Raises:
            KraftError: the coordinator's error (a fatal one fences the producer).
        """
        with self._mutex:
            started = self._started
        after = (producer_id, producer_epoch)
        if started:
            request = EndTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                committed=commit,
                # NB: the coordinator uses version 2 only when the cluster finalized it.
                transaction_version=TRANSACTION_VERSION_2,
            )
            answered: list[EndTxnResponse] = []

            def attempt(address: str) -> ErrorCode | None:
                response = self._network.call(address, "EndTxn", request, EndTxnResponse)
                answered.append(response)
                return _retry_or_raise(response.error_code, response.error_message, "EndTxn")

            try:
                self._coordinator.retrying(timeout_s, attempt)
            except KraftError as e:
                self._fail(e)
                raise
            last = answered[-1]
            if last.producer_id >= 0 and last.producer_epoch >= 0:
                after = (last.producer_id, last.producer_epoch)
        with self._mutex:
            self._added.clear()
            self._started = False
            self._error = None
            self.state = TxnClientState.READY
        return after

    def begin_commit(self) -> None:
        """IN_TRANSACTION -> COMMITTING.

        Raises:
            KraftError: the transaction's abortable error (abort it), or a fatal one.
            InvalidTxnStateError: no transaction is open.
        """
        with self._mutex:
            if self.state is not TxnClientState.COMMITTING:  # a retry after a timeout
                self._check_open("commit_transaction")
            self.state = TxnClientState.COMMITTING

    def begin_abort(self) -> bool:
        """-> ABORTING; True if the transaction had failed (drop its queued batches).

        Raises:
            KraftError: the fatal error; InvalidTxnStateError: no transaction to abort.
        """
        with self._mutex:
            self._check_not_fatal()
            if self.state not in (
                TxnClientState.IN_TRANSACTION,
                TxnClientState.ABORTABLE_ERROR,
                TxnClientState.COMMITTING,  # a commit that failed (its flush or EndTxn)
            ):
                raise InvalidTxnStateError(f"abort_transaction in state {self.state.value}")
            failed = self.state is not TxnClientState.IN_TRANSACTION
            self.state = TxnClientState.ABORTING
            return failed

    @property
    def error(self) -> KraftError | None:
        return self._error

    # -- the sender thread's calls -------------------------------------------------------------

    def partitions_to_add(self, queued: Iterable[TopicPartition]) -> set[TopicPartition]:
        """The queued partitions to add to the transaction now (none while backing off)."""
        with self._mutex:
            if self.state not in _SENDING:
                return set()
            if time.monotonic() < self._retry_add_at:
                return set()
            return {tp for tp in queued if tp not in self._added}

    def is_added(self, tp: TopicPartition) -> bool:
        return tp in self._added

    def add_partitions(
        self, partitions: set[TopicPartition], producer_id: int, producer_epoch: int
    ) -> None:
        """ONE AddPartitionsToTxn (the sender thread must not wait): added partitions become
        sendable; a retriable error is retried after ``retry.backoff.ms``; another makes the
        transaction abortable, or the producer fenced."""
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            topics=tuple(TxnTopic(name=t, partitions=tuple(p)) for t, p in by_topic.items()),
        )
        timeout_s = self._config.request_timeout_ms / 1000
        try:
            address = self._coordinator.coordinator(timeout_s)
            response = self._network.call(
                address, "AddPartitionsToTxn", request, AddPartitionsToTxnResponse, timeout_s
            )
        except KraftError as e:
            if not e.retriable:
                self._fail(e)
                return
            self._coordinator.forget_coordinator()
            self._back_off_adding()
            return
        codes = {p.error_code for t in response.results for p in t.partitions}
        codes.discard(ErrorCode.NONE)
        if not codes:
            with self._mutex:
                self._added |= partitions
                self._started = True
            return
        code = min(codes, key=lambda c: c.value)
        if code in COORDINATOR_ERRORS:
            self._coordinator.forget_coordinator()
        if code in _RETRY:
            self._back_off_adding()
            return
        self._fail(error_for(code, f"AddPartitionsToTxn: {code.name}"))

    def on_batch_failed(self, error: KraftError) -> None:
        """A batch of the transaction failed for good: it can only be aborted now."""
        self._fail(error)

    # -- errors --------------------------------------------------------------------------------

    def _txn_call(
        self, address: str, method: str, request: AddOffsetsToTxnRequest
    ) -> ErrorCode | None:
        response = self._network.call(address, method, request, TxnErrorResponse)
        return _retry_or_raise(response.error_code, response.error_message, method)

    def _back_off_adding(self) -> None:
        with self._mutex:
            self._retry_add_at = time.monotonic() + self._config.retry_backoff_ms / 1000

    def _fail(self, error: KraftError) -> None:
        fatal = error.code in FATAL_TXN_ERRORS
        with self._mutex:
            if self.state is TxnClientState.FATAL_ERROR:
                return
            if fatal:
                self.state = TxnClientState.FATAL_ERROR
            elif self.state in (TxnClientState.IN_TRANSACTION, TxnClientState.COMMITTING):
                self.state = TxnClientState.ABORTABLE_ERROR
            elif self.state is TxnClientState.INITIALIZING:
                self.state = TxnClientState.UNINITIALIZED  # init_transactions may be retried
                return
            else:
                return
            self._error = error
        log.warning(
            "transaction_failed",
            transactional_id=self.transactional_id,
            error=error.code.name,
            fatal=fatal,
        )
        if fatal:
            self._on_fatal(error)

    def _check_not_fatal(self) -> None:
        if self.state is TxnClientState.FATAL_ERROR and self._error is not None:
            raise self._error

    def _check_open(self, call: str) -> None:
        self._check_not_fatal()
        if self.state is TxnClientState.ABORTABLE_ERROR and self._error is not None:
            raise self._error
        if self.state is not TxnClientState.IN_TRANSACTION:
            raise InvalidTxnStateError(f"{call} in state {self.state.value}")


def _retry_or_raise(code: ErrorCode, message: str, method: str) -> ErrorCode | None:
    """None when done, the code when it is retried, else its exception raised."""
    if code is ErrorCode.NONE:
        return None
    if code in _RETRY:
        return code
    raise error_for(code, message or f"{method} failed")


__all__ = ["FATAL_TXN_ERRORS", "TransactionManager", "TxnClientState"]
