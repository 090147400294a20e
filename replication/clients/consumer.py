"""`Consumer`: manual assignment, positions, long-poll fetches; Kafka's ``KafkaConsumer`` over gRPC.

Theory of operation
-------------------
The consumer owns a set of assigned partitions, each with a *position*: the offset of the next
record to return (Kafka's ``SubscriptionState``). ``poll`` repeats, until it has records or its
timeout passes:

1. refresh metadata when it is stale or a response said so (`MetadataCache`);
2. reset partitions without a valid position by ``auto.offset.reset`` (earliest or latest),
   with ONE ListOffsets per leader broker carrying all of its partitions;
3. hand out buffered records (at most ``max.poll.records``), advancing positions;
4. otherwise send ONE Fetch to each broker that has none outstanding (or whose outstanding
   one only waits for records of caught-up partitions: it is replaced, `InflightFetches`; the
   leader, or the replica the leader named for ``client.rack``, KIP-392), carrying
   every assigned partition it serves that is neither buffered nor being fetched (with
   ``current_leader_epoch``, KIP-320: a stale leader answers FENCED_LEADER_EPOCH), each a long
   poll of ``fetch.max.wait.ms``, and return as soon as ANY answers with records, as Kafka's
   fetcher does (the others stay outstanding for the next poll: `InflightFetches`; a poll that
   hands out records sends the drained partitions' next Fetch first). Batch headers and CRCs
   are checked on arrival, records decoded when handed out (`replication.clients.fetched`):
   as `ConsumerRecord` objects by ``poll``, as one Arrow RecordBatch by ``poll_batch``.

Per-partition errors: OFFSET_OUT_OF_RANGE resets the position by the policy (``none`` raises
`OffsetOutOfRangeError` from poll); a stale-leader error (NOT_LEADER_OR_FOLLOWER,
FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, ...) refreshes metadata, taking a
KIP-951 ``current_leader`` hint at once; other errors are raised as their typed exception.
A corrupt batch (its CRC, header, codec or records; or CORRUPT_MESSAGE from the broker) stops
only its partition: the records before it are delivered, then `CorruptRecordError` is raised
(with topic, partition and offset) until ``seek`` moves past it (see ``poll``).

*Groups.* With ``group_id``, ``subscribe`` joins the group (KIP-848) and the coordinator
assigns the partitions (`replication.clients.group_membership`: a heartbeat thread keeps the
member alive; ``poll`` applies assignment changes and calls ``on_revoke`` / ``on_assign`` /
``on_lost``); a newly assigned partition starts at its committed offset, else by
``auto.offset.reset``. ``commit`` writes positions (the next offset to read) to the group,
``poll`` does so every ``auto.commit.interval.ms`` with ``enable.auto.commit``, and before a
revocation and on ``close``: commits after processing make delivery at-least-once. The
consumer delegates all this to its `ConsumerCoordinator` (`replication.clients.consumer_groups`).

Thread-safe in the sense that calls are serialised by a lock (Kafka's consumer is not
thread-safe at all); one thread polling is the intended use.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar

import structlog

from kraft.logs import ensure_configured
from kraft.types import TopicPartition
from replication.clients.config import ConsumerConfig
from replication.clients.consumer_groups import ConsumerCoordinator, OwnedPartitions, Rebalance
from replication.clients.fetch_requests import all_caught_up, build_fetch_request
from replication.clients.fetched import (
    ConsumerRecord,
    FetchedPartition,
    broker_found_corrupt,
    decode_partition_records,
    scan_partition_batches,
)
from replication.clients.fetches_in_flight import Inflight, InflightFetches
from replication.clients.group_membership import ConsumerGroupMetadata, GroupClient
from replication.clients.metadata import ClusterSnapshot, MetadataCache
from replication.clients.network import BrokerNetwork
from replication.clients.read_committed import drop_aborted
from replication.clients.read_replicas import PreferredReadReplicas
from replication.clients.sequencing import METADATA_ERRORS
from replication.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    BrokerFetchResponse,
    FetchPartitionData,
    ListOffsetsResponse,
)
from storage.errors import (
    ErrorCode,
    KraftError,
    OffsetOutOfRangeError,
    error_for,
)
from storage.file_region import records_bytes

if TYPE_CHECKING:
    import pyarrow as pa

log = structlog.get_logger("kraft.consumer")

_T = TypeVar("_T")
_R = TypeVar("_R")


_STALE_METADATA = METADATA_ERRORS | {ErrorCode.OFFSET_NOT_AVAILABLE}


class Consumer:
    """A consumer of manually assigned partitions, or of a group's (``subscribe``). Options
    are Kafka's consumer configs (see `ConsumerConfig`), by snake_case name or Kafka key.

    Args:
        bootstrap: ``"host:port,host:port"`` of (some of) the brokers.
        clock_ms: milliseconds for metadata ages (tests inject).
        network: a `BrokerNetwork` to use instead of one built from ``bootstrap`` (tests).

    Raises:
        ValueError: an unknown option or a bad value.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        clock_ms: Callable[[], int] | None = None,
        network: BrokerNetwork | None = None,
        **options: Any,
    ) -> None:
        ensure_configured()  # no output unless the application configures logging
        self.config = config = ConsumerConfig.create(options)
        self._clock = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._network = network or BrokerNetwork(
            bootstrap,
            request_timeout_s=config.request_timeout_ms / 1000,
            tls=config.tls(),
            client_id=config.client_id,
        )
        self._metadata = MetadataCache(
            refresh_backoff_ms=config.retry_backoff_ms, max_age_ms=config.metadata_max_age_ms
        )
        self._lock = threading.RLock()
        self._positions: dict[TopicPartition, int | None] = {}
        self._resets: dict[TopicPartition, int] = {}  # tp -> EARLIEST/LATEST_TIMESTAMP
        self._buffer: dict[TopicPartition, FetchedPartition] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}
        self._fetch_ends: dict[TopicPartition, int] = {}
        """The offset a fetch of each partition stops at, as its last fetch said (the high
        watermark; read_committed: the last stable offset): a Fetch at it waits for records."""
        self._inflight = InflightFetches()
        self._read_replicas = PreferredReadReplicas(config.metadata_max_age_ms)  # KIP-392
        self._backoff_until_ms: dict[int, int] = {}
        """Brokers whose last Fetch or ListOffsets failed, until when they are not asked again
        (``retry.backoff.ms``; a dead leader otherwise cost a failed call per loop of ``poll``:
        thousands a second, each a warning)."""
        self._isolation = (
            READ_COMMITTED if config.isolation_level == "read_committed" else READ_UNCOMMITTED
        )
        self._closed = False
        self._raised_last_poll = False  # a partition error: the next poll fetches others first
        self._coordinator: ConsumerCoordinator | None = None  # the group's side, if any
        if config.group_id:
            owned = OwnedPartitions(
                lock=self._lock,
                positions=self._positions_copy,
                assign=self._assign,
                seek=self.seek,
                add_topics=self._metadata.add_topics,
            )
            group = GroupClient(self._network, config.group_id, config)
            self._coordinator = ConsumerCoordinator(group, config, owned, self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- assignment and positions --------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions (replacing the previous assignment); positions of
        partitions that stay assigned are kept. Not while subscribed to a group."""
        with self._lock:
            if self._coordinator is not None and self._coordinator.subscribed:
                raise ValueError("assign() while subscribed: unsubscribe() first")
            self._assign(partitions)

    def _assign(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            wanted = list(dict.fromkeys(partitions))
            self._positions = {tp: self._positions.get(tp) for tp in wanted}
            self._resets = {tp: ts for tp, ts in self._resets.items() if tp in self._positions}
            self._buffer = {tp: f for tp, f in self._buffer.items() if tp in self._positions}
            self._metadata.add_topics(tp.topic for tp in wanted)

    def _positions_copy(self) -> dict[TopicPartition, int | None]:
        with self._lock:
            return dict(self._positions)

    def assignment(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._positions)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next record ``poll`` returns for ``tp``."""
        if offset < 0:
            raise ValueError(f"seek offset must be >= 0, not {offset}")
        with self._lock:
            self._check_assigned(tp)
            self._positions[tp] = offset
            self._resets.pop(tp, None)
            self._buffer.pop(tp, None)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Start ``partitions`` (default: all assigned) at the log start offset (lazily)."""
        self._seek_to(partitions, EARLIEST_TIMESTAMP)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Start ``partitions`` (default: all assigned) at the log end (lazily)."""
        self._seek_to(partitions, LATEST_TIMESTAMP)

    def _seek_to(self, partitions: Iterable[TopicPartition] | None, timestamp: int) -> None:
        with self._lock:
            for tp in list(self._positions) if partitions is None else partitions:
                self._check_assigned(tp)
                self._positions[tp] = None
                self._resets[tp] = timestamp
                self._buffer.pop(tp, None)

    def position(self, tp: TopicPartition, timeout: float | None = None) -> int:
        """The offset of the next record ``poll`` would return for ``tp``, looking it up by
        ``auto.offset.reset`` if there is none yet.

        Raises:
            OffsetOutOfRangeError: no position and ``auto.offset.reset=none``.
            TimeoutError: no position could be found within ``timeout`` seconds
                (default ``default.api.timeout.ms``).
        """
        limit = self.config.default_api_timeout_ms / 1000 if timeout is None else timeout
        deadline = time.monotonic() + limit
        with self._lock:
            self._check_assigned(tp)
            while True:
                position = self._positions[tp]
                if position is not None:
                    return position
                self._maybe_refresh_metadata()
                self._reset_positions()
                if self._positions[tp] is not None:
                    continue
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"no position for {tp} within {limit}s")
                time.sleep(self.config.retry_backoff_ms / 1000)

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark the last fetch of ``tp`` reported, if any."""
        with self._lock:
            return self._high_watermarks.get(tp)

    def close(self) -> None:
        """Commit (with ``enable.auto.commit``), leave the group, close the connections."""
        with self._lock:
            if self._closed:
                return
            try:
                if self._coordinator is not None:
                    self._coordinator.close()
            finally:
                self._closed = True
                self._inflight.close()
                self._network.close()

    # -- groups: delegated to the ConsumerCoordinator -------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str],
        on_assign: Rebalance | None = None,
        on_revoke: Rebalance | None = None,
        on_lost: Rebalance | None = None,
    ) -> None:
        """Join ``group_id`` for ``topics``: the group coordinator assigns the partitions.
        The callbacks run inside ``poll`` as ``cb(consumer, partitions)``."""
        if self._coordinator is None:
            raise ValueError("subscribe() needs a group_id")
        self._coordinator.subscribe(topics, on_assign, on_revoke, on_lost)

    def unsubscribe(self) -> None:
        """Revoke every partition (committing first with ``enable.auto.commit``), leave."""
        with self._lock:
            if self._coordinator is not None:
                self._coordinator.unsubscribe()
            self._assign([])

    def commit(
        self, offsets: Mapping[TopicPartition, int] | None = None, asynchronous: bool = False
    ) -> None:
        """Commit ``offsets`` (each the next offset to read; default: the position of every
        assigned partition) to the group.

        Raises:
            FencedMemberEpochError: the member lost its partitions (a stalled poll loop, an
                expired session); nothing was committed.
            KraftError: the commit failed (asynchronous commits log failures instead).
        """
        if self._coordinator is None:
            raise ValueError("commit() needs a group_id")
        self._coordinator.commit(offsets, asynchronous)

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets of ``partitions`` (None: nothing committed)."""
        if self._coordinator is None:
            raise ValueError("committed() needs a group_id")
        return self._coordinator.committed(partitions)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """For `Producer.send_offsets_to_transaction` (KIP-447)."""
        if self._coordinator is None:
            raise ValueError("group_metadata() needs a group_id")
        return self._coordinator.group_metadata()

    # -- poll ----------------------------------------------------------------------------------

    def poll(self, timeout: float = 1.0) -> list[ConsumerRecord]:
        """Records of the assigned partitions, in offset order per partition; an empty list
        when none arrived within ``timeout`` seconds.

        A corrupt batch stops only its partition, as in Kafka's consumer: the records before
        it are returned first, then a poll with nothing else to return raises its
        `CorruptRecordError` (topic, partition, offset), and does so again until
        ``seek`` moves the partition past it. Other partitions keep flowing meanwhile: after
        raising, the next poll fetches them before it raises again.

        Raises:
            CorruptRecordError: a partition's next batch is corrupt.
            OffsetOutOfRangeError: a position is out of range and ``auto.offset.reset=none``.
            KraftError: a partition error that no retry can fix (e.g. authorization).
        """
        return self._poll(timeout, self._take_buffered, list)

    def poll_batch(
        self, timeout: float = 1.0, max_records: int | None = None, *, include_headers: bool = True
    ) -> pa.RecordBatch:
        """What ``poll`` returns, as ONE `pyarrow.RecordBatch` in the Kafka source's schema
        (Spark's: ``key, value, topic, partition, offset, timestamp, timestampType[, headers]``,
        see `storage.columnar.schema`), decoded without a Python object per record by the
        Spark reader's decoder (`storage.columnar.decode_arrow`). At most ``max_records``
        rows (default ``max.poll.records``), in offset order per partition; zero rows when
        none arrived within ``timeout`` seconds. Positions, errors and the group's side are
        ``poll``'s; the two can be mixed.

        Raises:
            ImportError: pyarrow or numpy is missing (``pip install 'kraft[spark]'``).
            CorruptRecordError, OffsetOutOfRangeError, KraftError: as ``poll``.
        """
        from storage.columnar import require_arrow

        require_arrow("Consumer.poll_batch")
        import pyarrow as pa

        from storage.columnar.schema import arrow_schema, empty_batch

        limit = self.config.max_poll_records if max_records is None else max_records
        if limit <= 0:
            raise ValueError(f"max_records must be > 0, not {max_records}")

        def take() -> list[pa.RecordBatch]:
            return self._take_buffered_arrow(limit, include_headers)

        def join(parts: list[pa.RecordBatch]) -> pa.RecordBatch:
            if not parts:
                return empty_batch(include_headers)
            if len(parts) == 1:
                return parts[0]
            table = pa.Table.from_batches(parts, schema=arrow_schema(include_headers))
            return table.combine_chunks().to_batches()[0]

        return self._poll(timeout, take, join)

    def _poll(
        self,
        timeout: float,
        take: Callable[[], list[_T]],
        join: Callable[[list[_T]], _R],
    ) -> _R:
        deadline = time.monotonic() + max(0.0, timeout)
        with self._lock:
            if self._closed:
                raise RuntimeError("the consumer is closed")
            others_first = self._raised_last_poll
            self._raised_last_poll = False
            if self._coordinator is not None:
                self._coordinator.poll()
            while True:
                records = take()
                if records:
                    # Kafka's pipelining: the drained partitions' next Fetch goes out now, read
                    # by a later poll.
                    self._fetch(0, wait=False)
                    return join(records)
                if not others_first:
                    self._raise_partition_error()
                others_first = False
                self._maybe_refresh_metadata()
                self._reset_positions()
                left_ms = int((deadline - time.monotonic()) * 1000)
                sent = self._fetch(max(0, left_ms))
                records = take()
                if records or time.monotonic() >= deadline:
                    return join(records)
                if not sent:  # nothing fetchable (no leader, no position): back off a bit
                    time.sleep(min(self.config.retry_backoff_ms / 1000, max(0.0, left_ms) / 1000))

    def _take_buffered(self) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        budget = self.config.max_poll_records
        positions = self._positions
        for tp in list(self._buffer):
            fetched = self._buffer[tp]
            records = fetched.take(positions[tp] or 0, budget)  # a slice: no per-record step
            if records:
                out += records
                positions[tp] = records[-1].offset + 1
                budget -= len(records)
            if not fetched.left():
                self._drained(tp, fetched)
            if budget == 0:
                break
        return out

    def _take_buffered_arrow(self, budget: int, include_headers: bool) -> list[pa.RecordBatch]:
        out: list[pa.RecordBatch] = []
        positions = self._positions
        for tp in list(self._buffer):
            fetched = self._buffer[tp]
            rows = fetched.arrow(positions[tp] or 0, budget, include_headers=include_headers)
            if rows.num_rows:
                out.append(rows)
                positions[tp] = rows.column(4)[-1].as_py() + 1  # the offset column
                budget -= rows.num_rows
            if not fetched.rows_left():
                self._drained(tp, fetched)
            if budget == 0:
                break
        return out

    def _drained(self, tp: TopicPartition, fetched: FetchedPartition) -> None:
        """Every record of ``fetched`` is out: the position moves past its control batches."""
        self._positions[tp] = max(self._positions[tp] or 0, fetched.next_offset)
        if fetched.error is None:
            del self._buffer[tp]
        # else: it stays (not fetched again) until a seek: see _raise_partition_error

    def _raise_partition_error(self) -> None:
        """Raise the error of the first partition whose buffered records are all out."""
        for fetched in self._buffer.values():
            if fetched.error is not None and not fetched.left():
                self._raised_last_poll = True
                raise fetched.error

    # -- metadata and offset resets ------------------------------------------------------------

    def _maybe_refresh_metadata(self) -> None:
        metadata = self._metadata
        if not metadata.topics or not metadata.needs_update(self._clock()):
            return
        try:
            response = self._network.fetch_metadata(
                metadata.topics,
                addresses=metadata.snapshot.brokers.values(),
                timeout_s=min(self.config.request_timeout_ms / 1000, 2.0),
            )
        except KraftError as e:
            unreachable = self._network.unreachable()
            if unreachable is not None:  # nothing listens at any bootstrap address
                raise unreachable from None
            log.warning("metadata_refresh_failed", error=str(e))
            return
        metadata.update(response, self._clock())

    def _reset_positions(self) -> None:
        """Look up the positions of partitions without one (one ListOffsets per leader)."""
        missing = [tp for tp, pos in self._positions.items() if pos is None]
        if not missing:
            return
        policy = self.config.auto_offset_reset
        snapshot = self._metadata.snapshot
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in missing:
            timestamp = self._resets.get(tp)
            if timestamp is None:
                if policy == "none":
                    raise OffsetOutOfRangeError(f"no position for {tp} and auto.offset.reset=none")
                timestamp = self._resets[tp] = (
                    EARLIEST_TIMESTAMP if policy == "earliest" else LATEST_TIMESTAMP
                )
            leader = snapshot.leader_for(tp)
            if leader is None:
                self._metadata.request_update()
                continue
            by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            if not self._backing_off(leader):
                self._list_offsets(snapshot, leader, tps)

    def _list_offsets(
        self, snapshot: ClusterSnapshot, leader: int, tps: list[TopicPartition]
    ) -> None:
        request = snapshot.list_offsets_request(
            {tp: self._resets[tp] for tp in tps}, isolation_level=self._isolation
        )
        try:
            response = self._network.call(
                snapshot.brokers[leader], "ListOffsets", request, ListOffsetsResponse
            )
        except KraftError as e:
            log.warning("list_offsets_failed", broker=leader, error=str(e))
            self._back_off(leader)
            self._metadata.request_update()
            return
        for topic in response.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.partition_index)
                if tp not in self._positions or self._positions[tp] is not None:
                    continue
                if part.error_code is ErrorCode.NONE:
                    self._positions[tp] = part.offset
                    self._resets.pop(tp, None)
                elif part.error_code in _STALE_METADATA:
                    self._metadata.request_update()
                else:
                    raise error_for(part.error_code, part.error_message or f"ListOffsets {tp}")

    # -- fetching ------------------------------------------------------------------------------

    def _fetch(self, max_wait_ms: int, *, wait: bool = True) -> bool:
        """Send a Fetch to every leader broker with none outstanding (`InflightFetches`),
        carrying its partitions neither buffered nor being fetched; then (``wait``) wait at
        most ``max_wait_ms`` for any outstanding Fetch to answer, and take the answers that
        came. False if no Fetch is outstanding."""
        inflight = self._inflight
        snapshot = self._metadata.snapshot
        wanted: dict[int, dict[TopicPartition, int]] = {}
        for tp, position in self._positions.items():
            if position is None or tp in self._buffer or inflight.fetching(tp):
                continue
            leader = snapshot.leader_for(tp)
            if leader is None:
                self._metadata.request_update()
                continue
            leader = self._read_replicas.node_for(tp, leader, self._clock(), snapshot.brokers)
            if not self._backing_off(leader):
                wanted.setdefault(leader, {})[tp] = position
        # NB: the long poll is fetch.max.wait.ms whatever the poll's timeout, as in Kafka: the
        # Fetch outlives a short poll and is read by the next one.
        wait_ms = self.config.fetch_max_wait_ms
        # A paused leader answers nothing: a Fetch that outlives its long poll by
        # retry.backoff.max.ms is abandoned and metadata refreshed, not waited on for
        # request.timeout.ms (a consumer fetch changes nothing on the broker: safe to drop).
        expires_s = time.monotonic() + (wait_ms + self.config.retry_backoff_max_ms) / 1000
        for leader, tps in wanted.items():
            if inflight.busy(leader):
                # One Fetch per broker; but one that only waits for new records of caught-up
                # partitions is replaced by one that also carries these (`take_over`).
                replaced = inflight.take_over(leader)
                if replaced is None:
                    continue
                for tp in replaced.positions:
                    position = self._positions.get(tp)
                    if position is not None and tp not in self._buffer:
                        tps[tp] = position
            request = build_fetch_request(tps, snapshot, self.config, self._isolation)
            address = snapshot.brokers[leader]
            caught_up = all_caught_up(tps, self._fetch_ends)
            inflight.start(
                Inflight(leader, address, tps, expires_s, caught_up),
                functools.partial(
                    self._network.call_async,
                    address,
                    "Fetch",
                    request,
                    BrokerFetchResponse,
                    timeout_s=wait_ms / 1000 + self.config.request_timeout_ms / 1000,
                ),
            )
        if not inflight or not wait:
            return bool(inflight)
        until_s = min(time.monotonic() + max_wait_ms / 1000, inflight.earliest_expiry_s())
        answered = inflight.wait(until_s)
        for entry in inflight.expire(time.monotonic()):
            log.warning(
                "fetch_stalled",
                broker=entry.leader,
                waited_ms=wait_ms + self.config.retry_backoff_max_ms,
            )
            self._network.mark_suspect(entry.address)
            self._read_replicas.clear_broker(entry.leader)  # KIP-392: back to the leader
            self._metadata.request_update()
        for entry, response, error in answered:
            if error is not None or response is None:
                log.warning("fetch_failed", broker=entry.leader, error=str(error))
                self._back_off(entry.leader)
                self._metadata.request_update()
                continue
            self._handle_fetch_response(response, entry.positions)
        return True

    def _back_off(self, broker: int) -> None:
        self._backoff_until_ms[broker] = self._clock() + self.config.retry_backoff_ms
        self._read_replicas.clear_broker(broker)  # KIP-392: read from the leaders meanwhile

    def _backing_off(self, broker: int) -> bool:
        until = self._backoff_until_ms.get(broker)
        if until is None:
            return False
        if self._clock() >= until:
            del self._backoff_until_ms[broker]
            return False
        return True

    def _handle_fetch_response(
        self, response: BrokerFetchResponse, positions: dict[TopicPartition, int]
    ) -> None:
        if response.error_code is not ErrorCode.NONE:
            if response.error_code in _STALE_METADATA or error_for(response.error_code).retriable:
                self._metadata.request_update()
                return
            raise error_for(response.error_code, "Fetch failed")
        for topic in response.responses:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition_index)
                fetched_at = positions.get(tp)
                if fetched_at is None or self._positions.get(tp) != fetched_at:
                    continue  # unassigned or sought meanwhile: drop the stale data
                self._handle_partition(tp, part, fetched_at)

    def _handle_partition(
        self, tp: TopicPartition, part: FetchPartitionData, position: int
    ) -> None:
        code = part.error_code
        if code is ErrorCode.NONE and part.preferred_read_replica >= 0:  # KIP-392
            self._read_replicas.update(tp, part.preferred_read_replica, self._clock())
            return
        if code is ErrorCode.NONE:
            if part.high_watermark >= 0:
                self._high_watermarks[tp] = part.high_watermark
            stable = self._isolation == READ_COMMITTED and part.last_stable_offset >= 0
            end = part.last_stable_offset if stable else part.high_watermark
            if end >= 0:
                self._fetch_ends[tp] = end
            records = drop_aborted(  # read_committed; bytes: decoded from gRPC
                records_bytes(part.records), part.aborted_transactions
            )
            fetched = scan_partition_batches(
                tp, records, position, check_crcs=self.config.check_crcs
            )
            if fetched is not None:
                self._buffer[tp] = fetched
                if fetched.error is not None:
                    log.warning("corrupt_batch_fetched", tp=str(tp), offset=fetched.error.offset)
            return
        if code is ErrorCode.CORRUPT_MESSAGE:  # the broker could not read its log there
            # NB: Kafka's consumer raises this too ("Encountered corrupt message when
            # fetching offset"), where other retriable errors are retried.
            self._buffer[tp] = broker_found_corrupt(tp, position, part.error_message)
            return
        if self._read_replicas.clear(tp) and code is ErrorCode.OFFSET_OUT_OF_RANGE:
            return  # a follower behind the position: ask the leader, keep the position (Kafka)
        if part.current_leader is not None:  # KIP-951: the new leader, right away
            hint = part.current_leader
            self._metadata.update_leader(tp, hint.leader_id, hint.leader_epoch)
        if code is ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.config.auto_offset_reset == "none":
                # NB: the broker checks against its log end offset, which a fetch response
                # does not carry; its message names the range (the high watermark is not it).
                detail = f": {part.error_message}" if part.error_message else ""
                raise OffsetOutOfRangeError(
                    f"fetch position {position} is out of range for {tp}{detail}",
                    log_start_offset=part.log_start_offset,
                )
            log.warning(
                "offset_out_of_range_reset",
                tp=str(tp),
                position=position,
                detail=(part.error_message or "")[:200],
            )
            self._positions[tp] = None
            self._resets.pop(tp, None)  # reset by the policy on the next round
        elif code in _STALE_METADATA or error_for(code).retriable:
            self._metadata.request_update()
        else:
            raise error_for(code, part.error_message or f"{code.name} fetching {tp}")

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._positions:
            raise ValueError(f"{tp} is not assigned to this consumer")


__all__ = ["Consumer", "ConsumerRecord", "decode_partition_records"]
