"""`PartitionReplica`: one partition's replica on this broker: its log and its core.

Theory of operation
-------------------
The replica owns the partition's `SegmentedLog` (``<data dir>/<topic>-<partition>/``), its
`ProducerStateManager` (loaded when the replica opens from the latest ``<offset>.snapshot``
plus the batch headers after it, snapshotted when the log rolls and on a clean shutdown:
`replication.broker.producer_snapshots`), and at
most one core: a `PartitionLeader` while metadata names this broker the leader, a
`PartitionFollower` otherwise. It is the loop of ``replication.core``'s docstring and nothing
more: every input is fed to the core, then every Ready is applied in its documented order
(`drain`). Everything runs on the broker's one event loop; nothing here blocks but the log's
own (page cache) reads and writes.

A follower runs one fetch loop: the core's fetch goes to ``fetch_from_leader`` (the broker
batches it with the other partitions led by the same broker into one long-poll
``Broker.Fetch`` carrying its replica id and broker epoch, see `replication.broker.fetcher`);
the leader's answer goes back through the core. A leader parks
produce futures until their `ProduceCompletion` arrives and wakes parked fetches whenever its
log end offset or high watermark moves (`changed`).

Retention (`apply_retention`, called by the broker every ``log.retention.check.interval.ms``)
deletes old segments below the high watermark only; a follower also adopts its leader's log
start offset from each fetch response (Kafka's ``maybeIncrementLogStartOffset``), capped by its
own high watermark. Both delete the producer snapshots below the new log start offset.

*Disk errors.* Every storage error of the replica's I/O (`KafkaStorageError` from the log, an
``OSError`` of a checkpoint or snapshot file), and a corrupt batch its log finds on read while
another ISR member has a good copy (`read`), take the replica offline at once (`offline`,
Kafka's offline log directory at replica granularity):
the core is dropped mid-whatever (it is never used again, so the "previous LeaderAppend was
not acknowledged" state cannot outlive the failure), waiting produces are answered
KAFKA_STORAGE_ERROR (retriable; nothing that failed was acknowledged), the log is abandoned
unflushed, and ``on_offline`` tells the broker, which reports the replica in its heartbeats
until it reopens it (`replication.broker.server`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path

import structlog

from kraft.controller.messages import AlterPartitionPartitionResult
from kraft.metadata.image import PartitionRegistration
from kraft.raft_shell.clock import clock_ms
from kraft.types import TopicPartition
from replication.broker.producer_snapshots import (
    ProducerSnapshotStore,
    ProducerStateLoad,
    load_producer_state,
    scan_headers,
)
from replication.core import (
    AlterPartitionSend,
    BrokerStatus,
    DivergingEpoch,
    FollowerFetch,
    FollowerFetchRequest,
    FollowerFetchResponse,
    LeaderFetchAnswer,
    PartitionFollower,
    PartitionLeader,
    PartitionProduce,
    ProduceCompletion,
    ProducerStateManager,
    ReplicationConfig,
)
from storage.checkpoint import read_offset, write_offset
from storage.config import LONG_MAX, LogConfig
from storage.errors import CorruptRecordError, ErrorCode, KafkaStorageError, KraftError
from storage.file_io import storage_error
from storage.log import SegmentedLog
from storage.records import BatchHeader, read_header

FetchFromLeader = Callable[[FollowerFetchRequest], Awaitable[FollowerFetchResponse]]
SendAlterPartition = Callable[["PartitionReplica", AlterPartitionSend], None]
OnOffline = Callable[["PartitionReplica", KafkaStorageError], None]

HIGH_WATERMARK_CHECKPOINT = "high-watermark-checkpoint"
SEQUENCE_REORDER_WAIT_MS = 500
"""How long an idempotent batch that arrived before its predecessor waits for it."""

_log = structlog.get_logger("replication.broker.partition")


class PartitionReplica:
    """This broker's replica of ``topic_partition``.

    Args:
        directory: the log's directory (created if missing, recovered if unclean).
        local_id / broker_epoch: this broker and its registered epoch.
        fetch_from_leader: sends one follower fetch to the leader; transport failures come
            back as a response carrying the error code.
        send_alter_partition: hands an AlterPartition to the broker shell, which later calls
            `handle_alter_partition_result`.
        on_offline: called once, synchronously, when a disk error took the replica offline.

    Raises:
        KafkaStorageError: the log, its checkpoints or its producer snapshots cannot be read.
    """

    def __init__(
        self,
        *,
        topic_partition: TopicPartition,
        topic_id: str,
        directory: Path,
        log_config: LogConfig,
        local_id: int,
        broker_epoch: int,
        fetch_from_leader: FetchFromLeader,
        send_alter_partition: SendAlterPartition,
        on_offline: OnOffline | None = None,
    ) -> None:
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.directory = directory
        self.log = SegmentedLog.open(directory, log_config)
        try:
            self._snapshots = ProducerSnapshotStore(directory)
            self.producer_state = ProducerStateManager(map_end_offset=self.log.log_start_offset)
            self.producer_state_load: ProducerStateLoad = load_producer_state(
                self.producer_state, self.log, self._snapshots
            )
            """How the producer state was loaded when the replica opened (for logs and tests)."""
            checkpointed = read_offset(directory / HIGH_WATERMARK_CHECKPOINT)
        except OSError as e:
            self.log.abandon()
            raise storage_error(e, "opening the replica", directory) from e
        except BaseException:
            self.log.abandon()
            raise
        self._snapshot_rolled_base = self.log.active_segment_base_offset
        self.local_id = local_id
        self.broker_epoch = broker_epoch
        self.core: PartitionLeader | PartitionFollower | None = None
        # Kafka's replication-offset-checkpoint, one file per replica: a restarted replica
        # resumes from it, so a leader it becomes does not serve a lower high watermark.
        self._checkpoint_path = directory / HIGH_WATERMARK_CHECKPOINT
        self.high_watermark = min(
            max(checkpointed or 0, self.log.log_start_offset), self.log.log_end_offset
        )
        self._checkpointed_high_watermark = checkpointed
        self._fetch_from_leader = fetch_from_leader
        self._send_alter_partition = send_alter_partition
        self._on_offline = on_offline
        self.offline: KafkaStorageError | None = None
        """The disk error that took the replica offline (see the module docstring), or None."""
        self._changed = asyncio.Event()
        self._waiting: dict[int, asyncio.Future[ProduceCompletion]] = {}
        self._next_request_id = 1
        self._fetcher: asyncio.Task[None] | None = None
        self._logger = _log.bind(topic_partition=str(topic_partition), node_id=local_id)
        self._logger.info(
            "replica_opened",
            log_start_offset=self.log.log_start_offset,
            log_end_offset=self.log.log_end_offset,
            producer_snapshot_offset=self.producer_state_load.snapshot_offset,
            producer_batches_replayed=self.producer_state_load.batches_replayed,
            producers=len(self.producer_state.entries),
        )

    # --- state --------------------------------------------------------------------------------

    @property
    def leader(self) -> PartitionLeader | None:
        return self.core if isinstance(self.core, PartitionLeader) else None

    @property
    def changed(self) -> asyncio.Event:
        """Set (and replaced) when the log end offset or the high watermark moved."""
        return self._changed

    def notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # --- disk errors --------------------------------------------------------------------------

    @contextlib.contextmanager
    def storage_guard(self) -> Iterator[None]:
        """Run the block; a disk error in it takes the replica offline (`go_offline`) and is
        raised as `KafkaStorageError`."""
        try:
            yield
        except (KafkaStorageError, OSError) as e:
            raise self.go_offline(e) from e

    def go_offline(self, error: KafkaStorageError | OSError) -> KafkaStorageError:
        """Take the replica offline after a disk error (idempotent; see the module docstring).
        Returns the typed error."""
        if isinstance(error, OSError):
            error = storage_error(error, "replica I/O", self.directory)
        if self.offline is not None:
            return error
        self.offline = error
        self._logger.error("replica_offline", error=error.message, role=type(self.core).__name__)
        # NB: no resign/advance: the core may be mid-append or mid-Ready, and is dropped.
        self.core = None
        if self._fetcher is not None:
            self._fetcher.cancel()
            self._fetcher = None
        for future in self._waiting.values():
            if not future.done():
                future.set_result(
                    ProduceCompletion(
                        request_id=-1,
                        error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                        error_message=error.message[:200],
                    )
                )
        self._waiting.clear()
        self.log.abandon()  # nothing flushed: the next open recovers what is on disk
        self.notify()
        if self._on_offline is not None:
            self._on_offline(self, error)
        return error

    # --- metadata -----------------------------------------------------------------------------

    def apply_registration(
        self,
        registration: PartitionRegistration,
        brokers: Mapping[int, BrokerStatus],
        config: ReplicationConfig,
    ) -> None:
        """Become (or stay) leader or follower as ``registration`` says, under ``config``
        (a leader that stays takes a changed ``min.insync.replicas`` at once).

        Raises:
            KafkaStorageError: a disk error took the replica offline.
        """
        if self.offline is not None:
            raise KafkaStorageError(self.offline.message)
        with self.storage_guard():
            self._apply_registration(registration, brokers, config)

    def _apply_registration(
        self,
        registration: PartitionRegistration,
        brokers: Mapping[int, BrokerStatus],
        config: ReplicationConfig,
    ) -> None:
        now = clock_ms()
        core = self.core
        if isinstance(core, PartitionLeader):
            core.update_brokers(brokers, now)
            core.update_config(config, now)
            if core.handle_partition_change(registration, now):
                self.drain()
                return
            self.drain()  # the resigned leader's failed produces
            self.core = None
        elif isinstance(core, PartitionFollower):
            leader_epoch = core.leader_epoch
            if core.handle_partition_change(registration, now):
                self.drain()
                if core.leader_epoch != leader_epoch and self._fetcher is not None:
                    # A new leader: stop waiting on the old one (paused, it never answers);
                    # Kafka moves the partition to the new leader's fetcher at once.
                    self._fetcher.cancel()
                    self._fetcher = None
                self._ensure_fetcher()
                return
            self.drain()
            self.core = None
        if registration.leader == self.local_id:
            self.core = PartitionLeader(
                topic_partition=self.topic_partition,
                local_id=self.local_id,
                local_broker_epoch=self.broker_epoch,
                registration=registration,
                brokers=brokers,
                log=self.log,
                producer_state=self.producer_state,
                config=config,
                high_watermark=self.high_watermark,
                now_ms=now,
                log_config=self.log.config,
            )
        else:
            self.core = PartitionFollower(
                topic_partition=self.topic_partition,
                local_id=self.local_id,
                local_broker_epoch=self.broker_epoch,
                leader_id=registration.leader,
                leader_epoch=registration.leader_epoch,
                log=self.log,
                producer_state=self.producer_state,
                config=config,
                high_watermark=self.high_watermark,
                now_ms=now,
            )
            self._ensure_fetcher()
        self.drain()

    def update_log_config(self, config: LogConfig) -> None:
        """Apply a changed topic log config to the open log (Kafka's
        ``UnifiedLog.updateConfig``): the next append, roll, flush and retention use it."""
        if self.log.closed or config == self.log.config:
            return
        self.log.update_config(config)  # logs log_config_updated with the new values
        leader = self.leader
        if leader is not None:
            leader.update_log_config(config)

    def update_brokers(self, brokers: Mapping[int, BrokerStatus]) -> None:
        if isinstance(self.core, PartitionLeader):
            self.core.update_brokers(brokers, clock_ms())
            self.drain()

    def checkpoint_high_watermark(self) -> None:
        """Persist the high watermark if it moved (``replica.high.watermark.checkpoint.
        interval.ms``; durable on return).

        Raises:
            KafkaStorageError: the write failed (the replica went offline).
        """
        if self.high_watermark != self._checkpointed_high_watermark and not self.log.closed:
            with self.storage_guard():
                write_offset(self._checkpoint_path, self.high_watermark)
            self._checkpointed_high_watermark = self.high_watermark

    def stop(self) -> None:
        """Drop the core (this broker is no longer a replica) and close the log."""
        leader = self.leader
        if leader is not None:
            leader.resign(clock_ms())
            self.drain()
        self.core = None
        if self._fetcher is not None:
            self._fetcher.cancel()
            self._fetcher = None
        for future in self._waiting.values():
            if not future.done():
                future.set_result(
                    ProduceCompletion(request_id=-1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
                )
        self._waiting.clear()
        self.notify()
        if self.offline is not None:
            return  # the log was abandoned when the replica went offline
        if self.high_watermark != self._checkpointed_high_watermark and not self.log.closed:
            with contextlib.suppress(OSError):
                write_offset(self._checkpoint_path, self.high_watermark)
        if not self.log.closed:
            with contextlib.suppress(OSError, KafkaStorageError):
                self.take_producer_snapshot()  # a clean shutdown: the next open replays nothing
        with contextlib.suppress(KafkaStorageError):
            self.log.close()  # NB: a failing close abandons the log: the next open recovers

    # --- the Ready loop -----------------------------------------------------------------------

    def drain(self) -> None:
        """Apply every pending Ready of the current core (the order is the Ready contract).
        A disk error takes the replica offline (the core is dropped with its Ready)."""
        try:
            self._drain()
        except (KafkaStorageError, OSError) as e:
            self.go_offline(e)

    def _drain(self) -> None:
        core = self.core
        if isinstance(core, PartitionLeader):
            while core.has_ready():
                rd = core.ready()
                if rd.assign_epoch_start is not None:
                    self.log.assign_leader_epoch(*rd.assign_epoch_start)
                self._publish(rd.high_watermark)
                for completion in rd.produce_completions:
                    future = self._waiting.pop(completion.request_id, None)
                    if future is not None and not future.done():
                        future.set_result(completion)
                if rd.alter_partition is not None:
                    self._send_alter_partition(self, rd.alter_partition)
                core.advance(rd)
        elif isinstance(core, PartitionFollower):
            while core.has_ready():
                frd = core.ready()
                # NB: snapshots above a truncation point go first (durably), so none can
                # describe a cut suffix that later appends replace (see producer_snapshots).
                if frd.truncate_fully_and_start_at is not None:
                    self._snapshots.delete_all()
                    self.log.truncate_fully_and_start_at(frd.truncate_fully_and_start_at)
                if frd.truncate_to is not None:
                    self._snapshots.delete_above(frd.truncate_to)
                    self.log.truncate_to(frd.truncate_to)
                    self.log.leader_epoch_cache.truncate_from_end(self.log.log_end_offset)
                    self._snapshots.delete_above(self.log.log_end_offset)
                if frd.append:
                    try:
                        self.log.append_as_follower(frd.append)
                    except KafkaStorageError:
                        raise
                    except KraftError as e:
                        self._logger.warning("follower_append_failed", error=e.message)
                        core.on_append_failed(frd, clock_ms())
                        continue
                if frd.rebuild_producer_state:
                    load = load_producer_state(self.producer_state, self.log, self._snapshots)
                    self._logger.info(
                        "producer_state_reloaded",
                        snapshot_offset=load.snapshot_offset,
                        batches_replayed=load.batches_replayed,
                    )
                self._publish(frd.high_watermark)
                core.advance(frd)
                self.notify()

    def _publish(self, high_watermark: int) -> None:
        if high_watermark != self.high_watermark:
            self.high_watermark = high_watermark
            self.notify()

    # --- leader inputs ------------------------------------------------------------------------

    async def produce(self, acks: int, timeout_ms: int, records: bytes) -> ProduceCompletion:
        """One partition of a Produce: validated and appended now; awaited until answered."""
        await self._await_sequence_turn(records, timeout_ms)
        leader = self.leader
        if leader is None:
            return ProduceCompletion(request_id=-1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        request_id = self._next_request_id
        self._next_request_id += 1
        future: asyncio.Future[ProduceCompletion] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        now = clock_ms()
        produce = PartitionProduce(
            request_id=request_id, acks=acks, timeout_ms=timeout_ms, records=records
        )
        append = leader.handle_produce_request(produce, now)
        if append is not None:
            try:
                base = self.log.append(append.records, leader_epoch=append.leader_epoch)
            except KraftError as e:
                # NB: the core is told first, so it is never left waiting for this append.
                leader.on_append_failed(request_id, e.code, now)
                if isinstance(e, KafkaStorageError):
                    self.go_offline(e)  # answers every waiting produce, this one too
            else:
                leader.on_appended(request_id, base, now)
                self.notify()
        self.drain()
        return await future

    async def _await_sequence_turn(self, records: bytes, timeout_ms: int) -> None:
        """Hold an idempotent batch that arrived ahead of its predecessor, briefly.

        NB: Kafka handles a connection's requests in order, and its producers rely on it (up
        to 5 in flight, KIP-98). Concurrent gRPC calls may be handled in any order, so batch
        N+1 can reach the leader before batch N: it would be rejected (OUT_OF_ORDER_SEQUENCE)
        or, for a producer the leader does not know yet, start the producer's state at the
        wrong sequence (KIP-360 accepts any first sequence). So a batch whose sequence does
        not follow waits up to `SEQUENCE_REORDER_WAIT_MS` for the appends before it; then
        the core decides as usual.
        """
        try:
            header = read_header(records)
        except KraftError:
            return  # the core answers CORRUPT_MESSAGE
        if header.producer_id < 0 or header.is_control or header.base_sequence < 0:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(SEQUENCE_REORDER_WAIT_MS, max(timeout_ms, 0)) / 1000
        while self.leader is not None and self._ahead_of_sequence(header):
            remaining = deadline - loop.time()
            if remaining <= 0:
                self._logger.info(
                    "out_of_order_batch_released",
                    producer_id=header.producer_id,
                    base_sequence=header.base_sequence,
                )
                return
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)

    def _ahead_of_sequence(self, header: BatchHeader) -> bool:
        entry = self.producer_state.entry(header.producer_id)
        first = header.base_sequence
        if entry is None or header.producer_epoch > entry.producer_epoch:
            return first != 0
        if header.producer_epoch < entry.producer_epoch:
            return False
        return first > entry.last_sequence + 1

    def handle_follower_fetch(
        self, fetch: FollowerFetch, max_bytes: int
    ) -> tuple[LeaderFetchAnswer, bytes]:
        leader = self.leader
        if leader is None:
            return LeaderFetchAnswer(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER), b""
        answer = leader.handle_follower_fetch(fetch, clock_ms())
        self.drain()
        records = b""
        if answer.read_offset is not None:
            try:
                records = self.read(answer.read_offset, max_bytes)
            except KraftError as e:
                return LeaderFetchAnswer(error_code=e.code), b""
        return answer, records

    def read(self, from_offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """`SegmentedLog.read`, which validates every batch it returns. A disk error takes the
        replica offline. So does a batch corrupted on disk while another ISR member holds a
        good copy (the controller fails over to it, and reopening cuts this log at the bad
        batch so the replica refetches it); when this is the only in-sync copy, the reader gets
        CORRUPT_MESSAGE with the offset and may seek past it, as in Kafka.

        Raises:
            KafkaStorageError: the replica went offline.
            CorruptRecordError: a corrupt batch in the only in-sync copy.
            OffsetOutOfRangeError, LogClosedError: as `SegmentedLog.read`.
        """
        try:
            with self.storage_guard():
                return self.log.read(from_offset, max_bytes, max_offset=max_offset)
        except CorruptRecordError as e:
            leader = self.leader
            if leader is None or leader.isr <= {self.local_id}:
                self._logger.error("corrupt_batch_in_only_copy", offset=from_offset)
                raise
            raise self.go_offline(self.log.fail_corrupt(from_offset, e.message)) from e

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """`SegmentedLog.offset_for_timestamp`; a disk error takes the replica offline."""
        with self.storage_guard():
            return self.log.offset_for_timestamp(timestamp_ms)

    def handle_alter_partition_result(
        self, leader: PartitionLeader, alter_id: int, result: AlterPartitionPartitionResult
    ) -> None:
        """The controller's answer to an AlterPartition ``leader`` sent (dropped if that
        leader has been replaced meanwhile)."""
        if self.core is not leader:
            return
        leader.handle_alter_partition_response(alter_id, result, clock_ms())
        self.drain()

    def tick(self) -> None:
        """Let time pass (the broker calls this every 50 ms): the leader core's deadlines, a
        ``flush.ms`` flush of an idle log, and a producer snapshot after a roll. A disk error
        takes the replica offline."""
        if self.offline is not None:
            return
        try:
            self._tick()
        except (KafkaStorageError, OSError) as e:
            self.go_offline(e)

    def _tick(self) -> None:
        now = clock_ms()
        leader = self.leader
        if leader is not None:
            leader.tick(now)
            self.drain()
        self.maybe_flush()
        if self.log.active_segment_base_offset != self._snapshot_rolled_base:
            self._snapshot_rolled_base = self.log.active_segment_base_offset
            self.take_producer_snapshot()

    def maybe_flush(self) -> bool:
        """Kafka's ``LogManager.flushDirtyLogs``: fsync the log if ``flush.ms`` has passed since
        its last flush and it holds unflushed data (an append checks ``flush.ms`` too, but an
        idle partition has none). Durable on return; True if it flushed.

        Raises:
            KafkaStorageError: on a disk error.
        """
        log = self.log
        if log.closed or log.config.flush_ms >= LONG_MAX:
            return False
        return log.maybe_flush()  # NB: by the log's own clock, which set its last flush time

    # --- producer snapshots and retention -------------------------------------------------------

    def take_producer_snapshot(self) -> int | None:
        """Write the producer state to ``<map end offset>.snapshot`` (Kafka takes one when a
        segment rolls; the broker's tick notices rolls, off the append path). Durable on
        return; returns the snapshot's offset, or None if there was nothing new to write.

        Raises:
            OSError: the file could not be written.
        """
        state = self.producer_state
        offset = state.map_end_offset
        if offset != self.log.log_end_offset or offset < self.log.log_start_offset:
            # NB: a rebuild is pending (the state lags the log): the next roll will do.
            self._logger.warning(
                "producer_snapshot_skipped",
                map_end_offset=offset,
                log_end_offset=self.log.log_end_offset,
            )
            return None
        if offset in self._snapshots:
            return None
        self._snapshots.write(offset, state.snapshot())
        self._logger.debug("producer_snapshot_taken", offset=offset)
        return offset

    @property
    def producer_snapshot_offsets(self) -> list[int]:
        return self._snapshots.offsets

    def apply_retention(self, now_ms: int) -> int:
        """Delete the segments that ``retention.ms`` / ``retention.bytes`` expire, all below the
        high watermark, and the producer snapshots below the new log start offset. Durable on
        return; the number of segments deleted.

        Raises:
            KafkaStorageError: on a disk error (the replica went offline).
        """
        if self.log.closed:
            return 0
        with self.storage_guard():
            deleted = self.log.apply_retention(now_ms, high_watermark=self.high_watermark)
            if deleted:
                self._snapshots.delete_below(self.log.log_start_offset)
        if deleted:
            self._logger.info(
                "retention_deleted_segments",
                segments_deleted=deleted,
                log_start_offset=self.log.log_start_offset,
                high_watermark=self.high_watermark,
            )
        return deleted

    def _follow_leader_log_start_offset(self, leader_log_start_offset: int) -> None:
        """Kafka's follower ``maybeIncrementLogStartOffset(leaderLogStartOffset)``: the leader's
        retention moved its log start; move ours, but never past our high watermark.

        Invariant: log_start_offset <= high_watermark <= log_end_offset.
        """
        log = self.log
        target = min(leader_log_start_offset, self.high_watermark, log.log_end_offset)
        if target <= log.log_start_offset or log.closed:
            return
        try:
            log.advance_log_start_offset(target)
            self._snapshots.delete_below(log.log_start_offset)
        except (KafkaStorageError, OSError) as e:
            self.go_offline(e)
            return
        except KraftError as e:
            self._logger.warning("log_start_offset_not_advanced", error=repr(e))
            return
        self._logger.info("log_start_offset_followed_leader", log_start_offset=target)

    # --- follower fetcher ---------------------------------------------------------------------

    def _ensure_fetcher(self) -> None:
        if self._fetcher is None or self._fetcher.done():
            self._fetcher = asyncio.create_task(
                self._fetch_loop(), name=f"fetcher-{self.topic_partition}"
            )

    async def _fetch_loop(self) -> None:
        while isinstance(self.core, PartitionFollower):
            follower = self.core
            now = clock_ms()
            request = follower.build_fetch_request(now)
            if request is None:
                deadline = follower.next_deadline_ms(now)
                delay_s = 0.1 if deadline is None else max(0.0, min(deadline - now, 100) / 1000)
                changed = self._changed
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), delay_s)
                continue
            response = await self._fetch_from_leader(request)
            if self.core is not follower:
                continue  # NB: a newer follower core has no fetch in flight; serve it instead
            follower.handle_fetch_response(response, clock_ms())
            self.drain()
            if (
                response.log_start_offset > self.log.log_start_offset
                and response.error_code is ErrorCode.NONE
            ):
                self._follow_leader_log_start_offset(response.log_start_offset)


def follower_response(
    request: FollowerFetchRequest,
    *,
    error_code: ErrorCode = ErrorCode.NONE,
    high_watermark: int = -1,
    log_start_offset: int = -1,
    diverging_epoch: DivergingEpoch | None = None,
    records: bytes = b"",
) -> FollowerFetchResponse:
    return FollowerFetchResponse(
        fetch_id=request.fetch_id,
        error_code=error_code,
        high_watermark=high_watermark,
        log_start_offset=log_start_offset,
        diverging_epoch=diverging_epoch,
        records=records,
    )


__all__ = ["HIGH_WATERMARK_CHECKPOINT", "PartitionReplica", "follower_response", "scan_headers"]
