"""The partition driver's interface: what a broker (or the simulator) asks of one replica.

A *partition driver* owns the glue between one partition's replication protocol and its log:
it becomes leader or follower when the partition's metadata changes, appends (a leader's
produce, a follower's fetched batches), truncates on divergence, publishes the high
watermark, follows the leader's log start offset, keeps the producer state and its
snapshots, and checkpoints the high watermark. It is pure of asyncio and gRPC: time comes in
as ``now_ms``, requests go out as `DriverEvents`, and its only I/O is through the log, the
producer-snapshot store and the checkpoint it was given (files in the broker, memory in the
simulator). So the broker, ``kraft sim cluster`` and the replication tests run the same
wiring.

`PartitionDriver` is the protocol a shell drives; `IsrPartitionDriver` (``isr.py``) is the
ISR implementation over `PartitionLeader` / `PartitionFollower`. A partition replicated by
Raft (``replication.mode=quorum``) will be a second implementation; `open_partition_driver`
(``select.py``) is the one place that picks one per topic.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from kraft.controller.messages import AlterPartitionPartitionResult
from kraft.metadata.image import PartitionRegistration
from kraft.raft.messages import RaftMessage
from kraft.types import TopicPartition
from replication.core import (
    AlterPartitionSend,
    BrokerStatus,
    FollowerFetch,
    FollowerFetchRequest,
    FollowerFetchResponse,
    LeaderFetchAnswer,
    PartitionLogView,
    ProduceCompletion,
    ProducerStateManager,
    ReplicationConfig,
)
from storage.config import LogConfig
from storage.errors import KafkaStorageError


class ReplicaLog(PartitionLogView, Protocol):
    """The partition log a driver writes: `storage.log.SegmentedLog` in the broker,
    `kraft.sim.cluster_log.SimPartitionLog` in the simulator and the tests.

    Every write may raise `KafkaStorageError` (a disk error: the driver goes offline)."""

    @property
    def active_segment_base_offset(self) -> int:
        """The base offset of the segment appends go to (a change means the log rolled)."""
        ...

    def append(self, records: bytes, /, *, leader_epoch: int) -> int:
        """Append one batch as leader (offsets and ``leader_epoch`` assigned); its base."""
        ...

    def append_as_follower(self, batches: bytes, /) -> int:
        """Append batches fetched from the leader as they are; the first one's base."""
        ...

    def assign_leader_epoch(self, epoch: int, start_offset: int, /) -> object:
        """Record that ``epoch`` starts at ``start_offset`` (a new leader's epoch, KIP-101)."""
        ...

    def truncate_to(self, offset: int, /) -> object:
        """Drop everything at or above ``offset`` (the batch holding it goes whole)."""
        ...

    def truncate_fully_and_start_at(self, offset: int, /) -> None:
        """Drop the whole log; the next append goes to ``offset``."""
        ...

    def advance_log_start_offset(self, offset: int, /) -> object:
        """Move the log start offset up to ``offset`` (never down)."""
        ...

    def flush(self) -> None:
        """fsync everything appended so far, indexes and recovery point included (durable on
        return; ISR mode leaves it to the log's flush policy)."""
        ...

    def sync_data(self) -> None:
        """fdatasync the data appended so far (durable on return; indexes and the recovery
        point wait for the next `flush`): quorum mode syncs each Ready this way, as the Raft
        contract asks."""
        ...

    def read(
        self,
        from_offset: int,
        max_bytes: int,
        /,
        *,
        max_offset: int | None = None,
        min_one: bool = True,
    ) -> bytes:
        """Whole batches from the one holding ``from_offset`` (at least one, unless not
        ``min_one`` and it is larger than ``max_bytes``), up to ``max_bytes``, none whose base
        offset is ``>= max_offset``."""
        ...


class ProducerSnapshots(Protocol):
    """Producer-state snapshots by offset (Kafka's ``<offset>.snapshot`` files):
    `replication.broker.replicas.producer_snapshots.ProducerSnapshotStore` on disk,
    `MemorySnapshotStore` in the simulator. Writes and deletes are durable on return and may
    raise ``OSError``."""

    @property
    def offsets(self) -> list[int]:
        """Every snapshot's offset, ascending."""
        ...

    def __contains__(self, offset: object) -> bool: ...

    def write(self, offset: int, data: bytes) -> None: ...

    def read(self, offset: int) -> bytes | None:
        """The snapshot's bytes; None if it has gone."""
        ...

    def delete(self, offsets: Iterable[int]) -> int: ...

    def delete_below(self, offset: int) -> int: ...

    def delete_above(self, offset: int) -> int: ...

    def delete_all(self) -> int: ...


class HighWatermarkCheckpoint(Protocol):
    """Kafka's ``replication-offset-checkpoint`` for one replica: a durable offset."""

    def read(self) -> int | None:
        """The checkpointed high watermark, or None if none was ever written.

        Raises:
            OSError: the checkpoint could not be read.
        """
        ...

    def write(self, offset: int) -> None:
        """Durable on return.

        Raises:
            OSError: the checkpoint could not be written.
        """
        ...


class QuorumStateStore(Protocol):
    """The Raft election state of one quorum-mode replica (KIP-595's ``quorum-state`` file):
    the epoch it is in and whom it voted for in it. `write` is durable on return, because a
    vote must never be given twice in one epoch across a crash."""

    def read(self) -> tuple[int, int | None] | None:
        """``(epoch, voted_for)`` as last written, or None if never written.

        Raises:
            OSError: the state could not be read.
        """
        ...

    def write(self, epoch: int, voted_for: int | None) -> None:
        """Durable on return.

        Raises:
            OSError: the state could not be written.
        """
        ...


def quorum_group(topic_id: str, partition: int) -> str:
    """The Raft group name of a quorum-mode partition on the multi-group transport (the
    metadata quorum is `kraft.transport.codec.METADATA_GROUP`)."""
    return f"{topic_id}:{partition}"


class DriverEvents(Protocol):
    """What a driver tells its shell, synchronously, while it handles an input. A shell
    that has no use for an event implements it as a no-op (see `NoDriverEvents`)."""

    def produce_completed(self, completion: ProduceCompletion) -> None:
        """Answer the produce with ``completion.request_id`` (the shell's id)."""
        ...

    def send_alter_partition(self, generation: int, send: AlterPartitionSend) -> None:
        """Send an AlterPartition to the controller; hand its answer back with
        `PartitionDriver.handle_alter_partition_result` and this ``generation``."""
        ...

    def high_watermark_published(
        self, old: int, new: int, leader_epoch: int, *, is_leader: bool, from_leader: bool
    ) -> None:
        """A Ready published the high watermark ``new`` (it may equal ``old``).
        ``from_leader``: a leader's own, or a follower's copied from its leader in this
        leader epoch (a new follower publishes its own first, which the leader may lower)."""
        ...

    def log_appended(self, leader_epoch: int, base_offset: int, *, as_leader: bool) -> None:
        """The log end offset moved: a batch appended at ``base_offset`` (a leader's
        produce), or a follower's fetched batches."""
        ...

    def ready_applied(self, leader_epoch: int) -> None:
        """Every pending Ready of the replica's current role (in ``leader_epoch``) is
        applied."""
        ...

    def went_offline(self, error: KafkaStorageError) -> None:
        """A disk error took the replica offline (once): the driver dropped its role; the
        shell answers what waits on it, abandons the log and reports the replica."""
        ...

    def send_raft_message(self, message: RaftMessage) -> None:
        """Quorum mode: send ``message`` to its destination on the replica's Raft group
        (`quorum_group`); best effort, never blocks (Raft's timeouts retry)."""
        ...

    def quorum_leader_elected(self, leader_epoch: int) -> None:
        """Quorum mode: this replica won the Raft election for ``leader_epoch``; the shell
        reports it to the controller, which records the leader and epoch in the metadata log
        (so Metadata and ``kraft topics describe`` show it)."""
        ...


class NoDriverEvents:
    """`DriverEvents` that ignore everything (subclass and override what you need)."""

    def produce_completed(self, completion: ProduceCompletion) -> None:
        pass

    def send_alter_partition(self, generation: int, send: AlterPartitionSend) -> None:
        pass

    def high_watermark_published(
        self, old: int, new: int, leader_epoch: int, *, is_leader: bool, from_leader: bool
    ) -> None:
        pass

    def log_appended(self, leader_epoch: int, base_offset: int, *, as_leader: bool) -> None:
        pass

    def ready_applied(self, leader_epoch: int) -> None:
        pass

    def went_offline(self, error: KafkaStorageError) -> None:
        pass

    def send_raft_message(self, message: RaftMessage) -> None:
        pass

    def quorum_leader_elected(self, leader_epoch: int) -> None:
        pass


class PartitionDriver(Protocol):
    """One partition's replica as a shell drives it (see the module docstring).

    Every method that does I/O takes the replica offline on a disk error (`go_offline`,
    reported as `DriverEvents.went_offline`); those documented to raise then raise
    `KafkaStorageError`, the others swallow it. Inputs after that are ignored.
    """

    topic_partition: TopicPartition
    topic_id: str
    directory: Path

    @property
    def log(self) -> ReplicaLog: ...

    @property
    def producer_state(self) -> ProducerStateManager: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def is_follower(self) -> bool:
        """Following (a leader, or none yet): the shell keeps a fetch loop running."""
        ...

    @property
    def leader_epoch(self) -> int:
        """The leader epoch of the current role (-1 with none)."""
        ...

    @property
    def generation(self) -> int:
        """Bumped whenever the replica takes a new role (or loses it): a fetch or an
        AlterPartition sent under an older generation is answered to nobody."""
        ...

    @property
    def offline(self) -> KafkaStorageError | None: ...

    def in_sync_replicas(self) -> frozenset[int]:
        """The leader's ISR (empty unless leading)."""
        ...

    # --- metadata --------------------------------------------------------------------------

    def apply_registration(
        self,
        registration: PartitionRegistration,
        brokers: Mapping[int, BrokerStatus],
        config: ReplicationConfig,
        now_ms: int,
    ) -> bool:
        """Become (or stay) leader or follower as ``registration`` says. Returns True if the
        replica now follows a leader it did not follow before (a new role or leader epoch):
        the shell drops a fetch in flight to the old leader.

        Raises:
            KafkaStorageError: the replica is (or went) offline.
        """
        ...

    def update_brokers(self, brokers: Mapping[int, BrokerStatus], now_ms: int) -> None: ...

    def update_log_config(self, config: LogConfig) -> None:
        """The topic's log config changed (the shell updated the log itself)."""
        ...

    # --- leader ----------------------------------------------------------------------------

    def produce(
        self, request_id: int, acks: int, timeout_ms: int, records: bytes, now_ms: int
    ) -> None:
        """One partition of a Produce; answered by `DriverEvents.produce_completed`, now or
        later (acks=all)."""
        ...

    def handle_follower_fetch(self, fetch: FollowerFetch, now_ms: int) -> LeaderFetchAnswer:
        """A follower's fetch: the answer, whose ``read_offset`` the shell then reads
        (NOT_LEADER_OR_FOLLOWER unless leading)."""
        ...

    def handle_alter_partition_result(
        self, generation: int, alter_id: int, result: AlterPartitionPartitionResult, now_ms: int
    ) -> None: ...

    def tick(self, now_ms: int) -> None:
        """Let time pass: the leader's deadlines; a producer snapshot after a roll."""
        ...

    def next_deadline_ms(self) -> int | None:
        """When `tick` or `build_fetch_request` has something to do next: absolute, in the
        ``now_ms`` clock of the inputs; at or before now means at once; None: no timer. The
        shell asks again after every input (an input may bring the deadline forward)."""
        ...

    def handle_raft_message(self, message: RaftMessage, now_ms: int) -> None:
        """Quorum mode: a Raft message of this replica's group (ISR replicas drop it)."""
        ...

    def handle_raft_peer_lost(self, peer: int, now_ms: int) -> None:
        """Quorum mode: ``peer``'s host closed our connection to it (`RaftNode.
        peer_connection_lost`); ISR replicas ignore it."""
        ...

    # --- follower --------------------------------------------------------------------------

    def build_fetch_request(self, now_ms: int) -> FollowerFetchRequest | None:
        """The follower's next fetch, or None (not following, one in flight, backing off)."""
        ...

    def handle_fetch_response(
        self, generation: int, response: FollowerFetchResponse, now_ms: int
    ) -> None:
        """The leader's answer to a fetch built under ``generation`` (dropped if stale)."""
        ...

    # --- reads and durability --------------------------------------------------------------

    def read(
        self,
        from_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one: bool = True,
    ) -> bytes:
        """Read the log.

        Raises:
            KafkaStorageError: a disk error (the replica went offline).
        """
        ...

    def checkpoint_high_watermark(self) -> None:
        """Persist the high watermark if it moved (durable on return).

        Raises:
            KafkaStorageError: the write failed (the replica went offline).
        """
        ...

    def take_producer_snapshot(self) -> int | None:
        """Snapshot the producer state at the log end; its offset, or None if nothing new.

        Raises:
            OSError: the snapshot could not be written.
        """
        ...

    def log_start_offset_moved(self) -> None:
        """The shell moved the log start offset (retention): drop what lies below it."""
        ...

    def stop(self, now_ms: int) -> None:
        """Leave the role (a leader resigns: its waiting produces fail), for good."""
        ...

    def close(self) -> None:
        """After `stop`, a clean shutdown: checkpoint the high watermark and snapshot the
        producer state (best effort; the shell closes the log)."""
        ...

    def go_offline(self, error: KafkaStorageError | OSError) -> KafkaStorageError:
        """Take the replica offline after a disk error (idempotent); the typed error."""
        ...

    def storage_guard(self) -> contextlib.AbstractContextManager[None]:
        """Run the block; a disk error in it takes the replica offline and is raised as
        `KafkaStorageError`."""
        ...


__all__ = [
    "DriverEvents",
    "HighWatermarkCheckpoint",
    "NoDriverEvents",
    "PartitionDriver",
    "ProducerSnapshots",
    "QuorumStateStore",
    "ReplicaLog",
    "quorum_group",
]
