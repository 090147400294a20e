"""`IsrPartitionDriver`: one replica of an ISR-replicated partition, its core and its log.

Theory of operation
-------------------
The driver holds the replica's log (`ReplicaLog`), its `ProducerStateManager` (loaded when
the driver opens from the latest producer snapshot plus the batch headers after it:
`load_producer_state`), the high-watermark checkpoint, and at most one core: a
`PartitionLeader` while metadata names this broker the leader, a `PartitionFollower`
otherwise (also while the partition has no leader: it then builds no fetch). It is the loop
of ``replication.core``'s docstring and nothing more: every input is fed to the core, then
every Ready is applied in its documented order (`_drain`):

- a leader's Ready: assign the new epoch's start offset in the epoch cache, publish the high
  watermark, answer the completed produces, send an AlterPartition, ``advance``;
- a follower's Ready: delete the producer snapshots above a truncation point first (durably,
  so none can describe a cut suffix that later appends replace), truncate (KIP-101/279: to
  the leader's epoch end offset, decided by the core), append the fetched batches, rebuild
  the producer state if the core asks, publish the high watermark, ``advance``.

A follower also adopts its leader's log start offset from each fetch response (Kafka's
``maybeIncrementLogStartOffset``), capped by its own high watermark; a producer snapshot is
taken when the log rolls a segment (`tick`) and on a clean shutdown (`close`).

The shell owns transport and time: it sends what `build_fetch_request` returns and hands
the answer back with the driver's `generation` at the time, sends the AlterPartitions of
`DriverEvents.send_alter_partition`, and parks produces until `produce_completed`.

*Disk errors.* A `KafkaStorageError` (or ``OSError``) of any write takes the replica offline
(`go_offline`, Kafka's offline log directory at replica granularity): the core is dropped
mid-whatever (it is never used again, so a "previous LeaderAppend was not acknowledged"
state cannot outlive the failure) and `DriverEvents.went_offline` tells the shell, which
answers what waits with KAFKA_STORAGE_ERROR, abandons the log unflushed and reports the
replica until it reopens it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import final

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.controller.messages import AlterPartitionPartitionResult
from kraft.metadata.image import PartitionRegistration
from kraft.raft.messages import RaftMessage
from kraft.types import TopicPartition
from replication.core import (
    BrokerStatus,
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
    TruncationStrategy,
)
from replication.driver.interface import (
    DriverEvents,
    HighWatermarkCheckpoint,
    ProducerSnapshots,
    ReplicaLog,
)
from replication.driver.producer_state_load import ProducerStateLoad, load_producer_state
from replication.driver.replica_files import ReplicaFiles
from storage.config import LogConfig
from storage.errors import ErrorCode, KafkaStorageError, KraftError
from storage.file_io import storage_error

_log: FilteringBoundLogger = structlog.get_logger("replication.driver")


@final
class IsrPartitionDriver:
    """This broker's replica of ``topic_partition`` under ISR replication.

    Args:
        directory: where the replica lives (named in disk-error messages).
        log / snapshots / checkpoint: the replica's log, producer snapshots and
            high-watermark checkpoint (on disk in the broker, in memory in the simulator).
        local_id / broker_epoch: this broker and its registered epoch.
        events: where the driver's requests to its shell go.
        log_config: the topic's log settings (produces are validated against them).
        truncation_strategy: the simulator's switch back to pre-KIP-101 truncation.
        logger: bound for this replica; also given to the cores if passed.

    Raises:
        KafkaStorageError: the producer snapshots or the checkpoint cannot be read.
    """

    def __init__(
        self,
        *,
        topic_partition: TopicPartition,
        topic_id: str,
        directory: Path,
        log: ReplicaLog,
        snapshots: ProducerSnapshots,
        checkpoint: HighWatermarkCheckpoint,
        local_id: int,
        broker_epoch: int,
        events: DriverEvents,
        log_config: LogConfig | None = None,
        truncation_strategy: TruncationStrategy = TruncationStrategy.LEADER_EPOCH,
        logger: FilteringBoundLogger | None = None,
    ) -> None:
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.directory = directory
        self.local_id = local_id
        self.broker_epoch = broker_epoch
        self._log = log
        self._snapshots = snapshots
        self._events = events
        self._log_config = log_config
        self._truncation_strategy = truncation_strategy
        self._core_logger = logger
        self._logger = (logger or _log).bind(topic_partition=str(topic_partition), node_id=local_id)
        try:
            self._producer_state = ProducerStateManager(map_end_offset=log.log_start_offset)
            self.producer_state_load: ProducerStateLoad = load_producer_state(
                self._producer_state, log, snapshots, directory
            )
            """How the producer state was loaded when the replica opened (for logs and tests)."""
            checkpointed = checkpoint.read()
        except OSError as e:
            raise storage_error(e, "opening the replica", directory) from e
        self._snapshot_rolled_base = log.active_segment_base_offset
        self._snapshot_due_ms: int | None = None
        """When an append rolled the log: `tick` snapshots the producer state then."""
        # Kafka's replication-offset-checkpoint: a restarted replica resumes from it, so a
        # leader it becomes does not serve a lower high watermark.
        # Invariant: log_start_offset <= high_watermark <= log_end_offset.
        self._high_watermark = min(max(checkpointed or 0, log.log_start_offset), log.log_end_offset)
        self._files = ReplicaFiles(
            log=log,
            snapshots=snapshots,
            checkpoint=checkpoint,
            producer_state=self._producer_state,
            # NB: no file means the high watermark a reopen computes above: a new replica has
            # nothing to write until it moves (before, the first checkpoint pass after a
            # 10,000-partition create fsynced one file per new replica on the broker's event
            # loop, and its heartbeats came late enough to be fenced).
            checkpointed_high_watermark=(
                self._high_watermark if checkpointed is None else checkpointed
            ),
            logger=self._logger,
        )
        self._core: PartitionLeader | PartitionFollower | None = None
        self._generation = 0
        self._fetched_epoch = -1
        """The leader epoch in which the follower core last took records and a HW from its
        leader (from then on its HW is the leader's)."""
        self._offline: KafkaStorageError | None = None
        self._closed = False
        self._logger.info(
            "replica_opened",
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            high_watermark=self._high_watermark,
            producer_snapshot_offset=self.producer_state_load.snapshot_offset,
            producer_batches_replayed=self.producer_state_load.batches_replayed,
            producers=len(self._producer_state.entries),
        )

    # --- state --------------------------------------------------------------------------------

    @property
    def log(self) -> ReplicaLog:
        return self._log

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def core(self) -> PartitionLeader | PartitionFollower | None:
        """The current core, for reading its state (feed it only through the driver)."""
        return self._core

    @property
    def leader(self) -> PartitionLeader | None:
        return self._core if isinstance(self._core, PartitionLeader) else None

    @property
    def is_leader(self) -> bool:
        return isinstance(self._core, PartitionLeader)

    @property
    def is_follower(self) -> bool:
        return isinstance(self._core, PartitionFollower)

    @property
    def leader_epoch(self) -> int:
        return -1 if self._core is None else self._core.leader_epoch

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def offline(self) -> KafkaStorageError | None:
        """The disk error that took the replica offline, or None."""
        return self._offline

    @property
    def producer_snapshot_offsets(self) -> list[int]:
        return self._snapshots.offsets

    def in_sync_replicas(self) -> frozenset[int]:
        leader = self.leader
        return frozenset() if leader is None else leader.isr

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
        if self._offline is not None:
            return error
        self._offline = error
        self._logger.error("replica_offline", error=error.message, role=type(self._core).__name__)
        # NB: no resign/advance: the core may be mid-append or mid-Ready, and is dropped.
        self._drop_core()
        self._events.went_offline(error)
        return error

    def _drop_core(self) -> None:
        self._core = None
        self._generation += 1

    # --- metadata -----------------------------------------------------------------------------

    def apply_registration(
        self,
        registration: PartitionRegistration,
        brokers: Mapping[int, BrokerStatus],
        config: ReplicationConfig,
        now_ms: int,
    ) -> bool:
        """Become (or stay) leader or follower as ``registration`` says, under ``config`` (a
        leader that stays takes a changed ``min.insync.replicas`` at once). True if the
        replica now follows a leader (epoch) it did not follow before.

        Raises:
            KafkaStorageError: the replica is (or went) offline.
        """
        if self._offline is not None:
            raise KafkaStorageError(self._offline.message)
        with self.storage_guard():
            return self._apply_registration(registration, brokers, config, now_ms)

    def _apply_registration(
        self,
        registration: PartitionRegistration,
        brokers: Mapping[int, BrokerStatus],
        config: ReplicationConfig,
        now: int,
    ) -> bool:
        core = self._core
        if isinstance(core, PartitionLeader):
            core.update_brokers(brokers, now)
            core.update_config(config, now)
            if core.handle_partition_change(registration, now):
                self._drain(now)
                return False
            self._drain(now)  # the resigned leader's failed produces
            self._drop_core()
        elif isinstance(core, PartitionFollower):
            leader_epoch = core.leader_epoch
            if core.handle_partition_change(registration, now):
                self._drain(now)
                return core.leader_epoch != leader_epoch
            self._drain(now)
            self._drop_core()
        self._fetched_epoch = -1
        self._generation += 1
        if registration.leader == self.local_id:
            self._core = PartitionLeader(
                topic_partition=self.topic_partition,
                local_id=self.local_id,
                local_broker_epoch=self.broker_epoch,
                registration=registration,
                brokers=brokers,
                log=self._log,
                producer_state=self._producer_state,
                config=config,
                high_watermark=self._high_watermark,
                now_ms=now,
                log_config=self._log_config or LogConfig(),
                logger=self._core_logger,
            )
        else:
            self._core = PartitionFollower(
                topic_partition=self.topic_partition,
                local_id=self.local_id,
                local_broker_epoch=self.broker_epoch,
                leader_id=registration.leader,
                leader_epoch=registration.leader_epoch,
                log=self._log,
                producer_state=self._producer_state,
                config=config,
                high_watermark=self._high_watermark,
                now_ms=now,
                truncation_strategy=self._truncation_strategy,
                logger=self._core_logger,
            )
        self._drain(now)
        return not self.is_leader

    def update_brokers(self, brokers: Mapping[int, BrokerStatus], now_ms: int) -> None:
        leader = self.leader
        if leader is not None:
            leader.update_brokers(brokers, now_ms)
            self.drain(now_ms)

    def update_log_config(self, config: LogConfig) -> None:
        """The topic's log config changed (the shell already gave it to the log): new and
        current leaders validate produces against it."""
        self._log_config = config
        leader = self.leader
        if leader is not None:
            leader.update_log_config(config)

    # --- the Ready loop -----------------------------------------------------------------------

    def drain(self, now_ms: int) -> None:
        """Apply every pending Ready of the current core (the order is the Ready contract).
        A disk error takes the replica offline (the core is dropped with its Ready)."""
        try:
            self._drain(now_ms)
        except (KafkaStorageError, OSError) as e:
            self.go_offline(e)

    def _drain(self, now: int) -> None:
        core = self._core
        log = self._log
        events = self._events
        if isinstance(core, PartitionLeader):
            while core.has_ready():
                rd = core.ready()
                if rd.assign_epoch_start is not None:
                    log.assign_leader_epoch(*rd.assign_epoch_start)
                self._publish(rd.high_watermark, core.leader_epoch, is_leader=True)
                for completion in rd.produce_completions:
                    events.produce_completed(completion)
                if rd.alter_partition is not None:
                    events.send_alter_partition(self._generation, rd.alter_partition)
                core.advance(rd)
            events.ready_applied(core.leader_epoch)
        elif isinstance(core, PartitionFollower):
            while core.has_ready():
                frd = core.ready()
                # NB: snapshots above a truncation point go first (durably), so none can
                # describe a cut suffix that later appends replace.
                if frd.truncate_fully_and_start_at is not None:
                    self._snapshots.delete_all()
                    log.truncate_fully_and_start_at(frd.truncate_fully_and_start_at)
                if frd.truncate_to is not None:
                    self._snapshots.delete_above(frd.truncate_to)
                    log.truncate_to(frd.truncate_to)  # trims the epoch cache too
                    self._snapshots.delete_above(log.log_end_offset)
                if frd.append:
                    try:
                        base = log.append_as_follower(frd.append)
                    except KafkaStorageError:
                        raise
                    except KraftError as e:
                        self._logger.warning("follower_append_failed", error=e.message)
                        core.on_append_failed(frd, now)
                        continue
                    events.log_appended(core.leader_epoch, base, as_leader=False)
                if frd.rebuild_producer_state:
                    load = load_producer_state(
                        self._producer_state, log, self._snapshots, self.directory
                    )
                    self._logger.info(
                        "producer_state_reloaded",
                        snapshot_offset=load.snapshot_offset,
                        batches_replayed=load.batches_replayed,
                    )
                self._publish(
                    frd.high_watermark,
                    core.leader_epoch,
                    is_leader=False,
                    from_leader=self._fetched_epoch == core.leader_epoch,
                )
                core.advance(frd)
            events.ready_applied(core.leader_epoch)
        if self._snapshot_due_ms is None and log.active_segment_base_offset != (
            self._snapshot_rolled_base
        ):
            self._snapshot_due_ms = now  # an append rolled the log: snapshot on the next tick

    def _publish(
        self, high_watermark: int, leader_epoch: int, *, is_leader: bool, from_leader: bool = True
    ) -> None:
        old = self._high_watermark
        self._high_watermark = high_watermark
        self._events.high_watermark_published(
            old, high_watermark, leader_epoch, is_leader=is_leader, from_leader=from_leader
        )

    # --- leader -------------------------------------------------------------------------------

    def produce(
        self, request_id: int, acks: int, timeout_ms: int, records: bytes, now_ms: int
    ) -> None:
        """One partition of a Produce, validated and appended now; answered through
        `DriverEvents.produce_completed` (now, or once the ISR has it for acks=all)."""
        leader = self.leader
        if leader is None:
            self._events.produce_completed(
                ProduceCompletion(
                    request_id=request_id, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
                )
            )
            return
        produce = PartitionProduce(
            request_id=request_id, acks=acks, timeout_ms=timeout_ms, records=records
        )
        append = leader.handle_produce_request(produce, now_ms)
        if append is not None:
            try:
                base = self._log.append(append.records, leader_epoch=append.leader_epoch)
            except KraftError as e:
                # NB: the core is told first, so it is never left waiting for this append.
                leader.on_append_failed(request_id, e.code, now_ms)
                if isinstance(e, KafkaStorageError):
                    self.go_offline(e)  # the shell answers every waiting produce
            else:
                self._events.log_appended(append.leader_epoch, base, as_leader=True)
                leader.on_appended(request_id, base, now_ms)
        self.drain(now_ms)

    def handle_follower_fetch(self, fetch: FollowerFetch, now_ms: int) -> LeaderFetchAnswer:
        """A follower's fetch: the core's answer, whose ``read_offset`` the shell reads."""
        leader = self.leader
        if leader is None:
            return LeaderFetchAnswer(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        answer = leader.handle_follower_fetch(fetch, now_ms)
        self.drain(now_ms)
        return answer

    def handle_alter_partition_result(
        self, generation: int, alter_id: int, result: AlterPartitionPartitionResult, now_ms: int
    ) -> None:
        """The controller's answer to an AlterPartition sent under ``generation`` (dropped
        if that leader has been replaced meanwhile)."""
        leader = self.leader
        if leader is None or generation != self._generation:
            return
        leader.handle_alter_partition_response(alter_id, result, now_ms)
        self.drain(now_ms)

    def tick(self, now_ms: int) -> None:
        """Let time pass: the leader core's deadlines, and a producer snapshot after a roll.
        A disk error takes the replica offline."""
        if self._offline is not None or self._closed:
            return
        try:
            leader = self.leader
            if leader is not None:
                leader.tick(now_ms)
                self._drain(now_ms)
            self._snapshot_due_ms = None
            if self._log.active_segment_base_offset != self._snapshot_rolled_base:
                self._snapshot_rolled_base = self._log.active_segment_base_offset
                self.take_producer_snapshot()
        except (KafkaStorageError, OSError) as e:
            self.go_offline(e)

    def next_deadline_ms(self) -> int | None:
        """The earliest of the core's deadline and a producer snapshot an append's roll
        asked for (absolute; None: no timer, e.g. offline)."""
        if self._offline is not None or self._closed:
            return None
        core = self._core
        deadline = None if core is None else core.next_deadline_ms()
        due = self._snapshot_due_ms
        if due is not None and (deadline is None or due < deadline):
            return due
        return deadline

    # --- follower -----------------------------------------------------------------------------

    def handle_raft_message(self, message: RaftMessage, now_ms: int) -> None:
        """ISR replicas take part in no Raft group: a stray message is dropped."""
        self._logger.debug("raft_message_dropped", kind=type(message).__name__)

    def handle_raft_peer_lost(self, peer: int, now_ms: int) -> None:
        pass

    def build_fetch_request(self, now_ms: int) -> FollowerFetchRequest | None:
        core = self._core
        if not isinstance(core, PartitionFollower):
            return None
        return core.build_fetch_request(now_ms)

    def handle_fetch_response(
        self, generation: int, response: FollowerFetchResponse, now_ms: int
    ) -> None:
        """The leader's answer to a fetch built under ``generation`` (dropped if the replica
        has had another role since: the newer core has no fetch in flight)."""
        follower = self._core
        if generation != self._generation or not isinstance(follower, PartitionFollower):
            return
        in_flight = follower.fetch_in_flight
        taken = in_flight is not None and in_flight.fetch_id == response.fetch_id
        follower.handle_fetch_response(response, now_ms)
        if (
            in_flight is not None
            and taken
            and response.error_code is ErrorCode.NONE
            and response.diverging_epoch is None
        ):
            self._fetched_epoch = in_flight.current_leader_epoch
        self.drain(now_ms)
        if (
            response.error_code is ErrorCode.NONE
            and response.log_start_offset > self._log.log_start_offset
            and self._offline is None
        ):
            self._follow_leader_log_start_offset(response.log_start_offset)

    def _follow_leader_log_start_offset(self, leader_log_start_offset: int) -> None:
        """Kafka's follower ``maybeIncrementLogStartOffset(leaderLogStartOffset)``: the leader's
        retention moved its log start; move ours, but never past our high watermark.

        Invariant: log_start_offset <= high_watermark <= log_end_offset.
        """
        log = self._log
        target = min(leader_log_start_offset, self._high_watermark, log.log_end_offset)
        if target <= log.log_start_offset:
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

    # --- reads and durability -----------------------------------------------------------------

    def read(
        self,
        from_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one: bool = True,
    ) -> bytes:
        """Read the log (whole batches, see `ReplicaLog.read`).

        Raises:
            KafkaStorageError: a disk error (the replica went offline).
        """
        with self.storage_guard():
            return self._log.read(from_offset, max_bytes, max_offset=max_offset, min_one=min_one)

    def checkpoint_high_watermark(self) -> None:
        """Persist the high watermark if it moved (``replica.high.watermark.checkpoint.
        interval.ms``; durable on return).

        Raises:
            KafkaStorageError: the write failed (the replica went offline).
        """
        if self._offline is not None or self._closed:
            return
        with self.storage_guard():
            self._files.checkpoint_high_watermark(self._high_watermark)

    def take_producer_snapshot(self) -> int | None:
        """Write the producer state at its map end offset (Kafka takes one when a segment
        rolls). Durable on return; the snapshot's offset, or None if there was nothing new.

        Raises:
            OSError: the snapshot could not be written.
        """
        return self._files.take_producer_snapshot()

    def log_start_offset_moved(self) -> None:
        """The shell's retention moved the log start offset: the producer snapshots below it
        go (their base is gone: a replay from one would skip the deleted batches).

        Raises:
            KafkaStorageError: on a disk error (the replica went offline).
        """
        with self.storage_guard():
            self._snapshots.delete_below(self._log.log_start_offset)

    def stop(self, now_ms: int) -> None:
        """Leave the role for good (a leader resigns: its waiting produces fail)."""
        leader = self.leader
        if leader is not None:
            leader.resign(now_ms)
            self.drain(now_ms)
        self._drop_core()

    def close(self) -> None:
        """After `stop`, a clean shutdown: checkpoint the high watermark and snapshot the
        producer state, so the next open replays nothing (best effort)."""
        if self._offline is not None or self._closed:
            return
        self._files.close(self._high_watermark)
        self._closed = True


__all__ = ["IsrPartitionDriver"]
