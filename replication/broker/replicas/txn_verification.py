"""The partition leader's side of KIP-890 part 1 on a broker: the shell around
`replication.txn.verification` (read its docstring first).

`TxnVerifier.gates` takes one Produce's partitions that this broker leads and answers, per
partition with a transactional batch, a `Gate`: refused now (the coordinator said no, or could
not be asked), or admitted with a check that `PartitionReplica.produce` runs right before the
append (the guard still holds, or the producer's transaction is open there by then). The
verify_only entries go to each coordinator broker in `AddPartitionsToTxnBatch` calls, one in
flight per broker (the core's `VerificationBatcher`); this broker's own coordinator is called
in process. A guard is the producer's marker count on the partition when the leader asked
(`ProducerStateManager.markers_seen`): a marker appended since revokes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import grpc

from kraft.metadata.features import TRANSACTION_VERSION_2
from kraft.types import TRANSACTION_STATE_TOPIC, TopicPartition
from replication.codec import decode, encode
from replication.group import partition_for_group
from replication.messages import (
    AddPartitionsToTxnBatchRequest,
    AddPartitionsToTxnBatchResponse,
    AddPartitionsToTxnRequest,
    TxnTopic,
)
from replication.txn.verification import (
    IMPLICIT_ADD_PRODUCE_VERSION,
    BatchFacts,
    Outgoing,
    VerificationBatcher,
    VerificationGuard,
    Verified,
    VerifyTxn,
    admit,
    batch_facts,
    plan_verification,
    produce_error,
)
from storage.errors import ErrorCode, KraftError
from storage.records import read_header

if TYPE_CHECKING:
    from kraft.metadata import MetadataImage
    from replication.broker.host import ServedReplica
    from replication.core import ProducerStateManager

VERIFY_TIMEOUT_S: Final = 5.0
"""How long one AddPartitionsToTxnBatch call may take (Kafka: ``request.timeout.ms``)."""

LocalCoordinator = Callable[
    [AddPartitionsToTxnBatchRequest], Awaitable[AddPartitionsToTxnBatchResponse]
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Gate:
    """One partition's verdict: ``error_code`` set when refused; else `admit`, run with the
    append."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    admit: Callable[[], ErrorCode] | None = None


def _admit(
    replica: ServedReplica,
    facts: BatchFacts,
    guard: tuple[ProducerStateManager, VerificationGuard] | None,
) -> Callable[[], ErrorCode]:
    producer_id = facts.producer_id

    def check() -> ErrorCode:  # step 5, synchronously with the append
        state = replica.producer_state
        return admit(
            open_here=state.has_ongoing_transaction(producer_id, facts.producer_epoch),
            guard=guard[1] if guard is not None and guard[0] is state else None,
            markers_seen=state.markers_seen(producer_id),
        )

    return check


def _facts(replica: ServedReplica, records: bytes) -> BatchFacts | None:
    try:
        header = read_header(records)
    except KraftError:
        return None  # the leader's validation answers it
    return batch_facts(header, replica.producer_state)


class TxnVerifier:
    """KIP-890 part 1 on one broker (see the module docstring).

    Args:
        image: the broker's metadata image (where each coordinator is).
        node_id: this broker.
        stub: a ``kraft.v1.Broker`` gRPC stub by address.
        local: this broker's own coordinators' AddPartitionsToTxnBatch.
        verify: ``transaction.partition.verification.enable`` (part 1; version-2 clients'
            partitions are added whatever it says: nothing else adds them).
        add_retry_backoff_ms, add_retry_max_ms: ``add.partitions.to.txn.retry.backoff.ms``
            and ``.max.ms``: a Produce v12+'s add that the coordinator answers
            CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being
            written) is asked again after the backoff, for up to the max, before the Produce
            gets NOT_ENOUGH_REPLICAS (Kafka's KAFKA-18654).
    """

    def __init__(
        self,
        *,
        image: Callable[[], MetadataImage],
        node_id: int,
        stub: Callable[[str], Any],
        local: LocalCoordinator,
        verify: bool = True,
        add_retry_backoff_ms: int = 20,
        add_retry_max_ms: int = 100,
    ) -> None:
        self._verify = verify
        self._add_retry_backoff_s = add_retry_backoff_ms / 1000
        self._add_retry_max_s = add_retry_max_ms / 1000
        self._image = image
        self._node_id = node_id
        self._stub = stub
        self._local = local
        self._batcher = VerificationBatcher()
        self._waiting: dict[int, asyncio.Future[Verified]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def gates(
        self,
        transactional_id: str,
        leading: Mapping[TopicPartition, tuple[ServedReplica, bytes]],
        produce_version: int,
    ) -> dict[TopicPartition, Gate]:
        """The `Gate` of each partition with a transactional batch (see the module docstring).
        A Produce v12+ (a transaction-version-2 client) has its partitions added, the others
        verified when ``transaction.partition.verification.enable`` is on."""
        add = produce_version >= IMPLICIT_ADD_PRODUCE_VERSION
        if not add and not self._verify:
            return {}
        facts = {
            tp: f for tp, (replica, records) in leading.items() if (f := _facts(replica, records))
        }
        if not facts:
            return {}
        plan = plan_verification(transactional_id, facts, add=add)
        if plan.refused:
            return {
                tp: Gate(error_code=code, error_message="more than one producer id")
                for tp, code in plan.refused.items()
            }
        guards: dict[TopicPartition, tuple[ProducerStateManager, VerificationGuard]] = {}
        errors: Mapping[TopicPartition, ErrorCode] = {}
        if plan.verify is not None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._add_retry_max_s
            while True:
                for tp in plan.verify.partitions:  # step 2, before (each time) asking
                    state = leading[tp][0].producer_state
                    seen = state.markers_seen(plan.verify.producer_id)
                    guards[tp] = (state, VerificationGuard(markers_seen=seen))
                errors = await self._ask(plan.verify)
                # KAFKA-18654: the previous transaction's markers are usually a few ms from
                # done; an add waits for them here rather than in the client's retry backoff.
                if not (
                    add
                    and ErrorCode.CONCURRENT_TRANSACTIONS in errors.values()
                    and loop.time() + self._add_retry_backoff_s <= deadline
                ):
                    break
                await asyncio.sleep(self._add_retry_backoff_s)
        out = {}
        for tp, f in facts.items():
            if (code := errors.get(tp, ErrorCode.NONE)) is not ErrorCode.NONE:
                code, message = produce_error(code, produce_version)
                out[tp] = Gate(error_code=code, error_message=message)
            else:
                out[tp] = Gate(admit=_admit(leading[tp][0], f, guards.get(tp)))
        return out

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        add: bool = True,
    ) -> Mapping[TopicPartition, ErrorCode]:
        """Add ``partitions`` to the producer's transaction at its coordinator (KIP-890 part
        2: a version-2 client's TxnOffsetCommit adds the group's partition this way), or with
        ``add=False`` verify they are in it (part 1: an older client's TxnOffsetCommit, whose
        AddOffsetsToTxn added it; nothing is asked with the verification off); the
        coordinator's error per partition that failed."""
        if not add and not self._verify:
            return {}
        return await self._ask(
            VerifyTxn(
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                partitions=partitions,
                add=add,
            )
        )

    # --- the calls to the coordinators --------------------------------------------------------

    async def _ask(self, txn: VerifyTxn) -> Mapping[TopicPartition, ErrorCode]:
        ticket, done = self._batcher.submit(self._coordinator(txn.transactional_id), txn)
        future: asyncio.Future[Verified] = asyncio.get_running_loop().create_future()
        self._waiting[ticket] = future
        self._finish(done)
        self._pump()
        return (await future).errors

    def _coordinator(self, transactional_id: str) -> int | None:
        description = self._image().describe_topic(TRANSACTION_STATE_TOPIC)
        if description is None or not description.partitions:
            return None
        partition = partition_for_group(transactional_id, len(description.partitions))
        leader = description.partitions[partition].leader
        return leader if leader >= 0 else None

    def _finish(self, done: list[Verified]) -> None:
        for verified in done:
            future = self._waiting.pop(verified.ticket, None)
            if future is not None and not future.done():
                future.set_result(verified)

    def _pump(self) -> None:
        for outgoing in self._batcher.poll():
            task = asyncio.create_task(self._send(outgoing), name="txn-verify")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, outgoing: Outgoing) -> None:
        request = AddPartitionsToTxnBatchRequest(
            transactions=tuple(
                AddPartitionsToTxnRequest(
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    producer_epoch=t.producer_epoch,
                    topics=_topics(t.partitions),
                    verify_only=not t.add,
                    transaction_version=TRANSACTION_VERSION_2 if t.add else 0,
                )
                for t in outgoing.transactions
            )
        )
        answer: Mapping[str, Mapping[TopicPartition, ErrorCode]] | ErrorCode
        try:
            # NB: bounded, the local call too: entries for this broker queue behind it.
            response = await asyncio.wait_for(
                self._call(outgoing.node, request), VERIFY_TIMEOUT_S + 1
            )
            answer = (
                ErrorCode.NETWORK_EXCEPTION
                if response is None
                else {
                    r.transactional_id: {
                        TopicPartition(t.name, p.partition_index): p.error_code
                        for t in r.results
                        for p in t.partitions
                    }
                    for r in response.transactions
                }
            )
        except KraftError as e:
            answer = e.code
        except Exception:  # a timeout, a bug: the Produce retries (NOT_ENOUGH_REPLICAS)
            answer = ErrorCode.NETWORK_EXCEPTION
        self._finish(self._batcher.answered(outgoing.node, answer))
        self._pump()

    async def _call(
        self, node: int, request: AddPartitionsToTxnBatchRequest
    ) -> AddPartitionsToTxnBatchResponse | None:
        if node == self._node_id:
            return await self._local(request)
        registration = self._image().broker(node)
        if registration is None or not registration.listeners:
            return None
        try:
            reply = await self._stub(registration.listeners[0].address).AddPartitionsToTxnBatch(
                encode(request), timeout=VERIFY_TIMEOUT_S
            )
        except grpc.RpcError:
            return None
        response: AddPartitionsToTxnBatchResponse = decode(reply, AddPartitionsToTxnBatchResponse)
        return response

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for future in self._waiting.values():
            if not future.done():
                future.cancel()


def _topics(partitions: frozenset[TopicPartition]) -> tuple[TxnTopic, ...]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions, key=lambda t: (t.topic, t.partition)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return tuple(TxnTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items())


__all__ = ["Gate", "TxnVerifier"]
