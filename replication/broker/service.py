"""The partition APIs of the broker: Produce, Fetch, ListOffsets, Metadata, InitProducerId.

Each handler takes and returns the dataclasses of `replication.messages`; no transport here:
`replication.broker.api.BrokerApi` bounds, authorizes and measures a request before it comes
here, and the transports (`replication.broker.grpc`, the Kafka listener) call that. Partition
work goes to the `PartitionReplica` of the partition; nothing here blocks the event loop:
acks=all produces and long-poll fetches await futures and events (Kafka's produce and fetch
purgatories).

- Produce: per partition, to the leader's core; answered per ``acks``.
- Fetch: followers (``replica_id >= 0``) go through the leader core (epoch fencing, divergence,
  ISR bookkeeping); consumers read only below the high watermark, and get OFFSET_OUT_OF_RANGE
  (with the valid range in the message) outside ``[log start, log end]``. Both long-poll up to
  ``max_wait_ms`` for ``min_bytes``. KIP-392 (`replication.broker.replicas.read_replica`): a leader
  may name a follower in the consumer's rack instead (``preferred_read_replica``), and a follower
  serves consumers up to its own high watermark.
- ListOffsets, DescribeLogDirs, DescribeProducers: read-only, in `replication.broker.log_queries`.
- Metadata: from the broker's metadata image.
- InitProducerId: ids from a block the controller allocates (AllocateProducerIds, KIP-730).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kraft.raft_shell.clock import clock_ms
from kraft.types import INTERNAL_TOPICS, Epoch, NodeId, Offset, TopicPartition
from replication.broker.coordinators.producer_ids import ProducerIds
from replication.broker.coordinators.txn_markers import (
    OffsetsMarkerHook,
    is_control_batch,
    write_markers,
)
from replication.broker.limits import MAX_PARTITIONS_PER_REQUEST, too_many_partitions
from replication.broker.log_queries import (
    describe_log_dirs,
    describe_producers,
    leading,
    list_offsets,
    not_leader_code,
)
from replication.broker.loop_slice import LoopSlice
from replication.broker.replicas.change_event import wait_any
from replication.broker.replicas.produce_together import produce_together
from replication.broker.replicas.read_replica import (
    ClientMetadata,
    consumer_readable,
    preferred_read_replica,
)
from replication.broker.replicas.replica_metrics import consumer_bytes_out
from replication.broker.replicas.stable_reads import READ_COMMITTED, aborted_in, last_stable_offset
from replication.core import FollowerFetch, fence_leader_epoch
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionData,
    FetchTopicResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    LeaderIdAndEpoch,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from storage.errors import ErrorCode, KraftError
from storage.file_region import Records

if TYPE_CHECKING:
    from replication.broker.host import ReplicaHost, ServedReplica
    from replication.broker.replicas.txn_verification import TxnVerifier
    from replication.core import ProduceCompletion


class BrokerService:
    """The partition APIs of one broker (what `replication.broker.api.BrokerApi` calls after
    its checks), over what they need of it (`ReplicaHost`).

    The simulator's broker calls the same handlers without an event loop: a Produce through
    `produce_to` and `produce_answered` (it awaits the core's completion its own way), a Fetch
    through `fetch_once` (it parks an unsatisfied one itself, `fetch_satisfied`). ``now_ms``:
    the clock (the simulator's in the simulator).
    """

    def __init__(
        self,
        server: ReplicaHost,
        *,
        now_ms: Callable[[], int] = clock_ms,
        replica_selector: str | None = None,
        txn_verifier: TxnVerifier | None = None,
    ) -> None:
        self._server = server
        self._txn_verifier = txn_verifier
        """KIP-890 part 1 (``transaction.partition.verification.enable``); None: off."""
        self._now_ms = now_ms
        self._replica_selector = replica_selector
        """``replica.selector.class`` (KIP-392); None: the leader serves every consumer."""
        self._producer_ids = ProducerIds(lambda: server.allocate_producer_ids())

    # --- helpers ------------------------------------------------------------------------------

    def finalized_features(self) -> tuple[int, Mapping[str, int]]:
        """The finalized feature levels and their epoch, from the metadata image (KIP-584)."""
        image = self._server.image
        return image.features_epoch, image.features

    def _current_leader(self, tp: TopicPartition) -> LeaderIdAndEpoch:
        """The leader hint of a NOT_LEADER_OR_FOLLOWER answer (KIP-951): the metadata's, or
        for a quorum partition the Raft leader this broker's replica knows when it is newer
        (the metadata learns it only from the winner's report to the controller)."""
        registration = self._server.image.partition_by_name(tp)
        if registration is None:
            return LeaderIdAndEpoch()
        replica = self._server.replicas.get(tp)
        known = None if replica is None else replica.raft_leader()
        if known is not None and known[1] > registration.leader_epoch:
            return LeaderIdAndEpoch(leader_id=known[0], leader_epoch=known[1])
        return LeaderIdAndEpoch(
            leader_id=registration.leader, leader_epoch=registration.leader_epoch
        )

    # --- Produce ------------------------------------------------------------------------------

    def produce_to(
        self, tp: TopicPartition, records: bytes
    ) -> ServedReplica | ProducePartitionResponse:
        """Where one partition of a Produce goes: the replica that leads it, or the answer
        that refuses it (an internal topic, control records from a client, not the leader, an
        unknown partition)."""
        if tp.topic in INTERNAL_TOPICS:  # Kafka: "Cannot append to internal topic"
            return ProducePartitionResponse(
                index=tp.partition,
                error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                error_message=f"cannot produce to the internal topic {tp.topic}",
            )
        if is_control_batch(records):  # Kafka's AppendOrigin.CLIENT: markers are brokers'
            return ProducePartitionResponse(
                index=tp.partition,
                error_code=ErrorCode.INVALID_RECORD,
                error_message="clients are not allowed to write control records",
            )
        replica = leading(self._server, tp)
        if replica is None:
            code = not_leader_code(self._server, tp)
            return ProducePartitionResponse(
                index=tp.partition,
                error_code=code,
                current_leader=self._current_leader(tp)
                if code is ErrorCode.NOT_LEADER_OR_FOLLOWER
                else None,
            )
        return replica

    def produce_answered(
        self, tp: TopicPartition, replica: ServedReplica, done: ProduceCompletion
    ) -> ProducePartitionResponse:
        """The answer for one partition of a Produce once its leader core completed it."""
        return ProducePartitionResponse(
            index=tp.partition,
            error_code=done.error_code,
            error_message=done.error_message,
            base_offset=done.base_offset,
            log_start_offset=replica.log.log_start_offset,
            current_leader=self._current_leader(tp)
            if done.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
            else None,
        )

    async def produce(self, request: ProduceRequest, produce_version: int = -1) -> ProduceResponse:
        """``produce_version``: the Kafka client's (-1 for kraft's): which error a transactional
        batch the coordinator did not verify gets (KIP-890 part 1, `.txn_verification`)."""
        targets = {
            (tp := TopicPartition(t.name, p.index)): (self.produce_to(tp, p.records), p.records)
            for t in request.topic_data
            for p in t.partition_data
        }
        leading = {
            tp: (target, records)
            for tp, (target, records) in targets.items()
            if not isinstance(target, ProducePartitionResponse)
        }
        gates = (
            {}
            if self._txn_verifier is None
            else await self._txn_verifier.gates(request.transactional_id, leading, produce_version)
        )

        async def one(tp: TopicPartition) -> ProducePartitionResponse:
            target, records = targets[tp]
            if isinstance(target, ProducePartitionResponse):
                return target
            gate = gates.get(tp)
            if gate is not None and gate.error_code is not ErrorCode.NONE:
                return ProducePartitionResponse(
                    index=tp.partition, error_code=gate.error_code, error_message=gate.error_message
                )
            admit = None if gate is None else gate.admit
            done = await target.produce(request.acks, request.timeout_ms, records, admit)
            return self.produce_answered(tp, target, done)

        def now(tp: TopicPartition) -> asyncio.Future[ProduceCompletion] | None:
            target, records = targets[tp]
            if isinstance(target, ProducePartitionResponse) or tp in gates:
                return None
            return target.produce_now(request.acks, request.timeout_ms, records)

        def answered(tp: TopicPartition, done: ProduceCompletion) -> ProducePartitionResponse:
            target = targets[tp][0]
            assert not isinstance(target, ProducePartitionResponse)
            return self.produce_answered(tp, target, done)

        topics = []
        for topic in request.topic_data:
            data = topic.partition_data
            if len(data) == 1:  # the common case (librdkafka): no task and gather for one
                answers = [await one(TopicPartition(topic.name, data[0].index))]
            else:
                tps = [TopicPartition(topic.name, p.index) for p in data]
                answers = await produce_together(tps, now, one, answered)
            topics.append(ProduceTopicResponse(name=topic.name, partition_responses=tuple(answers)))
        return ProduceResponse(responses=tuple(topics))

    # --- Fetch --------------------------------------------------------------------------------

    async def fetch(
        self,
        request: BrokerFetchRequest,
        client: ClientMetadata | None = None,
        *,
        file_regions: bool = False,
    ) -> BrokerFetchResponse:
        """``client``: the consumer's client metadata (KIP-392, `read_replica`); None: an old
        consumer, which only the leader serves. ``file_regions``: a consumer's records may be
        `storage.file_region.FileRegion`s (`ServedReplica.read_region`)."""
        deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
        tps = [TopicPartition(t.topic, p.partition) for t in request.topics for p in t.partitions]
        server = self._server
        follower = request.replica_id >= 0
        marks: list[object] | None = None
        response: BrokerFetchResponse | None = None
        while True:
            events = [r.changed for tp in tps if (r := server.replicas.get(tp)) is not None]
            remaining = deadline - time.monotonic()
            # NB: a follower's parked fetch is satisfied only by new records (or an error, a
            # leadership change, a moved log start); a wake-up for a high watermark alone
            # (another follower's acknowledgement) would read nothing: no pass for it until
            # the deadline, whose pass answers with the high watermark of then.
            seen = (
                _log_marks(tps, server) if follower and not server.leader_throttle.limited else None
            )
            if response is None or seen is None or seen != marks or remaining <= 0:
                marks = seen
                # NB: a pass over hundreds of partitions (a follower's fetch) yields the loop
                # between slices of them, so one fetch does not hold produces and other fetches
                steps, cut = self._fetch_steps(request, client, file_regions), LoopSlice()
                while True:
                    await cut.turn()
                    if (answer := next(steps)) is not None:
                        break
                response, size, errors = answer
                if fetch_satisfied(request, response, size, errors):
                    return response
                remaining = deadline - time.monotonic()
            if remaining <= 0 or not events:
                return response
            await wait_any(events, remaining)
            if server.stopping:
                return response

    def fetch_once(self, request: BrokerFetchRequest) -> tuple[BrokerFetchResponse, int, bool]:
        """One pass of a Fetch, without waiting: the response, its record bytes, and whether a
        partition answered an error (what `fetch` repeats until `fetch_satisfied`)."""
        steps = self._fetch_steps(request)
        while (answer := next(steps)) is None:
            pass
        return answer

    def _fetch_steps(
        self,
        request: BrokerFetchRequest,
        client: ClientMetadata | None = None,
        file_regions: bool = False,
    ) -> Iterator[tuple[BrokerFetchResponse, int, bool] | None]:
        """One pass of a Fetch, one partition per step (None), then the response, its record
        bytes, and whether to answer now (an error, or a preferred read replica: Kafka's
        ``fetchMessages`` answers those at once)."""
        size, errors = 0, False
        remaining_bytes = request.max_bytes
        topics = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                max_bytes = max(0, min(p.partition_max_bytes, remaining_bytes))
                if request.replica_id >= 0:
                    # KIP-74, Kafka's ``readFromLog``: only the first partition with records
                    # may pass the limits with its first batch (minOneMessage); the others get
                    # what fits in what is left of ``max_bytes``, so a follower's response stays
                    # within ``replica.fetch.response.max.bytes`` (its fetcher rotates the
                    # partitions left out to the front). NB: a consumer's partitions each still
                    # get their first batch: kraft's Consumer does not rotate its partitions.
                    data = self._follower_fetch(request, tp, p, max_bytes, min_one=size == 0)
                else:
                    data = self._consumer_fetch(
                        tp, p, max_bytes, request.isolation_level, client, file_regions
                    )
                size += len(data.records)
                remaining_bytes -= len(data.records)
                errors = errors or data.error_code is not ErrorCode.NONE
                errors = errors or data.preferred_read_replica >= 0
                parts.append(data)
                yield None
            topics.append(FetchTopicResponse(topic=topic.topic, partitions=tuple(parts)))
        yield BrokerFetchResponse(responses=tuple(topics)), size, errors

    def _follower_fetch(
        self,
        request: BrokerFetchRequest,
        tp: TopicPartition,
        p: FetchPartition,
        max_bytes: int,
        *,
        min_one: bool = True,
    ) -> FetchPartitionData:
        replica = leading(self._server, tp)
        if replica is None:
            return FetchPartitionData(
                partition_index=p.partition,
                error_code=not_leader_code(self._server, tp),
                current_leader=self._current_leader(tp),
            )
        # KIP-455/KIP-73: an adding replica's fetch is reassignment traffic, within
        # leader.replication.throttled.rate (`replication.broker.replicas.throttle`).
        throttle = self._server.leader_throttle
        throttled = throttle.limited and self._server.is_adding_replica(tp, request.replica_id)
        read = min_one or max_bytes > 0
        if throttled:
            allowance = throttle.available(self._now_ms())
            read = read and allowance > 0
            max_bytes = min(max_bytes, max(allowance, 0))
        answer, records = replica.handle_follower_fetch(
            FollowerFetch(
                replica_id=NodeId(request.replica_id),
                broker_epoch=request.replica_epoch,
                fetch_offset=Offset(p.fetch_offset),
                last_fetched_epoch=Epoch(p.last_fetched_epoch),
                current_leader_epoch=Epoch(p.current_leader_epoch),
                log_start_offset=Offset(p.log_start_offset),
            ),
            max_bytes,
            read=read,
            min_one=min_one,
        )
        if throttled:
            throttle.record(len(records), self._now_ms())
        diverging = answer.diverging_epoch
        return FetchPartitionData(
            partition_index=p.partition,
            error_code=answer.error_code,
            high_watermark=answer.high_watermark,
            last_stable_offset=answer.high_watermark,
            log_start_offset=answer.log_start_offset,
            diverging_epoch=None
            if diverging is None
            else EpochEndOffset(epoch=diverging.epoch, end_offset=diverging.end_offset),
            records=records,
        )

    def _consumer_fetch(
        self,
        tp: TopicPartition,
        p: FetchPartition,
        max_bytes: int,
        isolation_level: int = 0,
        client: ClientMetadata | None = None,
        file_regions: bool = False,
    ) -> FetchPartitionData:
        replica = consumer_readable(self._server.replicas, tp, client)  # KIP-392: or a follower
        if replica is None:
            return FetchPartitionData(
                partition_index=p.partition,
                error_code=not_leader_code(self._server, tp),
                current_leader=self._current_leader(tp),
            )
        fenced = fence_leader_epoch(p.current_leader_epoch, replica.driver.leader_epoch)
        if fenced is not None:
            return FetchPartitionData(
                partition_index=p.partition,
                error_code=fenced,
                current_leader=self._current_leader(tp),
            )
        log = replica.log
        high_watermark = replica.high_watermark
        stable = last_stable_offset(replica.producer_state, high_watermark)
        committed = isolation_level == READ_COMMITTED
        common: dict[str, Any] = {
            "partition_index": p.partition,
            "high_watermark": high_watermark,
            "last_stable_offset": stable,
            "log_start_offset": log.log_start_offset,
        }
        preferred = preferred_read_replica(
            self._server,
            replica,
            client,
            p.fetch_offset,
            selector=self._replica_selector,
            now_ms=self._now_ms(),
        )
        if preferred is not None:  # KIP-392: no records; read them from that replica
            return FetchPartitionData(**common, preferred_read_replica=preferred)
        # Kafka's range check is against the log end offset, not the high watermark: an offset
        # in [high watermark, log end offset] is valid and returns nothing until the high
        # watermark passes it (a consumer may be there after a failover, see guarantees.md).
        if p.fetch_offset < log.log_start_offset or p.fetch_offset > log.log_end_offset:
            return FetchPartitionData(
                **common,
                error_code=ErrorCode.OFFSET_OUT_OF_RANGE,
                error_message=f"offset {p.fetch_offset} is out of range: the log holds offsets "
                f"[{log.log_start_offset}, {log.log_end_offset}] (log start offset to log end "
                f"offset); consumers read below the high watermark {high_watermark}",
            )
        try:
            upper = stable if committed else high_watermark
            records: Records
            if file_regions:  # sent from the segment file
                records = replica.read_region(p.fetch_offset, max_bytes, upper)
            else:
                records = replica.read(p.fetch_offset, max_bytes, max_offset=upper)
        except KraftError as e:  # KAFKA_STORAGE_ERROR: the replica went offline meanwhile
            return FetchPartitionData(**common, error_code=e.code, error_message=e.message)
        consumer_bytes_out(tp.topic, len(records))
        if committed:
            aborted = aborted_in(replica.producer_state, p.fetch_offset, records)
            return FetchPartitionData(**common, records=records, aborted_transactions=aborted)
        return FetchPartitionData(**common, records=records)

    # --- ListOffsets --------------------------------------------------------------------------

    async def list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        return list_offsets(self._server, request)

    # --- DescribeLogDirs, DescribeProducers ---------------------------------------------------

    async def describe_log_dirs(self, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
        return describe_log_dirs(self._server, request)

    async def describe_producers(
        self, request: DescribeProducersRequest
    ) -> DescribeProducersResponse:
        return describe_producers(self._server, request)

    # --- Metadata -----------------------------------------------------------------------------

    async def metadata(self, request: MetadataRequest, listener: str = "") -> MetadataResponse:
        """Brokers with their endpoint on ``listener`` (the one the request came in on; Kafka
        leaves out brokers without it), or their first, inter-broker, one when ``listener`` is
        empty."""
        image = self._server.image
        brokers = []
        for broker_id in sorted(image.brokers):
            registration = image.brokers[broker_id]
            endpoint = None if registration.fenced else registration.endpoint(listener)
            if endpoint is None:
                continue
            brokers.append(
                MetadataBroker(
                    node_id=broker_id,
                    host=endpoint.host,
                    port=endpoint.port,
                    rack=registration.rack or "",
                )
            )
        names = request.topics or tuple(sorted(image.topic_ids_by_name))
        topics = []
        for name in names:
            description = image.describe_topic(name)
            if description is None:
                topics.append(
                    MetadataTopic(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                continue
            partitions = tuple(
                MetadataPartition(
                    error_code=ErrorCode.NONE if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                    partition_index=p.partition,
                    leader_id=p.leader,
                    leader_epoch=p.leader_epoch,
                    replica_nodes=p.replicas,
                    isr_nodes=p.isr,
                    offline_replicas=p.offline_replicas,
                )
                for p in description.partitions
            )
            topics.append(
                MetadataTopic(name=name, topic_id=description.topic_id, partitions=partitions)
            )
        leader = self._server.controller_leader_id()
        return MetadataResponse(
            brokers=tuple(brokers),
            controller_id=-1 if leader is None else leader,
            topics=tuple(topics),
        )

    # --- WriteTxnMarkers ----------------------------------------------------------------------

    async def write_txn_markers(
        self, request: WriteTxnMarkersRequest, on_offsets_marker: OffsetsMarkerHook
    ) -> WriteTxnMarkersResponse:
        """A transaction coordinator's markers, appended to the partitions this broker leads."""
        return await write_markers(self._server.replicas, request, on_offsets_marker)

    # --- InitProducerId -----------------------------------------------------------------------

    async def init_producer_id(self, request: InitProducerIdRequest) -> InitProducerIdResponse:
        """A fresh producer id, epoch 0, whatever id and epoch the request names.

        This is Kafka's answer to an InitProducerId without a transactional id: only the
        transaction coordinator knows a producer id's current epoch, so only a transactional
        producer may bump one (KIP-360). kraft has no transactions, so a producer's KIP-360
        "bump" gets a new id, which serves it just as well (its sequences start again at 0),
        and nobody can bump, and so fence, another producer's id by naming it.
        """
        del request
        return await self._producer_ids.next()


def fetch_satisfied(
    request: BrokerFetchRequest, response: BrokerFetchResponse, size: int, errors: bool
) -> bool:
    """Answer a Fetch now: it has ``min_bytes`` of records (at least one byte), an error to
    report, or a diverging epoch (KIP-320: the follower must truncate first; Kafka's
    ``fetchMessages`` answers it at once); otherwise it waits up to ``max_wait_ms`` for more
    (Kafka's fetch purgatory)."""
    return (
        size >= max(request.min_bytes, 1)
        or errors
        or any(p.diverging_epoch is not None for t in response.responses for p in t.partitions)
    )


def _log_marks(tps: Sequence[TopicPartition], server: ReplicaHost) -> list[object]:
    """What a follower's fetch of ``tps`` reads depends on: per partition, the replica, its
    generation (role), leader epoch, whether it is offline, and its log's start and end."""
    marks: list[object] = []
    for tp in tps:
        replica = server.replicas.get(tp)
        if replica is None:
            marks.append(None)
            continue
        driver, log = replica.driver, replica.log
        marks.append(
            (
                replica,
                driver.generation,
                driver.leader_epoch,
                driver.offline is None,
                log.log_start_offset,
                log.log_end_offset,
            )
        )
    return marks


__all__ = [
    "MAX_PARTITIONS_PER_REQUEST",
    "BrokerService",
    "fetch_satisfied",
    "too_many_partitions",
]
