"""`PartitionReplica`: one partition's replica on this broker, the asyncio shell around its
partition driver.

Theory of operation
-------------------
Everything between the partition's core and its log (becoming leader or follower, appends,
truncation, the high watermark, producer state and snapshots, the high-watermark checkpoint,
going offline on a disk error) is the partition driver's (`replication.driver`), which the
simulator and the replication tests run too. The replica opens the partition's
`SegmentedLog` (``<data dir>/<topic>-<partition>/``), its producer snapshots
(`replication.broker.replicas.producer_snapshots`) and its ``high-watermark-checkpoint`` file, hands
them to the driver the topic's replication mode picks (`open_partition_driver`), and adds
what needs the event loop:

- a follower runs one fetch loop: the driver's fetch goes to ``fetch_from_leader`` (the
  broker batches it with the other partitions led by the same broker into one long-poll
  ``Broker.Fetch`` carrying its replica id and broker epoch, see
  `replication.broker.replicas.fetcher`) and the leader's answer goes back to the driver;
- a leader parks produce futures until the driver's `produce_completed`, holds an idempotent
  batch that arrived ahead of its predecessor (`replication.broker.replicas.sequence_turn`), and
  wakes parked fetches whenever its log end offset or high watermark moves (`changed`);
- log maintenance that only the segmented log has: ``flush.ms`` flushes, retention
  (`apply_retention`, below the high watermark only), dynamic log configs, timestamp lookups,
  and a corrupt batch found on read.

*Quorum mode* (``replication.mode=quorum``, `replication.driver.quorum`): the replica joins its
partition's Raft group on the broker's `QuorumHost` (``replication.broker.replicas.quorum_host``):
it registers the group (`quorum_group`) with the partition's replicas as the only members it hears,
hands every inbound Raft message to the driver (`handle_raft_message`), sends what the driver emits
(`send_raft_message`), reports a won election (`quorum_leader_elected`) through the host to the
controller, and runs a timer task that ticks the driver at its own deadlines (`next_deadline_ms`:
Raft's fetch long polls, election and linger timers, waiting produces). Its Raft epoch and vote live
in ``quorum-state`` (`FileQuorumStateStore`). There is no follower fetch loop: Raft replicates.

*Disk errors.* When the driver reports the replica offline (`went_offline`; a corrupt batch
found on read while another ISR member has a good copy counts too: `read`), waiting produces
are answered KAFKA_STORAGE_ERROR (retriable; nothing that failed was acknowledged), the fetch
loop stops, the log is abandoned unflushed, and ``on_offline`` tells the broker, which
reports the replica in its heartbeats until it reopens it (`replication.broker.server`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import structlog

from kraft.controller.messages import AlterPartitionPartitionResult
from kraft.metadata.image import PartitionRegistration
from kraft.raft.messages import RaftMessage
from kraft.raft_shell.clock import clock_ms
from kraft.types import NodeId, TopicPartition
from replication.broker.replicas.change_event import ChangeEvent
from replication.broker.replicas.fetcher import follower_fetch_loop, follower_response
from replication.broker.replicas.producer_snapshots import ProducerSnapshotStore, scan_headers
from replication.broker.replicas.quorum_host import QuorumHost
from replication.broker.replicas.quorum_state import FileQuorumStateStore
from replication.broker.replicas.replica_metrics import ReplicaMetrics
from replication.broker.replicas.sequence_turn import await_sequence_turn, sequence_turn_now
from replication.broker.replicas.stable_reads import last_stable_offset
from replication.core import (
    AlterPartitionSend,
    BrokerStatus,
    FollowerFetch,
    FollowerFetchRequest,
    FollowerFetchResponse,
    LeaderFetchAnswer,
    PartitionFollower,
    PartitionLeader,
    ProduceCompletion,
    ProducerStateManager,
    ReplicationConfig,
)
from replication.driver import (
    IsrPartitionDriver,
    NoDriverEvents,
    PartitionDriver,
    ProducerStateLoad,
    QuorumPartitionDriver,
    ReplicationMode,
    isr_leader,
    open_partition_driver,
    quorum_group,
    raft_leader,
)
from storage.checkpoint import FileCheckpoint
from storage.config import LONG_MAX, LogConfig
from storage.errors import CorruptRecordError, ErrorCode, KafkaStorageError, KraftError
from storage.file_io import storage_error
from storage.file_region import Records
from storage.log import SegmentedLog
from storage.log_cleaner import CleanJob, CleanOutput

FetchFromLeader = Callable[[FollowerFetchRequest], Awaitable[FollowerFetchResponse]]
SendAlterPartition = Callable[["PartitionReplica", AlterPartitionSend], None]
OnOffline = Callable[["PartitionReplica", KafkaStorageError], None]
Admit = Callable[[], ErrorCode]
OnInput = Callable[["PartitionReplica"], None]

HIGH_WATERMARK_CHECKPOINT = "high-watermark-checkpoint"

_log = structlog.get_logger("replication.broker.replicas.partition")


class PartitionReplica(NoDriverEvents):
    """This broker's replica of ``topic_partition``.

    Args:
        directory: the log's directory (created if missing, recovered if unclean).
        local_id / broker_epoch: this broker and its registered epoch.
        fetch_from_leader: sends one follower fetch to the leader; transport failures come
            back as a response carrying the error code.
        send_alter_partition: hands an AlterPartition to the broker shell, which later calls
            `handle_alter_partition_result` with the replica's `generation` at the time.
        on_offline: called once, synchronously, when a disk error took the replica offline.
        on_input: called after every input (a request, a response, a metadata change, an
            append): `next_deadline_ms` may have moved (the broker's tick task sleeps until
            the earliest one).
        replication_mode: the topic's (picks the driver: `open_partition_driver`).
        quorum: quorum mode: the broker's Raft group host (required then).
        write_caching: quorum mode: the topic's ``quorum.write.caching``.

    Raises:
        KafkaStorageError: the log, its checkpoints or its producer snapshots cannot be read.
        ValueError: a quorum-mode replica without a ``quorum`` host.
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
        on_input: OnInput | None = None,
        replication_mode: ReplicationMode = ReplicationMode.ISR,
        quorum: QuorumHost | None = None,
        write_caching: bool = False,
    ) -> None:
        if replication_mode is ReplicationMode.QUORUM and quorum is None:
            raise ValueError("a quorum-mode replica needs the broker's QuorumHost")
        self.topic_partition = topic_partition
        self._metrics = ReplicaMetrics(topic_partition.topic)
        self.topic_id = topic_id
        self.directory = directory
        self.local_id = local_id
        self.broker_epoch = broker_epoch
        self._fetch_from_leader = fetch_from_leader
        self._send_alter_partition = send_alter_partition
        self._on_offline = on_offline
        self._on_input = on_input
        self._changed = ChangeEvent()
        self._waiting: dict[int, tuple[asyncio.Future[ProduceCompletion], bytes]] = {}
        """Produce requests waiting for their completion, with their records (the metrics)."""
        self._next_request_id = 1
        self._fetcher: asyncio.Task[None] | None = None
        self._logger = _log.bind(topic_partition=str(topic_partition), node_id=local_id)
        self._quorum = quorum if replication_mode is ReplicationMode.QUORUM else None
        self._raft_group = quorum_group(topic_id, topic_partition.partition)
        self._raft_wake = asyncio.Event()
        self._raft_timer: asyncio.Task[None] | None = None
        self.log = SegmentedLog.open(directory, log_config)
        try:
            self._snapshots = ProducerSnapshotStore(directory)
            self.driver: PartitionDriver = open_partition_driver(
                replication_mode,
                topic_partition=topic_partition,
                topic_id=topic_id,
                directory=directory,
                log=self.log,
                snapshots=self._snapshots,
                checkpoint=FileCheckpoint(directory / HIGH_WATERMARK_CHECKPOINT),
                quorum_state=(
                    FileQuorumStateStore(directory) if self._quorum is not None else None
                ),
                local_id=local_id,
                broker_epoch=broker_epoch,
                events=self,
                log_config=log_config,
                write_caching=write_caching,
                raft_config=None if self._quorum is None else self._quorum.raft_config,
            )
        except OSError as e:
            self.log.abandon()
            raise storage_error(e, "opening the replica", directory) from e
        except BaseException:
            self.log.abandon()
            raise
        self._raft_registered = False
        if self._quorum is not None:
            # Members come with the registration (`apply_registration`); until then, none.
            self._quorum.register(self._raft_group, self, frozenset())
            self._raft_registered = True

    # --- state --------------------------------------------------------------------------------

    @property
    def core(self) -> PartitionLeader | PartitionFollower | None:
        """The ISR core, for reading its state (None under another driver)."""
        driver = self.driver
        return driver.core if isinstance(driver, IsrPartitionDriver) else None

    @property
    def leader(self) -> PartitionLeader | None:
        return isr_leader(self.driver)

    @property
    def high_watermark(self) -> int:
        return self.driver.high_watermark

    @property
    def producer_state(self) -> ProducerStateManager:
        return self.driver.producer_state

    @property
    def producer_state_load(self) -> ProducerStateLoad | None:
        """How the producer state was loaded when the replica opened (for logs and tests)."""
        driver = self.driver
        return driver.producer_state_load if isinstance(driver, IsrPartitionDriver) else None

    @property
    def producer_snapshot_offsets(self) -> list[int]:
        return self._snapshots.offsets

    @property
    def generation(self) -> int:
        return self.driver.generation

    @property
    def offline(self) -> KafkaStorageError | None:
        """The disk error that took the replica offline (see the module docstring), or None."""
        return self.driver.offline

    @property
    def changed(self) -> ChangeEvent:
        """Set (and replaced) when the log end offset or the high watermark moved."""
        return self._changed

    def notify(self) -> None:
        self._changed.set()
        self._changed = ChangeEvent()

    def raft_leader(self) -> tuple[int, int] | None:
        """Quorum mode: the Raft leader this replica knows and its epoch (None if it knows
        none, or under ISR): the leader hint of a NOT_LEADER_OR_FOLLOWER answer."""
        return raft_leader(self.driver)

    def leads_epoch(self, leader_epoch: int) -> bool:
        """Whether this replica leads in ``leader_epoch`` (a leader report is still true)."""
        return self.driver.is_leader and self.driver.leader_epoch == leader_epoch

    # --- the Raft group (quorum mode) -----------------------------------------------------------

    def deliver(self, msg: RaftMessage) -> None:
        """`Inbox`: a Raft message of this replica's group, from one of its replicas."""
        self.driver.handle_raft_message(msg, clock_ms())
        self._raft_wake.set()  # the next deadline may have moved

    def peer_lost(self, peer: NodeId) -> None:
        """`Inbox`: the connection to replica ``peer`` was closed by its host."""
        self.driver.handle_raft_peer_lost(peer, clock_ms())
        self._raft_wake.set()

    def send_raft_message(self, message: RaftMessage) -> None:
        if self._quorum is not None:
            self._quorum.send(self._raft_group, message)

    def quorum_leader_elected(self, leader_epoch: int) -> None:
        if self._quorum is not None:
            self._logger.info("quorum_leader_elected", leader_epoch=leader_epoch)
            self._quorum.report_leader(self, leader_epoch)

    def _ensure_raft_timer(self) -> None:
        if self._raft_timer is None or self._raft_timer.done():
            self._raft_timer = asyncio.create_task(
                self._raft_timer_loop(), name=f"raft-timer-{self.topic_partition}"
            )

    async def _raft_timer_loop(self) -> None:
        """Tick the driver at its deadlines, and whenever an input may have moved them."""
        driver = self.driver
        while driver.offline is None:
            self._raft_wake.clear()
            now = clock_ms()
            deadline = driver.next_deadline_ms()
            # NB: at least 1 ms, so a deadline that stays due cannot spin the loop.
            wait_ms = 1000 if deadline is None else max(1, deadline - now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._raft_wake.wait(), wait_ms / 1000)
            driver.tick(clock_ms())

    def _leave_raft_group(self) -> None:
        if self._quorum is not None and self._raft_registered:
            # NB: once: a replica reopened after a disk error holds the group by then.
            self._raft_registered = False
            self._quorum.unregister(self._raft_group)
        if self._raft_timer is not None:
            self._raft_timer.cancel()
            self._raft_timer = None

    def _input(self) -> None:
        """An input reached the driver: tell the broker's tick task (see ``on_input``)."""
        if self._on_input is not None:
            self._on_input(self)

    def next_deadline_ms(self) -> int | None:
        """When `tick` next has work (absolute, `clock_ms`; None: no timer): the driver's
        deadline, or a ``flush.ms`` flush of unflushed data."""
        if self.offline is not None:
            return None
        driver = self.driver
        # NB: a quorum-mode driver's deadlines are its Raft timer's (`_raft_timer_loop`).
        deadline = None if isinstance(driver, QuorumPartitionDriver) else driver.next_deadline_ms()
        if self.log.closed:
            return deadline
        flush_in_ms = self.log.flush_due_in_ms()
        if flush_in_ms is not None:
            flush_at_ms = clock_ms() + flush_in_ms
            if deadline is None or flush_at_ms < deadline:
                return flush_at_ms
        return deadline

    # --- the driver's events ------------------------------------------------------------------

    def produce_completed(self, completion: ProduceCompletion) -> None:
        waiting = self._waiting.pop(completion.request_id, None)
        if waiting is not None and not waiting[0].done():
            if completion.error_code is ErrorCode.NONE:
                self._metrics.produced(waiting[1])
            waiting[0].set_result(completion)

    def send_alter_partition(self, generation: int, send: AlterPartitionSend) -> None:
        self._send_alter_partition(self, send)

    def high_watermark_published(
        self, old: int, new: int, leader_epoch: int, *, is_leader: bool, from_leader: bool
    ) -> None:
        if new != old:
            self.notify()

    def log_appended(self, leader_epoch: int, base_offset: int, *, as_leader: bool) -> None:
        self.notify()
        self._input()

    def went_offline(self, error: KafkaStorageError) -> None:
        self._stop_fetcher()
        self._leave_raft_group()
        self._answer_waiting(
            ProduceCompletion(
                request_id=-1,
                error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                error_message=error.message[:200],
            )
        )
        self.log.abandon()  # nothing flushed: the next open recovers what is on disk
        self.notify()
        if self._on_offline is not None:
            self._on_offline(self, error)

    def go_offline(self, error: KafkaStorageError | OSError) -> KafkaStorageError:
        """Take the replica offline after a disk error (idempotent); the typed error."""
        return self.driver.go_offline(error)

    def _answer_waiting(self, completion: ProduceCompletion) -> None:
        for future, _ in self._waiting.values():
            if not future.done():
                future.set_result(completion)
        self._waiting.clear()

    def _stop_fetcher(self) -> None:
        if self._fetcher is not None:
            self._fetcher.cancel()
            self._fetcher = None

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
        if self._quorum is not None:
            # Stream admission: the partition's replicas only (the voters).
            self._quorum.set_members(self._raft_group, frozenset(registration.replicas))
        if self.driver.apply_registration(registration, brokers, config, clock_ms()):
            # A new leader: stop waiting on the old one (paused, it never answers); Kafka
            # moves the partition to the new leader's fetcher at once.
            self._stop_fetcher()
        self._input()
        if self.driver.is_follower:
            self._ensure_fetcher()
        if self._quorum is not None and self.offline is None:
            self._ensure_raft_timer()

    def update_log_config(self, config: LogConfig) -> None:
        """Apply a changed topic log config to the open log (Kafka's
        ``UnifiedLog.updateConfig``): the next append, roll, flush and retention use it."""
        if self.log.closed or config == self.log.config:
            return
        self.log.update_config(config)  # logs log_config_updated with the new values
        self.driver.update_log_config(config)
        self._input()

    def update_brokers(self, brokers: Mapping[int, BrokerStatus]) -> None:
        self.driver.update_brokers(brokers, clock_ms())
        self._input()

    def checkpoint_high_watermark(self) -> None:
        """Persist the high watermark if it moved (``replica.high.watermark.checkpoint.
        interval.ms``; durable on return, or inside a `CheckpointBatch` when it flushes:
        `replication.broker.replicas.tick.checkpoint_pass`).

        Raises:
            KafkaStorageError: the write failed (the replica went offline).
        """
        if not self.log.closed:
            self.driver.checkpoint_high_watermark()

    def stop(self, *, delete: bool = False) -> None:
        """Drop the role (this broker is no longer a replica) and close the log; with
        ``delete`` (its log is deleted next) close it as a crash would, flushing nothing
        (`SegmentedLog.abandon`): the flushes, checkpoints and producer snapshot of a clean
        close cost fsyncs, which deleting a 1,000-partition topic spent on the loop for
        seconds."""
        self.driver.stop(clock_ms())
        self._stop_fetcher()
        self._leave_raft_group()
        self._answer_waiting(
            ProduceCompletion(request_id=-1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        )
        self.notify()
        if self.offline is not None:
            return  # the log was abandoned when the replica went offline
        if delete:
            self.log.abandon()
            return
        if not self.log.closed:
            self.driver.close()  # a clean shutdown: the next open replays nothing
        with contextlib.suppress(KafkaStorageError):
            self.log.close()  # NB: a failing close abandons the log: the next open recovers

    # --- leader inputs ------------------------------------------------------------------------

    async def produce(
        self, acks: int, timeout_ms: int, records: bytes, admit: Admit | None = None
    ) -> ProduceCompletion:
        """One partition of a Produce: appended now (unless KIP-890's ``admit`` refuses)."""
        if not await await_sequence_turn(self, records, timeout_ms):
            return ProduceCompletion(
                request_id=-1, error_code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            )
        return await self._append_produced(acks, timeout_ms, records, admit)

    def produce_now(
        self, acks: int, timeout_ms: int, records: bytes
    ) -> asyncio.Future[ProduceCompletion] | None:
        """`produce` for a batch whose producer's sequence turn has come: appended before this
        returns, the future completes it (no task is needed to run it beside a Produce's other
        partitions). None: the batch is ahead of its sequence; `produce` holds it."""
        if not sequence_turn_now(self, records):
            return None
        return self._append_produced(acks, timeout_ms, records, None)

    def _append_produced(
        self, acks: int, timeout_ms: int, records: bytes, admit: Admit | None
    ) -> asyncio.Future[ProduceCompletion]:
        future: asyncio.Future[ProduceCompletion] = asyncio.get_running_loop().create_future()
        if not self.driver.is_leader:
            future.set_result(
                ProduceCompletion(request_id=-1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
            )
            return future
        if admit is not None and (refused := admit()) is not ErrorCode.NONE:
            future.set_result(ProduceCompletion(request_id=-1, error_code=refused))
            return future
        request_id = self._next_request_id
        self._next_request_id += 1
        self._waiting[request_id] = (future, records)
        self.driver.produce(request_id, acks, timeout_ms, records, clock_ms())
        self._raft_wake.set()  # quorum mode: a linger or a produce timeout to wait for
        self._input()
        return future

    def handle_follower_fetch(
        self, fetch: FollowerFetch, max_bytes: int, *, read: bool = True, min_one: bool = True
    ) -> tuple[LeaderFetchAnswer, bytes]:
        """A follower's fetch: its position counts either way; ``read=False`` (a throttled
        fetch, `replication.broker.replicas.throttle`) answers without records."""
        answer = self.driver.handle_follower_fetch(fetch, clock_ms())
        self._input()
        records = b""
        if answer.read_offset is not None and read:
            try:
                records = self.read(answer.read_offset, max_bytes, min_one=min_one)
            except KraftError as e:
                return LeaderFetchAnswer(error_code=e.code), b""
        return answer, records

    def read(
        self,
        from_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one: bool = True,
    ) -> bytes:
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
            return self.driver.read(from_offset, max_bytes, max_offset, min_one=min_one)
        except CorruptRecordError as e:
            self._on_corrupt(from_offset, e)
            raise

    def read_region(self, from_offset: int, max_bytes: int, max_offset: int | None) -> Records:
        """`read` as a `FileRegion` (`SegmentedLog.read_region`, for ``sendfile``)."""
        try:
            with self.driver.storage_guard():
                return self.log.read_region(from_offset, max_bytes, max_offset=max_offset)
        except CorruptRecordError as e:  # a bad batch header on the way
            self._on_corrupt(from_offset, e)
            raise

    def _on_corrupt(self, from_offset: int, e: CorruptRecordError) -> None:
        if self.driver.is_leader and self.driver.in_sync_replicas() - {self.local_id}:
            raise self.go_offline(self.log.fail_corrupt(from_offset, e.message)) from e
        self._logger.error("corrupt_batch_in_only_copy", offset=from_offset)  # see `read`

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """`SegmentedLog.offset_for_timestamp`; a disk error takes the replica offline."""
        with self.driver.storage_guard():
            return self.log.offset_for_timestamp(timestamp_ms)

    def handle_alter_partition_result(
        self, generation: int, alter_id: int, result: AlterPartitionPartitionResult
    ) -> None:
        """The controller's answer to an AlterPartition sent in ``generation`` (dropped if
        that leader has been replaced meanwhile)."""
        before = self.driver.in_sync_replicas()
        self.driver.handle_alter_partition_result(generation, alter_id, result, clock_ms())
        self._metrics.isr_changed(before, self.driver.in_sync_replicas())
        self._input()

    def tick(self) -> None:
        """Let time pass (the broker calls this at `next_deadline_ms`): the driver's deadlines
        (and its producer snapshot after a roll), and a ``flush.ms`` flush of an idle log. A
        disk error takes the replica offline."""
        if self.offline is not None:
            return
        self.driver.tick(clock_ms())
        if self.offline is not None:
            return
        try:
            self.maybe_flush()
        except (KafkaStorageError, OSError) as e:
            self.go_offline(e)

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
        """`PartitionDriver.take_producer_snapshot` (Kafka takes one when a segment rolls).

        Raises:
            OSError: the file could not be written.
        """
        return self.driver.take_producer_snapshot()

    def apply_retention(self, now_ms: int) -> int:
        """Delete the segments that ``retention.ms`` / ``retention.bytes`` expire, all below the
        high watermark, and the producer snapshots below the new log start offset. Durable on
        return; the number of segments deleted.

        Raises:
            KafkaStorageError: on a disk error (the replica went offline).
        """
        if self.log.closed:
            return 0
        high_watermark = self.high_watermark
        with self.driver.storage_guard():
            deleted = self.log.apply_retention(now_ms, high_watermark=high_watermark)
        if deleted:
            self.driver.log_start_offset_moved()
            self._input()
            self._logger.info(
                "retention_deleted_segments",
                segments_deleted=deleted,
                log_start_offset=self.log.log_start_offset,
                high_watermark=high_watermark,
            )
        return deleted

    def apply_compaction(self, now_ms: int) -> int:
        """One log-cleaner pass if the topic's ``cleanup.policy`` includes ``compact``, below
        the last stable offset (`storage.log.SegmentedLog.compact`); the records removed.

        Raises:
            KafkaStorageError: on a disk error (the replica went offline).
        """
        # NB: ISR replicas only: a quorum-mode partition's log is its Raft log, which the
        # cleaner does not touch (kraft does not compact Raft logs; they snapshot).
        if self._quorum is not None or self.log.closed or not self.log.config.compact:
            return 0
        stable = last_stable_offset(self.producer_state, self.high_watermark)
        with self.driver.storage_guard():
            result = self.log.compact(now_ms, high_watermark=stable)
        return 0 if result is None else result.records_removed

    def prepare_compaction(self, now_ms: int, offset_map_bytes: int | None) -> CleanJob | None:
        """Plan a pass below the last stable offset (KIP-98: an open transaction may abort);
        `run_clean` runs it in any thread, `finish_compaction` swaps it in. None: nothing to do.

        Raises:
            KafkaStorageError: on a disk error (the replica went offline).
        """
        if self._quorum is not None or self.log.closed or not self.log.config.compact:
            return None
        stable = last_stable_offset(self.producer_state, self.high_watermark)
        with self.driver.storage_guard():
            return self.log.prepare_compaction(now_ms, stable, offset_map_bytes)

    def finish_compaction(self, job: CleanJob, output: CleanOutput | Exception) -> int:
        """Swap a pass in (or raise its error); the records removed (0: the pass was dropped,
        the log having changed or closed meanwhile).

        Raises:
            KafkaStorageError: on a disk error (the replica went offline).
        """
        with self.driver.storage_guard():
            result = self.log.finish_compaction(job, output)
        return 0 if result is None else result.records_removed

    # --- follower fetcher ---------------------------------------------------------------------

    def _ensure_fetcher(self) -> None:
        if self._fetcher is None or self._fetcher.done():
            self._fetcher = asyncio.create_task(
                follower_fetch_loop(
                    self.driver, lambda: self._changed, self._fetch_from_leader, self._input
                ),
                name=f"fetcher-{self.topic_partition}",
            )


__all__ = [
    "HIGH_WATERMARK_CHECKPOINT",
    "FileCheckpoint",  # its home is storage.checkpoint
    "PartitionReplica",
    "follower_response",  # its home is replication.broker.replicas.fetcher
    "scan_headers",
]
