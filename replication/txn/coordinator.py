"""The pure transaction coordinator of one ``__transaction_state`` partition (KIP-98): Kafka's
``TransactionCoordinator`` + ``TransactionStateManager``, with no clock, no I/O, no randomness.

The broker shell (`replication.broker.txn_runtime`) drives it as it drives the group
coordinator (`replication.broker.coordinators.group_runtime`)::

    coord = TxnCoordinator(TxnConfig(...))
    for key, value in committed_records_of_the_partition:   # on becoming its leader
        coord.replay(key, value)
    result = coord.end_txn(txn_id, producer_id, epoch, commit=True, now_ms=now)
    append result.records with acks=all; once committed replay them; send result.response
    for job in coord.pending_markers():      # PREPARE_COMMIT / PREPARE_ABORT, once committed
        write job's marker to each of job.partitions' leaders (WriteTxnMarkers)
        result = coord.complete(job, now_ms)  # COMPLETE_COMMIT / COMPLETE_ABORT

Writes see only replayed (committed) state, one at a time. A new leader replays the partition
and finds the transactions that were preparing in `pending_markers`: it writes their markers
again (a marker written twice is harmless: the partition's transaction index ignores a marker
of a producer with no open transaction).

The producer id of a new transactional id, or of one whose epoch is exhausted, comes from the
shell: `init_producer_id` answers `NEEDS_PRODUCER_ID` when it needs one and was given none.

Timers (`tick`): an ONGOING transaction older than its timeout is aborted with its epoch bumped,
which fences the producer (Kafka's ``abortTimedOutTransactions``); an idle id (EMPTY, COMPLETE_*)
not used for ``transactional.id.expiration.ms`` is deleted (a tombstone).

KIP-890 part 2 (``transaction.version`` 2, `kraft.metadata.features`): a version-2 client's
EndTxn bumps the epoch at every transaction's end (`end_txn`), its partitions are added by the
partition leaders (`add_partitions` with ``transaction_version=2``), and a transaction whose
end reaches the last epoch continues under a new producer id once its markers are written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar, final

from kraft.metadata.features import TRANSACTION_VERSION_2
from kraft.types import TopicPartition
from storage.errors import ErrorCode

from .records import Record, decode_key, decode_metadata, metadata_record, tombstone
from .state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnMetadata, TxnState

R = TypeVar("R")


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnConfig:
    """The coordinator's Kafka configs."""

    transaction_max_timeout_ms: int = 900_000
    """``transaction.max.timeout.ms``: InitProducerId refuses a longer transaction timeout."""
    transactional_id_expiration_ms: int = 604_800_000
    """``transactional.id.expiration.ms``: an idle id is deleted after this long."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdAndEpoch:
    error_code: ErrorCode = ErrorCode.NONE
    producer_id: int = -1
    producer_epoch: int = -1


NEEDS_PRODUCER_ID: Final = ProducerIdAndEpoch(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
"""`init_producer_id`'s answer when it must allocate an id and was given none: call it again
with one (this object is never sent to a client)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Result(Generic[R]):
    records: list[Record] = field(default_factory=list)
    response: R


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkerJob:
    """Markers to write for an ended transaction: one control batch per partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
    transaction_version: int = 0


MARKER_SETTLED: Final = frozenset(
    {ErrorCode.NONE, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}
)
"""A partition leader's answers after which a marker is not sent again: written, or the
producer or coordinator is past it, so the transaction is ended there (Kafka's
``TransactionMarkerRequestCompletionHandler``: "this txn can now be ignored")."""


@final
class TxnCoordinator:
    """The transactional ids of one ``__transaction_state`` partition (module docstring)."""

    def __init__(self, config: TxnConfig) -> None:
        self._config = config
        self._txns: dict[str, TxnMetadata] = {}
        self._next_abort_check_ms: int | None = None

    # --- state --------------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one committed record (load, or a write's records once committed)."""
        transactional_id = decode_key(key)
        if value is None:
            self._txns.pop(transactional_id, None)
        else:
            self._txns[transactional_id] = decode_metadata(transactional_id, value)

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    def transactions(self) -> dict[str, TxnMetadata]:
        return dict(self._txns)

    def snapshot_records(self) -> list[Record]:
        return [metadata_record(m) for _, m in sorted(self._txns.items())]

    def pending_markers(self) -> list[MarkerJob]:
        """The ended transactions whose markers are not all written (PREPARE_*)."""
        return [
            MarkerJob(
                transactional_id=m.transactional_id,
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
                commit=m.state is TxnState.PREPARE_COMMIT,
                partitions=m.partitions,
                transaction_version=m.client_transaction_version,
            )
            for _, m in sorted(self._txns.items())
            if m.state.is_preparing
        ]

    # --- InitProducerId -----------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        now_ms: int,
        *,
        expected_producer_id: int = -1,
        expected_producer_epoch: int = -1,
        new_producer_id: int | None = None,
    ) -> Result[ProducerIdAndEpoch]:
        """Kafka's ``handleInitProducerId`` with a transactional id: a producer id and a bumped
        epoch, which fences every producer of the id with an older one. An ongoing transaction
        is aborted first (the answer is then CONCURRENT_TRANSACTIONS: the client retries).
        ``expected_*`` is KIP-360's current id and epoch of a producer that recovers."""
        if not transactional_id:
            return _error(ErrorCode.INVALID_REQUEST)
        if timeout_ms <= 0 or timeout_ms > self._config.transaction_max_timeout_ms:
            return _error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        meta = self._txns.get(transactional_id)
        if meta is None:
            if new_producer_id is None:
                return Result(response=NEEDS_PRODUCER_ID)
            fresh = TxnMetadata(
                transactional_id=transactional_id,
                producer_id=new_producer_id,
                producer_epoch=0,
                timeout_ms=timeout_ms,
                state=TxnState.EMPTY,
                last_update_ms=now_ms,
            )
            return _answer(fresh)
        if expected_producer_id >= 0:
            if expected_producer_id != meta.producer_id:
                return _error(ErrorCode.PRODUCER_FENCED)
            if expected_producer_epoch == meta.last_producer_epoch and meta.state is TxnState.EMPTY:
                # NB: a retry of the bump that already happened: the answer it missed. EMPTY
                # only: the last bump was this InitProducerId's, not an end's (KIP-890 part 2
                # bumps at every end, and its old epoch must not get the new one here).
                return Result(response=_pid(meta))
            if expected_producer_epoch != meta.producer_epoch:
                return _error(ErrorCode.PRODUCER_FENCED)
        if meta.state.is_preparing:
            return _error(ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state is TxnState.ONGOING:
            # Fence the producer of the ongoing transaction and abort it; the caller retries.
            fenced = self._fence_and_abort(meta, now_ms)
            return Result(records=[metadata_record(fenced)], response=_concurrent())
        if meta.epoch_exhausted:
            if new_producer_id is None:
                return Result(response=NEEDS_PRODUCER_ID)
            bumped = meta.transition(
                TxnState.EMPTY,
                now_ms,
                producer_id=new_producer_id,
                producer_epoch=0,
                last_producer_epoch=NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms,
                partitions=frozenset(),
                start_ms=-1,
            )
        else:
            bumped = meta.transition(
                TxnState.EMPTY,
                now_ms,
                producer_epoch=meta.producer_epoch + 1,
                last_producer_epoch=meta.producer_epoch,
                timeout_ms=timeout_ms,
                partitions=frozenset(),
                start_ms=-1,
            )
        return _answer(bumped)

    def _fence_and_abort(self, meta: TxnMetadata, now_ms: int) -> TxnMetadata:
        """PREPARE_ABORT with the epoch bumped (if not exhausted): Kafka's
        ``prepareFenceProducerEpoch`` then ``prepareAbortOrCommit``, in one record."""
        epoch = meta.producer_epoch if meta.epoch_exhausted else meta.producer_epoch + 1
        return meta.transition(
            TxnState.PREPARE_ABORT,
            now_ms,
            producer_epoch=epoch,
            last_producer_epoch=meta.producer_epoch,
        )

    # --- AddPartitionsToTxn, AddOffsetsToTxn --------------------------------------------------

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        now_ms: int,
        *,
        transaction_version: int = 0,
    ) -> Result[ErrorCode]:
        """Kafka's ``handleAddPartitionsToTransaction`` (AddOffsetsToTxn adds the group's
        ``__consumer_offsets`` partition the same way): the transaction becomes ONGOING.
        ``transaction_version`` 2: a partition leader adds them for a version-2 client
        (KIP-890 part 2), which the transaction records."""
        meta, code = self._producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return Result(response=code)
        if meta.state.is_preparing:
            return Result(response=ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state is TxnState.ONGOING and partitions <= meta.partitions:
            return Result(response=ErrorCode.NONE)  # nothing new: no record
        start_ms = meta.start_ms if meta.state is TxnState.ONGOING else now_ms
        ongoing = meta.transition(
            TxnState.ONGOING,
            now_ms,
            partitions=(meta.partitions if meta.state is TxnState.ONGOING else frozenset())
            | partitions,
            start_ms=start_ms,
            client_transaction_version=max(
                transaction_version,
                meta.client_transaction_version if meta.state is TxnState.ONGOING else 0,
            ),
        )
        return Result(records=[metadata_record(ongoing)], response=ErrorCode.NONE)

    def verify_partition(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        """KIP-890 part 1's check (AddPartitionsToTxn v4 ``verify_only``): is ``tp`` in the
        ongoing transaction of this producer? NONE; TRANSACTION_ABORTABLE if not (Kafka 4's
        ``handleVerifyPartitionsInTransaction``); CONCURRENT_TRANSACTIONS while the last one's
        markers are written; or the fencing error."""
        meta, code = self._producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return code
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state is not TxnState.ONGOING or tp not in meta.partitions:
            return ErrorCode.TRANSACTION_ABORTABLE
        return ErrorCode.NONE

    # --- EndTxn -------------------------------------------------------------------------------

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        now_ms: int,
        transaction_version: int = 0,
        new_producer_id: int | None = None,
    ) -> Result[ProducerIdAndEpoch]:
        """Kafka's ``handleEndTransaction``: ONGOING -> PREPARE_COMMIT/ABORT; the markers follow
        (`pending_markers`). The answer carries the producer id and epoch the producer goes on
        with. A retry after the end is answered as the end was.

        With ``transaction_version`` 2 (EndTxn v5+, KIP-890 part 2) the epoch is bumped at
        every end: PREPARE_* holds the new epoch, the markers carry it, and the producer's next
        transaction uses it, so a late batch of this one is fenced on every partition. When
        the bump reaches the last epoch, the transaction continues under a new producer id
        (``new_producer_id``; `NEEDS_PRODUCER_ID` when it is needed and None). A version-2
        abort with no transaction ongoing still bumps the epoch (the producer's batches may
        have failed to join one)."""
        v2 = transaction_version >= TRANSACTION_VERSION_2
        meta = self._txns.get(transactional_id)
        if v2 and meta is not None and _is_retry_of_v2_end(meta, producer_id, producer_epoch):
            preparing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            if meta.state in (preparing, done):
                return Result(response=_next_pid(meta))
            return _error(ErrorCode.INVALID_TXN_STATE)
        meta, code = self._producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return _error(code)
        state = meta.state
        if state is TxnState.ONGOING or (v2 and not commit and state.is_complete):
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            changes: dict[str, object] = {"client_transaction_version": transaction_version}
            if state is not TxnState.ONGOING:  # nothing joined: an abort with no markers
                changes.update(partitions=frozenset(), start_ms=now_ms)
            if v2:
                if meta.epoch_exhausted:
                    if new_producer_id is None:
                        return Result(response=NEEDS_PRODUCER_ID)
                    changes["next_producer_id"] = new_producer_id
                changes.update(
                    producer_epoch=meta.producer_epoch + 1,
                    last_producer_epoch=meta.producer_epoch,
                )
            if state is not TxnState.ONGOING:
                meta = meta.transition(TxnState.ONGOING, now_ms)  # NB: never recorded
            prepared = meta.transition(target, now_ms, **changes)
            return Result(records=[metadata_record(prepared)], response=_next_pid(prepared))
        done, preparing = (
            (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT)
            if commit
            else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT)
        )
        if state is done and not v2:
            return Result(response=_pid(meta))
        if state is preparing or (v2 and state.is_preparing):
            return _error(ErrorCode.CONCURRENT_TRANSACTIONS)
        return _error(ErrorCode.INVALID_TXN_STATE)

    def complete(self, job: MarkerJob, now_ms: int) -> Result[ErrorCode]:
        """Every marker of ``job`` is written: COMPLETE_COMMIT / COMPLETE_ABORT (no record if
        the transaction moved on meanwhile, e.g. the job ran twice). A transaction whose end
        exhausted the epoch continues under its next producer id, at epoch 0."""
        meta = self._txns.get(job.transactional_id)
        want = TxnState.PREPARE_COMMIT if job.commit else TxnState.PREPARE_ABORT
        if (
            meta is None
            or meta.state is not want
            or meta.producer_id != job.producer_id
            or meta.producer_epoch != job.producer_epoch
        ):
            return Result(response=ErrorCode.NONE)
        target = TxnState.COMPLETE_COMMIT if job.commit else TxnState.COMPLETE_ABORT
        rotated: dict[str, object] = {}
        if meta.next_producer_id != NO_PRODUCER_ID:
            rotated = {
                "producer_id": meta.next_producer_id,
                "producer_epoch": 0,
                "previous_producer_id": meta.producer_id,
                "last_producer_epoch": meta.producer_epoch - 1,
                "next_producer_id": NO_PRODUCER_ID,
            }
        done = meta.transition(target, now_ms, partitions=frozenset(), start_ms=-1, **rotated)
        return Result(records=[metadata_record(done)], response=ErrorCode.NONE)

    def _producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[TxnMetadata | None, ErrorCode]:
        """The metadata if the request's producer is the id's current one, else the error."""
        meta = self._txns.get(transactional_id)
        if meta is not None and meta.state.is_preparing and producer_id == meta.next_producer_id:
            # KIP-890 part 2: the producer already took the next id its end answered; the
            # markers are still being written (the callers answer CONCURRENT_TRANSACTIONS).
            return (meta, ErrorCode.NONE) if producer_epoch == 0 else (None, _FENCED)
        if meta is None or meta.producer_id != producer_id:
            return None, ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != meta.producer_epoch:
            return None, ErrorCode.PRODUCER_FENCED
        return meta, ErrorCode.NONE

    # --- timers -------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        due: list[int] = []
        for m in self._txns.values():
            if m.state is TxnState.ONGOING:
                due.append(m.start_ms + m.timeout_ms)
            elif m.state.is_complete:
                due.append(m.last_update_ms + self._config.transactional_id_expiration_ms)
        return min(due) if due else None

    def tick(self, now_ms: int, topics: object = None) -> list[Record]:
        """Abort timed-out transactions (epoch bumped: the producer is fenced) and delete
        expired transactional ids. ``topics`` is unused (the runtime's shape)."""
        del topics
        records: list[Record] = []
        for _, meta in sorted(self._txns.items()):
            if meta.state is TxnState.ONGOING and meta.start_ms + meta.timeout_ms <= now_ms:
                records.append(metadata_record(self._fence_and_abort(meta, now_ms)))
            elif (
                meta.state.is_complete
                and meta.last_update_ms + self._config.transactional_id_expiration_ms <= now_ms
            ):
                records.append(tombstone(meta.transactional_id))
        return records


_FENCED: Final = ErrorCode.PRODUCER_FENCED


def _is_retry_of_v2_end(meta: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
    """A version-2 EndTxn from the epoch its end bumped from (the answer was lost)."""
    return (
        meta.client_transaction_version >= TRANSACTION_VERSION_2
        and (meta.state.is_preparing or meta.state in _COMPLETED)
        and producer_epoch == meta.last_producer_epoch
        and producer_id in (meta.producer_id, meta.previous_producer_id)
        and producer_epoch >= 0
    )


_COMPLETED: Final = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


def _next_pid(meta: TxnMetadata) -> ProducerIdAndEpoch:
    """The producer id and epoch a producer goes on with after ``meta``'s end."""
    if meta.state.is_preparing and meta.next_producer_id != NO_PRODUCER_ID:
        return ProducerIdAndEpoch(producer_id=meta.next_producer_id, producer_epoch=0)
    return _pid(meta)


def _pid(meta: TxnMetadata) -> ProducerIdAndEpoch:
    return ProducerIdAndEpoch(producer_id=meta.producer_id, producer_epoch=meta.producer_epoch)


def _answer(meta: TxnMetadata) -> Result[ProducerIdAndEpoch]:
    return Result(records=[metadata_record(meta)], response=_pid(meta))


def _error(code: ErrorCode) -> Result[ProducerIdAndEpoch]:
    return Result(response=ProducerIdAndEpoch(error_code=code))


def _concurrent() -> ProducerIdAndEpoch:
    return ProducerIdAndEpoch(error_code=ErrorCode.CONCURRENT_TRANSACTIONS)


__all__ = [
    "NEEDS_PRODUCER_ID",
    "MarkerJob",
    "ProducerIdAndEpoch",
    "Result",
    "TxnConfig",
    "TxnCoordinator",
]
