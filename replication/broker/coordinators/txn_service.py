"""The transaction coordinator on a broker (KIP-98): InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, and the markers of ended transactions.

*Hosting.* As the group coordinator is hosted (`replication.broker.coordinators.group_runtime`): a
transactional id lives on partition ``abs(hashCode(id)) % partitions`` of
``__transaction_state`` (created on the first FindCoordinator with key type 1, compacted, with
``min.insync.replicas`` 2 as Kafka's ``transaction.state.log.min.isr``); the leader of that
partition runs a pure `replication.txn.TxnCoordinator` over it, on the same `GroupRuntime`:
each request's records are appended with acks=all and replayed once committed, then answered;
a new leader replays the partition.

*Markers.* `run_markers` watches the loaded coordinators' `pending_markers` (transactions in
PREPARE_COMMIT / PREPARE_ABORT, whether just ended, timed out or found by a new leader's replay)
and writes each one's markers to its partitions' leaders
(`replication.broker.coordinators.txn_markers`), retrying the partitions that failed; once all are
written it writes COMPLETE_COMMIT / COMPLETE_ABORT. The markers carry the coordinator's epoch: the
leader epoch of its partition.

*Verification (KIP-890 part 1).* Partition leaders ask ``verify_only`` questions here, many
transactional ids per call (`add_partitions_to_txn_batch`, the ``AddPartitionsToTxnBatch`` gRPC
call; `replication.broker.replicas.txn_verification` is the asking side).

*Transaction version 2 (KIP-890 part 2).* The same call adds a version-2 client's partitions
(its Produce v12+, its TxnOffsetCommit v5+ at the group coordinator); EndTxn bumps the epoch
when the client asks for version 2 and the cluster finalized it (`end_txn`).

*Producer ids.* A new transactional id, or one whose epoch is exhausted, takes an id from this
broker's block (`ProducerIds`, KIP-730), as an idempotent producer's does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

import structlog

from kraft.metadata.features import TRANSACTION_VERSION, TRANSACTION_VERSION_2, finalized_level
from kraft.types import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, TopicPartition
from replication.broker.coordinators.coordinator_lookup import OFFSETS_TOPIC_CONFIGS, InternalTopic
from replication.broker.coordinators.group_runtime import GroupRuntime
from replication.broker.coordinators.txn_markers import OffsetsMarkerHook, send_markers
from replication.group import partition_for_group
from replication.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnBatchRequest,
    AddPartitionsToTxnBatchResponse,
    AddPartitionsToTxnBatchResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    Coordinator,
    DescribedTransaction,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListedTransaction,
    ListTransactionsRequest,
    ListTransactionsResponse,
    TxnErrorResponse,
    TxnPartitionResult,
    TxnTopic,
    TxnTopicResult,
    WritableTxnMarker,
)
from replication.txn import (
    NEEDS_PRODUCER_ID,
    MarkerJob,
    TxnConfig,
    TxnCoordinator,
    TxnMetadata,
    TxnState,
)
from replication.txn.coordinator import ProducerIdAndEpoch
from storage.errors import CoordinatorNotAvailableError, ErrorCode, KraftError
from storage.log import wall_clock_ms

if TYPE_CHECKING:
    from replication.broker.host import GroupHost

MARKER_RETRY_S: Final = 0.1
"""How long the marker writer waits before retrying partitions whose leader failed."""
TRANSACTIONAL_ID_MAX_CHARS: Final = 255 * 4

_log = structlog.get_logger("replication.broker.coordinators.txn_service")


class TxnService:
    """The transaction APIs of one broker (see the module docstring).

    Args:
        server: the broker.
        new_producer_id: a fresh producer id from this broker's block (KIP-730).
        stub: a ``kraft.v1.Broker`` gRPC stub by address (markers to other leaders).
        on_offsets_marker: the group coordinator's hook for markers it writes here itself.
    """

    def __init__(
        self,
        server: GroupHost,
        new_producer_id: Callable[[], Awaitable[InitProducerIdResponse]],
        stub: Callable[[str], Any],
        on_offsets_marker: OffsetsMarkerHook,
    ) -> None:
        self._server = server
        self._on_offsets_marker = on_offsets_marker
        self._new_producer_id = new_producer_id
        self._stub = stub
        config = server.config
        self._config = TxnConfig(
            transaction_max_timeout_ms=config.transaction_max_timeout_ms,
            transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        )
        self.topic = InternalTopic(
            server,
            TRANSACTION_STATE_TOPIC,
            lambda: (
                config.transaction_state_log_num_partitions,
                config.transaction_state_log_replication_factor,
            ),
            # Latest-wins records kept until a coordinator snapshot moves the start, as the
            # offsets topic's (`OFFSETS_TOPIC_CONFIGS`).
            {
                **OFFSETS_TOPIC_CONFIGS,
                "min.insync.replicas": str(config.transaction_state_log_min_isr),
            },
        )
        self.runtime = GroupRuntime(
            replicas=lambda: server.replicas,
            new_coordinator=lambda: TxnCoordinator(self._config),
            topics=lambda: None,
            snapshot_interval_records=server.config.group_coordinator_snapshot_interval_records,
            node_id=server.node_id,
            topic=TRANSACTION_STATE_TOPIC,
        )
        self._in_flight: dict[tuple[str, int, int], asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._closed = False
        self._logger = _log.bind(node_id=server.node_id)

    # --- FindCoordinator ----------------------------------------------------------------------

    def find(self, transactional_id: str, listener: str = "") -> Coordinator:
        if not transactional_id or len(transactional_id) > TRANSACTIONAL_ID_MAX_CHARS:
            return Coordinator(
                key=transactional_id[:TRANSACTIONAL_ID_MAX_CHARS],
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="a transactional id is 1 to 1020 characters",
            )
        return self.topic.find(transactional_id, listener)

    def _partition_of(self, transactional_id: str) -> int:
        partitions = self.topic.partitions()
        if partitions is None:
            raise CoordinatorNotAvailableError(f"{TRANSACTION_STATE_TOPIC} does not exist yet")
        return partition_for_group(transactional_id, partitions)

    # --- InitProducerId -----------------------------------------------------------------------

    async def init_producer_id(self, request: InitProducerIdRequest) -> InitProducerIdResponse:
        tid = request.transactional_id

        def run(coordinator: TxnCoordinator, now: int, new_id: int | None) -> Any:
            return coordinator.init_producer_id(
                tid,
                request.transaction_timeout_ms,
                now,
                expected_producer_id=request.producer_id,
                expected_producer_epoch=request.producer_epoch,
                new_producer_id=new_id,
            )

        return await self._with_producer_id(tid, run)

    async def _with_producer_id(
        self,
        transactional_id: str,
        run: Callable[[TxnCoordinator, int, int | None], Any],
    ) -> InitProducerIdResponse:
        """Write ``run``'s records on the id's coordinator; when it answers
        `NEEDS_PRODUCER_ID`, take a fresh id from this broker's block and run it again."""
        new_id: int | None = None
        try:
            partition = self._partition_of(transactional_id)
            for _ in range(2):

                def write(c: Any, now: int, chosen: int | None = new_id) -> Any:
                    return run(c, now, chosen)

                answer: ProducerIdAndEpoch = await self.runtime.write(partition, write)
                if answer is not NEEDS_PRODUCER_ID:
                    self._wake.set()  # an ended or fenced transaction's markers are due
                    return InitProducerIdResponse(
                        error_code=answer.error_code,
                        producer_id=answer.producer_id,
                        producer_epoch=answer.producer_epoch,
                    )
                fresh = await self._new_producer_id()
                if fresh.error_code is not ErrorCode.NONE:
                    return fresh
                new_id = fresh.producer_id
        except KraftError as e:
            return InitProducerIdResponse(error_code=e.code, error_message=e.message)
        raise AssertionError("a producer id was handed in and still needed")

    # --- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn ------------------------------------------

    async def add_partitions_to_txn(
        self, request: AddPartitionsToTxnRequest
    ) -> AddPartitionsToTxnResponse:
        wanted = frozenset(TopicPartition(t.name, p) for t in request.topics for p in t.partitions)
        image = self._server.image
        unknown = {
            tp
            for tp in wanted
            if (d := image.describe_topic(tp.topic)) is None or tp.partition >= len(d.partitions)
        }
        if unknown:  # Kafka: the unknown ones fail, the others are not attempted
            return _per_partition(
                request,
                lambda tp: (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if tp in unknown
                    else ErrorCode.OPERATION_NOT_ATTEMPTED
                ),
            )
        try:
            partition = self._partition_of(request.transactional_id)
            if request.verify_only:

                def verify(c: Any) -> dict[TopicPartition, ErrorCode]:
                    coordinator: TxnCoordinator = c
                    return {
                        tp: coordinator.verify_partition(
                            request.transactional_id,
                            request.producer_id,
                            request.producer_epoch,
                            tp,
                        )
                        for tp in wanted
                    }

                codes = await self.runtime.read(partition, verify)
                return _per_partition(request, lambda tp: codes[tp])

            def run(c: Any, now: int) -> Any:
                coordinator: TxnCoordinator = c
                return coordinator.add_partitions(
                    request.transactional_id,
                    request.producer_id,
                    request.producer_epoch,
                    wanted,
                    now,
                    transaction_version=request.transaction_version,
                )

            code: ErrorCode = await self.runtime.write(partition, run)
        except KraftError as e:
            code = e.code
        return _per_partition(request, lambda tp: code)

    async def add_partitions_to_txn_batch(
        self, request: AddPartitionsToTxnBatchRequest
    ) -> AddPartitionsToTxnBatchResponse:
        """A partition leader's entries, each answered: ``verify_only`` ones (KIP-890 part 1),
        and the additions of a version-2 client's partitions (part 2: the client sends no
        AddPartitionsToTxn, its Produce v12+ or TxnOffsetCommit v5+ adds them)."""
        out = []
        for txn in request.transactions:
            verify_only = txn.verify_only or txn.transaction_version < TRANSACTION_VERSION_2
            answer = await self.add_partitions_to_txn(replace(txn, verify_only=verify_only))
            out.append(
                AddPartitionsToTxnBatchResult(
                    transactional_id=txn.transactional_id, results=answer.results
                )
            )
        return AddPartitionsToTxnBatchResponse(transactions=tuple(out))

    async def add_offsets_to_txn(self, request: AddOffsetsToTxnRequest) -> TxnErrorResponse:
        """The group's ``__consumer_offsets`` partition joins the transaction (KIP-98)."""
        offsets = self._server.image.describe_topic(OFFSETS_TOPIC)
        if offsets is None or not offsets.partitions:
            return TxnErrorResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        tp = TopicPartition(
            OFFSETS_TOPIC, partition_for_group(request.group_id, len(offsets.partitions))
        )
        answer = await self.add_partitions_to_txn(
            AddPartitionsToTxnRequest(
                transactional_id=request.transactional_id,
                producer_id=request.producer_id,
                producer_epoch=request.producer_epoch,
                topics=(TxnTopic(name=tp.topic, partitions=(tp.partition,)),),
            )
        )
        code = answer.results[0].partitions[0].error_code
        return TxnErrorResponse(error_code=code)

    async def end_txn(self, request: EndTxnRequest) -> EndTxnResponse:
        """EndTxn; version 2 (the epoch bumped, KIP-890 part 2) when the client asks for it
        and the cluster finalized ``transaction.version`` 2 (a kraft client always asks)."""
        finalized = finalized_level(self._server.image.features, TRANSACTION_VERSION)
        version = min(request.transaction_version, finalized)

        def run(coordinator: TxnCoordinator, now: int, new_id: int | None) -> Any:
            return coordinator.end_txn(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                commit=request.committed,
                now_ms=now,
                transaction_version=version,
                new_producer_id=new_id,
            )

        answer = await self._with_producer_id(request.transactional_id, run)
        return EndTxnResponse(
            error_code=answer.error_code,
            error_message=answer.error_message,
            producer_id=answer.producer_id,
            producer_epoch=answer.producer_epoch,
        )

    # --- DescribeTransactions, ListTransactions (KIP-664) ----------------------------------

    async def describe_transactions(
        self, request: DescribeTransactionsRequest
    ) -> DescribeTransactionsResponse:
        out = []
        for tid in request.transactional_ids:
            try:
                meta = await self.runtime.read(self._partition_of(tid), _getter(tid))
            except KraftError as e:
                out.append(DescribedTransaction(transactional_id=tid, error_code=e.code))
                continue
            if meta is None:
                code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
                out.append(DescribedTransaction(transactional_id=tid, error_code=code))
                continue
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(meta.partitions, key=lambda t: (t.topic, t.partition)):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            out.append(
                DescribedTransaction(
                    transactional_id=tid,
                    state=meta.state.kafka_name,
                    timeout_ms=meta.timeout_ms,
                    start_ms=meta.start_ms,
                    producer_id=meta.producer_id,
                    producer_epoch=meta.producer_epoch,
                    topics=tuple(
                        TxnTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                    ),
                )
            )
        return DescribeTransactionsResponse(transactions=tuple(out))

    async def list_transactions(self, request: ListTransactionsRequest) -> ListTransactionsResponse:
        """The transactions of the coordinators loaded here (an admin asks every broker)."""
        known = {s.kafka_name for s in TxnState}
        states = set(request.state_filters)
        pids = set(request.producer_id_filters)
        now = wall_clock_ms()
        out: list[ListedTransaction] = []
        for partition in self.runtime.loaded_partitions():
            try:
                txns = await self.runtime.read(partition, _transactions)
            except KraftError:
                continue
            for tid, meta in sorted(txns.items()):
                if states and meta.state.kafka_name not in states:
                    continue
                if pids and meta.producer_id not in pids:
                    continue
                running = now - meta.start_ms if meta.state is TxnState.ONGOING else -1
                if request.duration_filter_ms >= 0 and running <= request.duration_filter_ms:
                    continue
                out.append(
                    ListedTransaction(
                        transactional_id=tid,
                        producer_id=meta.producer_id,
                        state=meta.state.kafka_name,
                    )
                )
        return ListTransactionsResponse(
            unknown_state_filters=tuple(sorted(states - known)), transactions=tuple(out)
        )

    # --- the markers --------------------------------------------------------------------------

    async def run_markers(self) -> None:
        """Write the markers of every ended transaction of the loaded coordinators, forever."""
        while not self._closed:
            self._wake.clear()
            for partition, epoch in self.runtime.loaded_partitions().items():
                try:
                    jobs = await self.runtime.read(partition, _pending)
                except KraftError:
                    continue
                for job in jobs:
                    key = (job.transactional_id, job.producer_id, job.producer_epoch)
                    if key not in self._in_flight:
                        self._in_flight[key] = asyncio.create_task(
                            self._complete(partition, epoch, job, key),
                            name=f"txn-markers-{job.transactional_id[:40]}",
                        )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.25)

    async def _complete(
        self, partition: int, epoch: int, job: MarkerJob, key: tuple[str, int, int]
    ) -> None:
        marker = WritableTxnMarker(
            producer_id=job.producer_id,
            producer_epoch=job.producer_epoch,
            transaction_result=job.commit,
            coordinator_epoch=epoch,
            transaction_version=job.transaction_version,
        )
        remaining = set(job.partitions)
        try:
            while remaining and not self._closed:
                if self.runtime.loaded_partitions().get(partition) != epoch:
                    return  # not the coordinator any more: the next one writes them
                remaining = await send_markers(
                    image=self._server.image,
                    node_id=self._server.node_id,
                    replicas=self._server.replicas,
                    stub=self._stub,
                    marker=marker,
                    partitions=frozenset(remaining),
                    on_offsets_marker=self._on_offsets_marker,
                )
                if remaining:
                    await asyncio.sleep(MARKER_RETRY_S)
            if not remaining:

                def complete(c: Any, now: int) -> Any:
                    coordinator: TxnCoordinator = c
                    return coordinator.complete(job, now)

                await self.runtime.write(partition, complete)
        except KraftError as e:
            self._logger.info(
                "txn_markers_unfinished", transactional_id=job.transactional_id, error=e.code.name
            )
        except Exception as e:  # a bug must not stop the other transactions' markers
            self._logger.exception("txn_markers_failed", error=repr(e))
        finally:
            self._in_flight.pop(key, None)
            self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self.runtime.close()
        for task in self._in_flight.values():
            task.cancel()


def _getter(transactional_id: str) -> Callable[[Any], TxnMetadata | None]:
    def get(c: Any) -> TxnMetadata | None:
        coordinator: TxnCoordinator = c
        return coordinator.get(transactional_id)

    return get


def _transactions(c: Any) -> dict[str, TxnMetadata]:
    coordinator: TxnCoordinator = c
    return coordinator.transactions()


def _pending(c: Any) -> list[MarkerJob]:
    coordinator: TxnCoordinator = c
    return coordinator.pending_markers()


def _per_partition(
    request: AddPartitionsToTxnRequest, code_of: Callable[[TopicPartition], ErrorCode]
) -> AddPartitionsToTxnResponse:
    return AddPartitionsToTxnResponse(
        results=tuple(
            TxnTopicResult(
                name=t.name,
                partitions=tuple(
                    TxnPartitionResult(
                        partition_index=p, error_code=code_of(TopicPartition(t.name, p))
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
    )


__all__ = ["TxnService"]
