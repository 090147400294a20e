"""KIP-890 part 1: a partition leader verifies a transaction before its first batch opens it
on the partition (Kafka's ``AddPartitionsToTxnManager``, ``VerificationGuard`` and the error
translation of ``ReplicaManager.handleProduceAppend``), pure: messages and time in, effects out.

Theory of operation
-------------------
A transactional batch for a producer with no transaction open on the partition would open one.
If the producer never added the partition to its transaction (a bug, or a late retry of a batch
whose transaction was aborted), nothing would ever write that transaction's marker: the
partition's last stable offset would hang there and read_committed consumers with it. So,
with ``transaction.partition.verification.enable`` (the default), the leader asks the
transactional id's coordinator first, with an AddPartitionsToTxn v4+ ``verify_only`` entry:

1. `plan_verification` takes the facts of one Produce's partitions (`BatchFacts`) and answers
   which need verifying (transactional, no transaction of this producer *at the batch's epoch*
   open here: `ProducerStateManager.has_ongoing_transaction`), and which are refused outright
   (more than one producer in the request: INVALID_PRODUCER_ID_MAPPING). NB: the epoch matters
   under KIP-890 part 2: EndTxn bumps the epoch and answers before the markers are written, so
   the client's next transaction (epoch + 1) can reach a partition where the previous one is
   still open. Taken as "open here", its batch would skip the coordinator (which answers
   CONCURRENT_TRANSACTIONS until the markers are in), join the previous transaction and be
   committed or aborted by *its* marker.
2. Each such partition gets a `VerificationGuard`: the producer's markers the partition had
   seen when the leader asked. A marker since revokes it. Kafka's ABA: verified, then the
   transaction aborted and a new one begun without this partition, then the stale
   verification used to append.
3. `VerificationBatcher` gathers the entries per coordinator broker: one request in flight per
   broker, the entries that arrive meanwhile sent together next (`submit`, `poll`,
   `answered`). NB: Kafka answers the older of two entries of one transactional id and epoch
   NETWORK_EXCEPTION; here both wait for one answer (same epoch: their partitions merge).
   A newer epoch fences the older entry (INVALID_PRODUCER_EPOCH), as in Kafka.
4. `produce_error` turns the coordinator's per-partition answer into the Produce's error, by
   Produce version: PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE ->
   INVALID_TXN_STATE below Produce v11 (clients that know TRANSACTION_ABORTABLE get it);
   the coordinator's retriable errors -> NOT_ENOUGH_REPLICAS (retried by every client, no
   metadata refresh).
   KIP-890 part 2: for a transaction-version-2 client (Produce v12+, or a TxnOffsetCommit v5+
   on the group coordinator) the entry asks the coordinator to *add* the partitions instead
   (``VerifyTxn.add``): such a client sends no AddPartitionsToTxn of its own.
5. Right before the append (synchronously with it), `admit`: the guard must still hold,
   unless the producer's transaction (of the batch's epoch) is open on the partition by then;
   else INVALID_TXN_STATE
   and nothing is appended. Once the batch is in, the open transaction itself is the proof for
   the next batches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, final

from kraft.types import TopicPartition
from storage.errors import ErrorCode

if TYPE_CHECKING:
    from replication.core.producer_state import ProducerStateManager
    from storage.records import BatchHeader

IMPLICIT_ADD_PRODUCE_VERSION: Final = 12
"""The first Produce version of transaction-version-2 clients (KIP-890 part 2): the leader adds
a transactional batch's partition to the transaction (Kafka's ``addPartition`` operation)."""
TRANSACTION_ABORTABLE_PRODUCE_VERSION: Final = 11
"""The first Produce version whose clients handle TRANSACTION_ABORTABLE (Kafka's
``genericError`` operation, KIP-890)."""

RETRIABLE_VERIFICATION_ERRORS: Final = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)
"""What the leader answers NOT_ENOUGH_REPLICAS instead (Kafka: older clients may not retry
these on a Produce)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchFacts:
    """What the leader knows of one partition of a Produce."""

    producer_id: int
    producer_epoch: int
    transactional: bool
    open_here: bool
    """This producer's transaction at this epoch is already open on the partition (its batches
    are in): `ProducerStateManager.has_ongoing_transaction`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyTxn:
    """One AddPartitionsToTxn v4+ entry with ``verify_only``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    add: bool = False
    """KIP-890 part 2: add the partitions to the transaction (a version-2 client sends no
    AddPartitionsToTxn), not only verify them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    refused: Mapping[TopicPartition, ErrorCode] = field(default_factory=dict)
    verify: VerifyTxn | None = None


def batch_facts(header: BatchHeader, state: ProducerStateManager) -> BatchFacts | None:
    """The `BatchFacts` of a produced batch on a partition with producer ``state``; None for a
    batch that is not transactional (nothing to verify)."""
    if not header.is_transactional or header.is_control or header.producer_id < 0:
        return None
    return BatchFacts(
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        transactional=True,
        open_here=state.has_ongoing_transaction(header.producer_id, header.producer_epoch),
    )


def plan_verification(
    transactional_id: str, batches: Mapping[TopicPartition, BatchFacts], *, add: bool = False
) -> Plan:
    """Which partitions of one Produce need verifying (see the module docstring, step 1), or
    adding (``add``: a transaction-version-2 client's Produce v12+, KIP-890 part 2).

    A Produce without a transactional id is not verified (Kafka's old clients): its
    transactional batches then fail the append's check unless their transaction is open."""
    txn = {tp: b for tp, b in batches.items() if b.transactional}
    producers = {(b.producer_id, b.producer_epoch) for b in txn.values()}
    if len(producers) > 1:  # Kafka: InvalidPidMappingException for the whole request
        return Plan(refused=dict.fromkeys(batches, ErrorCode.INVALID_PRODUCER_ID_MAPPING))
    wanted = frozenset(tp for tp, b in txn.items() if not b.open_here)
    if not wanted or not transactional_id:
        return Plan()
    ((producer_id, producer_epoch),) = producers
    return Plan(
        verify=VerifyTxn(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            partitions=wanted,
            add=add,
        )
    )


def produce_error(code: ErrorCode, produce_version: int) -> tuple[ErrorCode, str]:
    """The Produce's error and message for a coordinator's answer ``code`` (step 4)."""
    if code is ErrorCode.NONE:
        return code, ""
    if code is ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH, "the producer was fenced by a newer epoch"
    if code is ErrorCode.TRANSACTION_ABORTABLE:
        if produce_version >= TRANSACTION_ABORTABLE_PRODUCE_VERSION:
            return code, "Partition was not added to the transaction"
        code = ErrorCode.INVALID_TXN_STATE
    if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.CLUSTER_AUTHORIZATION_FAILED):
        return ErrorCode.INVALID_TXN_STATE, "Partition was not added to the transaction"
    if code in RETRIABLE_VERIFICATION_ERRORS:
        return (
            ErrorCode.NOT_ENOUGH_REPLICAS,
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {code.name}",
        )
    return code, ""


def txn_offset_commit_error(code: ErrorCode, *, add: bool = True) -> ErrorCode:
    """The TxnOffsetCommit error for the coordinator's answer to adding the group's partition
    (v5+, ``add``, KIP-890 part 2) or verifying it (older versions, part 1): the retriable ones
    become COORDINATOR_LOAD_IN_PROGRESS (every client retries it in place), a fenced producer
    INVALID_PRODUCER_EPOCH, and for the older clients, which do not know it,
    TRANSACTION_ABORTABLE INVALID_TXN_STATE (as `produce_error` below Produce v11)."""
    if code in RETRIABLE_VERIFICATION_ERRORS:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    if code is ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code is ErrorCode.TRANSACTION_ABORTABLE and not add:
        return ErrorCode.INVALID_TXN_STATE
    return code


# --- the guard (steps 2 and 5) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class VerificationGuard:
    """What the leader saw of a producer on a partition when it asked the coordinator: the
    producer's markers it had folded in (`ProducerStateManager.markers_seen`)."""

    markers_seen: int


def admit(*, open_here: bool, guard: VerificationGuard | None, markers_seen: int) -> ErrorCode:
    """Right before the append (step 5): NONE if the producer's transaction is open on the
    partition, or the coordinator verified it (``guard``) and no marker came since; else
    INVALID_TXN_STATE (Kafka: "Record was not part of an ongoing transaction")."""
    if open_here or (guard is not None and guard.markers_seen == markers_seen):
        return ErrorCode.NONE
    return ErrorCode.INVALID_TXN_STATE


# --- batching (step 3) --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Verified:
    """The answer to one `VerificationBatcher.submit`: the coordinator's error per partition."""

    ticket: int
    errors: Mapping[TopicPartition, ErrorCode]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outgoing:
    """One request to send: to broker ``node``, its entries (one per transactional id)."""

    node: int
    transactions: tuple[VerifyTxn, ...]


@dataclass(slots=True, kw_only=True)
class _Entry:
    txn: VerifyTxn
    tickets: dict[int, frozenset[TopicPartition]]


@final
class VerificationBatcher:
    """Kafka's ``AddPartitionsToTxnManager``: entries gathered per coordinator broker."""

    def __init__(self) -> None:
        self._pending: dict[int, dict[str, _Entry]] = {}
        self._in_flight: dict[int, dict[str, _Entry]] = {}
        self._next_ticket = 1

    def submit(self, node: int | None, txn: VerifyTxn) -> tuple[int, list[Verified]]:
        """Queue ``txn`` for coordinator broker ``node`` (None: unknown). Returns its ticket and
        the answers known now (this one's when it cannot be sent, or an older entry's that
        ``txn`` fences)."""
        ticket = self._next_ticket
        self._next_ticket += 1
        if node is None:
            return ticket, [_all(ticket, txn.partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)]
        pending = self._pending.setdefault(node, {})
        done: list[Verified] = []
        entry = pending.get(txn.transactional_id)
        if entry is not None:
            old = entry.txn
            if old.producer_epoch > txn.producer_epoch:
                return ticket, [_all(ticket, txn.partitions, ErrorCode.INVALID_PRODUCER_EPOCH)]
            if (old.producer_id, old.producer_epoch) == (txn.producer_id, txn.producer_epoch):
                entry.txn = VerifyTxn(
                    transactional_id=old.transactional_id,
                    producer_id=old.producer_id,
                    producer_epoch=old.producer_epoch,
                    partitions=old.partitions | txn.partitions,
                    add=old.add or txn.add,
                )
                entry.tickets[ticket] = txn.partitions
                return ticket, done
            done.extend(
                _all(t, tps, ErrorCode.INVALID_PRODUCER_EPOCH) for t, tps in entry.tickets.items()
            )
        pending[txn.transactional_id] = _Entry(txn=txn, tickets={ticket: txn.partitions})
        return ticket, done

    def poll(self) -> list[Outgoing]:
        """The requests to send now: each broker's pending entries, unless one is in flight."""
        out = []
        for node in [n for n, p in self._pending.items() if p and n not in self._in_flight]:
            entries = self._pending.pop(node)
            self._in_flight[node] = entries
            out.append(Outgoing(node=node, transactions=tuple(e.txn for e in entries.values())))
        return out

    def answered(
        self, node: int, answer: Mapping[str, Mapping[TopicPartition, ErrorCode]] | ErrorCode
    ) -> list[Verified]:
        """Broker ``node`` answered its request in flight: per transactional id and partition,
        or one error for all (the call failed: NETWORK_EXCEPTION)."""
        entries = self._in_flight.pop(node, {})
        done = []
        for tid, entry in entries.items():
            codes = answer if isinstance(answer, ErrorCode) else answer.get(tid)
            for ticket, tps in entry.tickets.items():
                if isinstance(codes, ErrorCode):
                    done.append(_all(ticket, tps, codes))
                elif codes is None:  # the coordinator left it out: ask again
                    done.append(_all(ticket, tps, ErrorCode.NETWORK_EXCEPTION))
                else:
                    errors = {
                        tp: c
                        for tp in tps
                        if (c := codes.get(tp, ErrorCode.NETWORK_EXCEPTION)) is not ErrorCode.NONE
                    }
                    done.append(Verified(ticket=ticket, errors=errors))
        return done


def _all(ticket: int, tps: frozenset[TopicPartition], code: ErrorCode) -> Verified:
    return Verified(ticket=ticket, errors=dict.fromkeys(tps, code))


__all__ = [
    "IMPLICIT_ADD_PRODUCE_VERSION",
    "BatchFacts",
    "Outgoing",
    "Plan",
    "VerificationBatcher",
    "VerificationGuard",
    "Verified",
    "VerifyTxn",
    "admit",
    "batch_facts",
    "plan_verification",
    "produce_error",
    "txn_offset_commit_error",
]
