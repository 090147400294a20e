"""`QuorumPartitionDriver`: one replica of a quorum-mode partition, a Raft group of its
replicas (``replication.mode=quorum``).

Theory of operation
-------------------
The partition's replicas are the voters of a Raft group running kraft's own Raft core
(`kraft.raft.RaftNode`: KIP-595 pull replication, KIP-996 pre-vote, check-quorum), and the
partition log *is* the Raft log (`ReplicaRaftStorage`): its entries are the producers' own
record batches with a base offset and the Raft epoch (the partition leader epoch) assigned,
plus the leader-change control batch each new leader opens its epoch with (consumers skip
control batches). The group elects its own leader: the registration's leader field is not
obeyed (the controller elects no quorum leaders); the winner reports itself with
`DriverEvents.quorum_leader_elected`, and the shell tells the controller.

Every input (a Raft message, a tick, a produce) is fed to the node, then every `Ready` is
applied in its documented order (`_drain`):

1. write the term and vote (`QuorumStateStore`, durable) and send the early messages;
   truncate (snapshots above the cut go first, then the producer state is rebuilt), append
   the entries (`append_as_follower`: offsets and epochs are already assigned), fold them into
   the producer state, install an empty "snapshot" (a reset to the leader's log start, see
   ``quorum_log.py``); then ``sync_data`` (one fdatasync of the log's data; its indexes and
   recovery point are flushed at each segment roll and at close) when the Ready asks for a
   sync;
2. send the messages (a follower's next fetch is its acknowledgement: it leaves only after
   the fsync, and the leader counts its own entries once `advance` marks them durable);
3. publish the high watermark (the Raft commit offset) and complete the acks=all produces it
   passed; ``advance``.

With ``quorum.write.caching=true`` step 1 skips the fsync (the segment log's own
``flush.messages``/``flush.ms`` policy, or the OS, writes back later): a majority's *receipt*
acknowledges, as Redpanda's write caching does, and a correlated power loss of a majority can
lose acknowledged writes.

Produce: the leader validates the batch and checks the producer's sequence exactly as the ISR
leader does (`validate_produced_batch`, `ProducerStateManager.check`: duplicates are answered
with the original offsets), proposes it (`RaftNode.propose_batch`) and drains at once, so the
producer state always includes every batch appended before the next produce. acks=0 and
acks=1 are answered once the leader's append is written; acks=all waits in a
`DelayedProducePurgatory` for the commit offset to pass the batch, and fails with
NOT_LEADER_OR_FOLLOWER if this replica stops leading that epoch first (the batch may still
commit: the producer retries and the sequence check dedupes).

Retention: the shell's retention (below the high watermark) or the leader's log start (from
each fetch response, as ISR followers follow it) moves the log start; the driver then tells
the node (`RaftNode.snapshot_taken` of the empty snapshot), which serves a follower below it
that snapshot: the follower restarts its log at the leader's log start.

*Disk errors* take the replica offline as in the ISR driver (`go_offline`): the Raft node is
dropped mid-whatever and never used again.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import final

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.controller.messages import AlterPartitionPartitionResult
from kraft.metadata.image import PartitionRegistration
from kraft.raft import HardState, RaftConfig, RaftNode
from kraft.raft.errors import NotLeaderError
from kraft.raft.messages import FetchResponse, RaftMessage
from kraft.raft.roles import Leader
from kraft.types import Epoch, NodeId, Offset, TopicPartition
from replication.core import (
    BrokerStatus,
    FollowerFetch,
    FollowerFetchRequest,
    FollowerFetchResponse,
    LeaderFetchAnswer,
    ProduceCompletion,
    ProducerStateManager,
    ReplicationConfig,
)
from replication.core.delayed_produce import DelayedProduce, DelayedProducePurgatory
from replication.core.messages import ACKS_ALL, VALID_ACKS
from replication.core.producer_state import SequenceDuplicate, SequenceRejected
from replication.driver.interface import (
    DriverEvents,
    HighWatermarkCheckpoint,
    ProducerSnapshots,
    QuorumStateStore,
    ReplicaLog,
)
from replication.driver.producer_state_load import ProducerStateLoad, load_producer_state
from replication.driver.quorum_log import QUORUM_LOG_CACHE_BYTES, ReplicaRaftStorage
from replication.driver.replica_files import ReplicaFiles
from storage.batch_validation import apply_topic_policy, validate_produced_batch
from storage.config import LogConfig
from storage.errors import ErrorCode, KafkaStorageError, KraftError
from storage.file_io import storage_error
from storage.records import read_header

_log: FilteringBoundLogger = structlog.get_logger("replication.driver.quorum")


@final
class QuorumPartitionDriver:
    """This broker's replica of ``topic_partition`` under quorum replication.

    Args:
        directory: where the replica lives (named in disk-error messages).
        log / snapshots / checkpoint: the replica's log, producer snapshots and
            high-watermark checkpoint (on disk in the broker, in memory in the simulator).
        quorum_state: where the Raft epoch and vote live (durable).
        local_id / broker_epoch: this broker and its registered epoch.
        events: where the driver's requests to its shell go.
        log_config: the topic's log settings (produces are validated against them).
        raft_config: the Raft timeouts (`RaftConfig` defaults if None).
        rng: the election jitter's only source (default: seeded by group and replica).
        write_caching: ``quorum.write.caching``: acknowledge before the fsync.
        logger: bound for this replica.

    Raises:
        KafkaStorageError: the replica's state cannot be read.
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
        quorum_state: QuorumStateStore,
        local_id: int,
        broker_epoch: int,
        events: DriverEvents,
        log_config: LogConfig | None = None,
        raft_config: RaftConfig | None = None,
        rng: random.Random | None = None,
        write_caching: bool = False,
        logger: FilteringBoundLogger | None = None,
    ) -> None:
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.directory = directory
        self.local_id = local_id
        self.broker_epoch = broker_epoch
        self.write_caching = write_caching
        """``quorum.write.caching``: skip the fsync before acknowledging (see the module)."""
        self._log = log
        self._snapshots = snapshots
        self._quorum_state = quorum_state
        self._events = events
        self._log_config = log_config
        self._raft_config = raft_config or RaftConfig(log_cache_bytes_max=QUORUM_LOG_CACHE_BYTES)
        self._rng = rng or random.Random(f"{topic_id}:{topic_partition.partition}:{local_id}")
        self._logger = (logger or _log).bind(topic_partition=str(topic_partition), node_id=local_id)
        self._storage = ReplicaRaftStorage(log)
        try:
            self._producer_state = ProducerStateManager(map_end_offset=log.log_start_offset)
            self.producer_state_load: ProducerStateLoad = load_producer_state(
                self._producer_state, log, snapshots, directory
            )
            checkpointed = checkpoint.read()
            state = quorum_state.read()
        except OSError as e:
            raise storage_error(e, "opening the replica", directory) from e
        self._hard_state = HardState(
            epoch=Epoch(state[0] if state else 0),
            voted_for=None if state is None or state[1] is None else NodeId(state[1]),
        )
        self._snapshot_rolled_base = log.active_segment_base_offset
        # NB: Raft does not persist its commit offset (KRaft neither): a restarted replica
        # learns it from the leader. What it checkpointed was committed, so it may serve it
        # meanwhile (never past its own log end).
        self._files = ReplicaFiles(
            log=log,
            snapshots=snapshots,
            checkpoint=checkpoint,
            producer_state=self._producer_state,
            checkpointed_high_watermark=checkpointed,
            logger=self._logger,
        )
        self._high_watermark_floor = min(
            max(checkpointed or 0, log.log_start_offset), log.log_end_offset
        )
        self._high_watermark = self._high_watermark_floor
        self._node: RaftNode | None = None
        self._voters: frozenset[int] = frozenset()
        self._purgatory = DelayedProducePurgatory()
        self._leading_epoch = -1
        """The epoch this replica leads and whose produces wait (-1: not leading)."""
        self._reported_epoch = -1
        self._generation = 0
        self._offline: KafkaStorageError | None = None
        self._closed = False
        self._logger.info(
            "quorum_replica_opened",
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            epoch=self._hard_state.epoch,
            voted_for=self._hard_state.voted_for,
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
        """The Raft commit offset (consumers read below it)."""
        return self._high_watermark

    @property
    def node(self) -> RaftNode | None:
        """The Raft node (read-only use: tests, the simulator's checker)."""
        return self._node

    @property
    def voters(self) -> frozenset[int]:
        return self._voters

    @property
    def is_leader(self) -> bool:
        return self._node is not None and self._node.is_leader

    @property
    def is_follower(self) -> bool:
        """Never: quorum replicas replicate over Raft messages, not broker fetches."""
        return False

    @property
    def leader_id(self) -> int | None:
        return None if self._node is None else self._node.leader_id

    @property
    def leader_epoch(self) -> int:
        return -1 if self._node is None else int(self._node.epoch)

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def offline(self) -> KafkaStorageError | None:
        return self._offline

    @property
    def producer_snapshot_offsets(self) -> list[int]:
        return self._snapshots.offsets

    def in_sync_replicas(self) -> frozenset[int]:
        """The leader's voters whose log reaches the commit offset (itself included)."""
        node = self._node
        if node is None or not isinstance(node.role, Leader):
            return frozenset()
        hw = node.high_watermark
        replicas = node.role.replicas
        return frozenset(
            v
            for v in self._voters
            if v == self.local_id or (v in replicas and replicas[NodeId(v)].end_offset >= hw)
        )

    # --- disk errors --------------------------------------------------------------------------

    @contextlib.contextmanager
    def storage_guard(self) -> Iterator[None]:
        try:
            yield
        except (KafkaStorageError, OSError) as e:
            raise self.go_offline(e) from e

    def go_offline(self, error: KafkaStorageError | OSError) -> KafkaStorageError:
        if isinstance(error, OSError):
            error = storage_error(error, "replica I/O", self.directory)
        if self._offline is not None:
            return error
        self._offline = error
        self._logger.error("replica_offline", error=error.message)
        # NB: no resign/advance: the node may be mid-Ready, and is dropped with it.
        self._node = None
        self._leading_epoch = -1
        self._purgatory = DelayedProducePurgatory()  # the shell answers what waits
        self._generation += 1
        self._events.went_offline(error)
        return error

    # --- metadata -----------------------------------------------------------------------------

    def apply_registration(
        self,
        registration: PartitionRegistration,
        brokers: Mapping[int, BrokerStatus],
        config: ReplicationConfig,
        now_ms: int,
    ) -> bool:
        """Start the Raft node with the registration's replicas as voters (its leader and
        ISR are not obeyed: the group elects its own). Always False: no broker fetch to drop.

        Raises:
            KafkaStorageError: the replica is (or went) offline.
        """
        if self._offline is not None:
            raise KafkaStorageError(self._offline.message)
        voters = frozenset(registration.replicas)
        if self._node is not None and voters == self._voters:
            return False
        with self.storage_guard():
            if self._node is not None:
                # NB: kraft does not reconfigure a partition's voters in place (no KIP-853
                # here): the node restarts from its durable state with the new set.
                self._logger.warning(
                    "quorum_voters_changed", old=sorted(self._voters), new=sorted(voters)
                )
                self._step_down(now_ms, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self._voters = voters
            self._node = RaftNode(
                NodeId(self.local_id),
                voters=frozenset(NodeId(v) for v in voters),
                config=self._raft_config,
                log=self._storage,
                persisted_state=self._hard_state,
                rng=self._rng,
                now_ms=now_ms,
                logger=self._logger,
            )
            self._generation += 1
            self._drain(now_ms)
        return False

    def update_brokers(self, brokers: Mapping[int, BrokerStatus], now_ms: int) -> None:
        """Raft's check-quorum and fetch timeouts notice dead peers; fencing changes nothing."""

    def update_log_config(self, config: LogConfig) -> None:
        self._log_config = config

    # --- the Ready loop -----------------------------------------------------------------------

    def drain(self, now_ms: int) -> None:
        """Apply every pending Ready (a disk error takes the replica offline)."""
        try:
            self._drain(now_ms)
        except (KafkaStorageError, OSError) as e:
            self.go_offline(e)

    def _drain(self, now: int) -> None:
        node = self._node
        if node is None:
            return
        log = self._log
        events = self._events
        while node.has_ready():
            rd = node.ready()
            if rd.hard_state is not None:
                hs = rd.hard_state
                if (hs.epoch, hs.voted_for) != (self._hard_state.epoch, self._hard_state.voted_for):
                    self._quorum_state.write(int(hs.epoch), hs.voted_for)
                self._hard_state = hs
            for message in rd.early_messages:
                events.send_raft_message(message)
            if rd.truncate_to is not None:
                # NB: snapshots above the cut go first (durably), so none can describe a cut
                # suffix that later appends replace.
                self._snapshots.delete_above(rd.truncate_to)
                log.truncate_to(rd.truncate_to)
                self._snapshots.delete_above(log.log_end_offset)
                load = load_producer_state(
                    self._producer_state, log, self._snapshots, self.directory
                )
                self._logger.info(
                    "quorum_log_truncated",
                    log_end_offset=log.log_end_offset,
                    producer_batches_replayed=load.batches_replayed,
                )
            if rd.entries:
                base = log.append_as_follower(b"".join(rd.entries))
                for batch in rd.entries:
                    header = read_header(batch)
                    self._producer_state.update(header, header.base_offset)
                events.log_appended(int(node.epoch), base, as_leader=node.is_leader)
            if rd.install_snapshot is not None:
                start = int(rd.install_snapshot.end_offset)
                self._snapshots.delete_all()
                log.truncate_fully_and_start_at(start)
                log.assign_leader_epoch(int(rd.install_snapshot.epoch), start)
                self._producer_state.truncate_fully_and_start_at(start)
                self._logger.info("quorum_log_reset_to_leader_log_start", log_start_offset=start)
            if rd.must_sync and not self.write_caching:
                # NB: the data only (one fdatasync), as the metadata log's synced appends: a
                # full `flush` (indexes, recovery-point checkpoint: ~5 fsyncs) on leader and
                # follower was most of a lone acks=all write's latency. The recovery point
                # follows at each segment roll (`tick`) and at close.
                log.sync_data()
            for message in rd.messages:
                events.send_raft_message(message)
            self._publish(node)
            node.advance(rd)
        self._publish(node)
        self._after_role_change(node, now)
        self._sync_log_start(node)
        events.ready_applied(int(node.epoch))

    def _publish(self, node: RaftNode) -> None:
        log = self._log
        new = min(max(int(node.high_watermark), self._high_watermark_floor), log.log_end_offset)
        new = max(new, log.log_start_offset)
        old = self._high_watermark
        if new != old:
            self._high_watermark = new
            self._events.high_watermark_published(
                old, new, int(node.epoch), is_leader=node.is_leader, from_leader=True
            )
        self._complete_reached(node)

    def _complete_reached(self, node: RaftNode) -> None:
        """Answer the acks=all produces the commit offset passed (this epoch's leader only)."""
        if not self._purgatory or not node.is_leader or self._leading_epoch != node.epoch:
            return
        for completion in self._purgatory.complete_reached(
            int(node.high_watermark),
            enough_replicas=True,
            log_start_offset=self._log.log_start_offset,
        ):
            self._events.produce_completed(completion)

    def _after_role_change(self, node: RaftNode, now: int) -> None:
        leading = int(node.epoch) if node.is_leader else -1
        if leading == self._leading_epoch:
            return
        if self._leading_epoch >= 0:
            self._fail_waiting(ErrorCode.NOT_LEADER_OR_FOLLOWER, "no longer the leader")
        self._leading_epoch = leading
        self._generation += 1
        if leading >= 0 and leading != self._reported_epoch:
            self._reported_epoch = leading
            self._logger.info("quorum_leader_elected", leader_epoch=leading)
            self._events.quorum_leader_elected(leading)

    def _fail_waiting(self, error: ErrorCode, message: str) -> None:
        for completion in self._purgatory.fail_all(
            error, message=message, log_start_offset=self._log.log_start_offset
        ):
            self._events.produce_completed(completion)

    def _sync_log_start(self, node: RaftNode) -> None:
        """Tell the node the log start moved (retention, or following the leader's): the
        empty snapshot there replaces the log below it (only below the commit offset)."""
        target = min(self._log.log_start_offset, int(node.high_watermark))
        if target > node.log_start_offset:
            node.snapshot_taken(node.snapshot_id_at(target))
            while node.has_ready():
                rd = node.ready()  # NB: delete_log_before only: the log already moved
                for message in (*rd.early_messages, *rd.messages):
                    self._events.send_raft_message(message)
                node.advance(rd)

    # --- leader -------------------------------------------------------------------------------

    def produce(
        self, request_id: int, acks: int, timeout_ms: int, records: bytes, now_ms: int
    ) -> None:
        """One partition of a Produce: validated, sequence-checked and proposed now; answered
        through `DriverEvents.produce_completed` (acks=all: once the commit offset passes)."""
        node = self._node
        if node is None or not node.is_leader or self._leading_epoch != node.epoch:
            self._answer(request_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader")
            return
        if acks not in VALID_ACKS:
            self._answer(request_id, ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks}")
            return
        try:
            config = self._log_config or LogConfig()
            header = validate_produced_batch(records, config, now_ms)
            records = apply_topic_policy(records, header, config)  # Kafka's LogValidator
        except KraftError as e:
            self._answer(request_id, e.code, e.message)
            return
        check = self._producer_state.check(header)
        if isinstance(check, SequenceRejected):
            self._answer(request_id, check.error_code, check.message)
            return
        if isinstance(check, SequenceDuplicate):
            self._logger.info(
                "duplicate_batch", request_id=request_id, base_offset=check.batch.first_offset
            )
            self._after_append(
                request_id,
                acks,
                timeout_ms,
                check.batch.first_offset,
                check.batch.last_offset,
                now_ms,
            )
            return
        try:
            base = node.propose_batch(records, now_ms)
        except NotLeaderError:
            self._answer(request_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader")
            return
        try:
            self._drain(now_ms)
        except (KafkaStorageError, OSError) as e:
            error = self.go_offline(e)
            self._answer(request_id, ErrorCode.KAFKA_STORAGE_ERROR, error.message)
            return
        if self._node is None or self._leading_epoch != node.epoch:
            self._answer(request_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, "no longer the leader")
            return
        self._after_append(
            request_id, acks, timeout_ms, int(base), int(base) + header.last_offset_delta, now_ms
        )

    def _after_append(
        self, request_id: int, acks: int, timeout_ms: int, base: int, last: int, now_ms: int
    ) -> None:
        if acks != ACKS_ALL:
            self._answer(request_id, ErrorCode.NONE, base_offset=base)
            return
        node = self._node
        assert node is not None
        self._purgatory.add(
            DelayedProduce(
                request_id=request_id,
                base_offset=Offset(base),
                required_offset=last + 1,
                deadline_ms=now_ms + timeout_ms,
            )
        )
        self._complete_reached(node)

    def _answer(
        self, request_id: int, error: ErrorCode, message: str = "", base_offset: int = -1
    ) -> None:
        self._events.produce_completed(
            ProduceCompletion(
                request_id=request_id,
                error_code=error,
                error_message=message,
                base_offset=Offset(base_offset),
                log_start_offset=Offset(self._log.log_start_offset),
            )
        )

    def handle_follower_fetch(self, fetch: FollowerFetch, now_ms: int) -> LeaderFetchAnswer:
        """Quorum replicas replicate over Raft messages, not broker fetches."""
        return LeaderFetchAnswer(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def handle_alter_partition_result(
        self, generation: int, alter_id: int, result: AlterPartitionPartitionResult, now_ms: int
    ) -> None:
        """A quorum leader sends no AlterPartition: nothing to do."""

    def tick(self, now_ms: int) -> None:
        """Let time pass: Raft's deadlines, the waiting produces' timeouts, and a producer
        snapshot after a segment roll."""
        if self._offline is not None or self._closed:
            return
        try:
            node = self._node
            if node is not None:
                node.tick(now_ms)
                self._drain(now_ms)
            for completion in self._purgatory.expire(
                now_ms, log_start_offset=self._log.log_start_offset
            ):
                self._events.produce_completed(completion)
            if self._log.active_segment_base_offset != self._snapshot_rolled_base:
                self._snapshot_rolled_base = self._log.active_segment_base_offset
                if not self.write_caching:
                    self._log.flush()  # the recovery point past the rolled segment (Kafka too)
                self.take_producer_snapshot()
        except (KafkaStorageError, OSError) as e:
            self.go_offline(e)

    def next_deadline_ms(self) -> int | None:
        node = self._node
        if node is None:
            return None
        deadline = node.next_deadline_ms()
        waiting = self._purgatory.next_deadline_ms()
        return deadline if waiting is None else min(deadline, waiting)

    def handle_raft_peer_lost(self, peer: int, now_ms: int) -> None:
        if self._node is not None and self._offline is None:
            self._node.peer_connection_lost(NodeId(peer), now_ms)
            self.drain(now_ms)

    def handle_raft_message(self, message: RaftMessage, now_ms: int) -> None:
        """A Raft message of this replica's group (dropped before the node starts)."""
        node = self._node
        if node is None or self._offline is not None:
            self._logger.debug("raft_message_dropped", kind=type(message).__name__)
            return
        node.step(message, now_ms)
        self.drain(now_ms)
        if (
            isinstance(message, FetchResponse)
            and message.error is ErrorCode.NONE
            and self._node is not None
            and not node.is_leader
            and node.leader_id == message.source
            and message.log_start_offset > self._log.log_start_offset
        ):
            self._follow_leader_log_start_offset(int(message.log_start_offset), now_ms)

    def _follow_leader_log_start_offset(self, leader_log_start_offset: int, now_ms: int) -> None:
        """Kafka's follower ``maybeIncrementLogStartOffset``: never past the commit offset."""
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
        self.drain(now_ms)

    # --- follower (not used: Raft replicates) -------------------------------------------------

    def build_fetch_request(self, now_ms: int) -> FollowerFetchRequest | None:
        return None

    def handle_fetch_response(
        self, generation: int, response: FollowerFetchResponse, now_ms: int
    ) -> None:
        """No broker fetch is ever sent: a stray answer is dropped."""

    # --- reads and durability -----------------------------------------------------------------

    def read(
        self,
        from_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one: bool = True,
    ) -> bytes:
        with self.storage_guard():
            return self._log.read(from_offset, max_bytes, max_offset=max_offset, min_one=min_one)

    def checkpoint_high_watermark(self) -> None:
        if self._offline is not None or self._closed:
            return
        with self.storage_guard():
            self._files.checkpoint_high_watermark(self._high_watermark)

    def take_producer_snapshot(self) -> int | None:
        return self._files.take_producer_snapshot()

    def log_start_offset_moved(self) -> None:
        """The shell's retention moved the log start: producer snapshots below it go, and the
        Raft node's log start follows (up to the commit offset; see `_sync_log_start`).

        Raises:
            KafkaStorageError: on a disk error (the replica went offline).
        """
        with self.storage_guard():
            self._snapshots.delete_below(self._log.log_start_offset)
        node = self._node
        if node is not None:
            self._sync_log_start(node)

    def stop(self, now_ms: int) -> None:
        """Leave the group for good: a leader resigns (KIP-595 EndQuorumEpoch, so a
        successor is elected at once) and its waiting produces fail."""
        self._step_down(now_ms, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._node = None
        self._generation += 1

    def _step_down(self, now_ms: int, error: ErrorCode) -> None:
        node = self._node
        if node is not None and node.is_leader:
            node.resign(now_ms)
            self.drain(now_ms)
        self._fail_waiting(error, "no longer the leader")
        self._leading_epoch = -1

    def close(self) -> None:
        if self._offline is not None or self._closed:
            return
        self._files.close(self._high_watermark)
        self._closed = True


__all__ = ["QuorumPartitionDriver"]
