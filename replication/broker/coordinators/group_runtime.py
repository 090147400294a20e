"""`GroupRuntime`: the shell that runs the pure group coordinators (`replication.group`) on a
broker, one per ``__consumer_offsets`` partition this broker leads (Kafka's
``CoordinatorRuntime``, KIP-848).

Theory of operation
-------------------
*Shards.* A consumer group lives on partition ``abs(hashCode(group id)) % partitions`` of
``__consumer_offsets`` (`partition_for_group`); its coordinator is that partition's leader. Every
`POLL_INTERVAL_S` the runtime compares the offsets partitions this broker leads with its shards:
a partition it newly leads (or leads in a new generation) gets a shard that *loads*; a shard
whose partition it no longer leads is dropped. Requests for a group whose shard is loading get
COORDINATOR_LOAD_IN_PROGRESS, for a group of a partition it does not lead NOT_COORDINATOR:
clients then find the coordinator again.

*Loading.* A fresh `GroupCoordinator` replays the partition from its log start offset. The
load waits until the high watermark reaches the log end offset (a new leader's whole log
commits once its followers catch up), so the state it serves holds every committed record.

*Writes.* A request that changes state returns records and a response (`Result`). Per shard,
one write at a time (`_Shard.lock`): the records go to the partition as a leader produce with
``acks=all``; once committed they are replayed into the coordinator, and only then is the
response sent, so each request sees the state every earlier acknowledged one left. An append
that fails answers the request with an error (NOT_COORDINATOR if leadership moved,
COORDINATOR_NOT_AVAILABLE otherwise) and reloads the shard from the log: a record that was
appended but not acknowledged may still commit, and the reload holds exactly what the log says.

*Replies later.* A coordinator may answer a request after its call (a classic JoinGroup parks
until the group's join phase completes): `write_effects` takes effects whose replies are
addressed to handles, `asyncio.Future` objects the caller awaits *outside* the shard's lock. Their
records are committed before any reply is delivered, the replies of a tick the same way
(`Replying.take_replies`), and a shard that is dropped answers its parked ones
(`Replying.abandon`).

*Timers.* The coordinator's deadlines (session and rebalance timeouts, offsets retention) run
through `tick` when `next_deadline_ms` has passed, right after a load, and whenever the topics
change (a group picks up created or grown topics); its records are written like a request's.

*Bounded log: coordinator snapshots.* kraft has no log compaction, so after
``group.coordinator.snapshot.interval.records`` records the shard appends the coordinator's
`snapshot_records` (the whole state as latest-wins records) and, once they commit, moves the
partition's log start offset to the first of them: the records before it are superseded, and
the segments wholly below it are deleted (followers follow the leader's log start offset).
The topic is created with ``retention.ms=-1`` and ``retention.bytes=-1`` so that only this
moves its start.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import structlog

from kraft.types import OFFSETS_TOPIC, TopicPartition
from storage.control import ControlType
from storage.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    ErrorCode,
    KraftError,
    NotCoordinatorError,
    error_for,
)
from storage.log import wall_clock_ms
from storage.records import SimpleRecord, build_batch, iter_batches, record_tuples

if TYPE_CHECKING:
    from replication.broker.replicas.partition import PartitionReplica

Record = tuple[bytes, bytes | None]
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

POLL_INTERVAL_S = 0.05
"""How often shards are reconciled with leadership and the coordinators' timers run."""
APPEND_TIMEOUT_MS = 5_000
"""``offsets.commit.timeout.ms``: how long an ``acks=all`` append of the coordinator waits."""
SNAPSHOT_BATCH_BYTES = 512 * 1024
"""Snapshot records go out in batches of about this size (below ``max.message.bytes``)."""
LOAD_READ_BYTES = 1 << 20

_log = structlog.get_logger("replication.broker.coordinators.group_runtime")


class ResultLike(Protocol[R_co]):  # pragma: no cover - structural
    @property
    def records(self) -> Iterable[Record]: ...
    @property
    def response(self) -> R_co: ...


class Coordinator(Protocol):  # pragma: no cover - structural: `replication.group.GroupCoordinator`
    def replay(self, key: bytes, value: bytes | None) -> None: ...
    def tick(self, now_ms: int, topics: Any) -> list[Record]: ...
    def next_deadline_ms(self) -> int | None: ...
    def snapshot_records(self) -> list[Record]: ...


class ReplyLike(Protocol):  # pragma: no cover - structural: `replication.group.classic.Reply`
    @property
    def handle(self) -> object: ...
    @property
    def response(self) -> object: ...


class EffectsLike(Protocol):  # pragma: no cover - structural: `replication.group.classic.Effects`
    @property
    def records(self) -> Sequence[Record]: ...
    @property
    def replies(self) -> Sequence[ReplyLike]: ...


@runtime_checkable
class Replying(
    Protocol
):  # pragma: no cover - structural: `replication.broker.coordinators.group_shard`
    """A coordinator whose ticks answer requests (replies to `asyncio.Future` handles)."""

    def take_replies(self) -> Sequence[ReplyLike]: ...
    def abandon(self) -> Sequence[ReplyLike]: ...


@runtime_checkable
class MarkerAware(
    Protocol
):  # pragma: no cover - structural: `replication.broker.coordinators.group_shard`
    """A coordinator whose partition holds transaction markers it must apply on a load."""

    def replay_marker(self, producer_id: int, commit: bool) -> None: ...


def deliver(replies: Sequence[ReplyLike]) -> None:
    """Each reply's response to its handle (a Future; one whose waiter is gone is skipped)."""
    for reply in replies:
        handle = reply.handle
        if isinstance(handle, asyncio.Future) and not handle.done():
            handle.set_result(reply.response)


def fail(replies: Sequence[ReplyLike], error: KraftError) -> None:
    """Answer each reply's handle with ``error`` instead (its records were not committed)."""
    for reply in replies:
        handle = reply.handle
        if isinstance(handle, asyncio.Future) and not handle.done():
            handle.set_exception(error_for(error.code, error.message))


@dataclass
class _Shard:
    partition: int
    replica: PartitionReplica
    generation: int
    coordinator: Coordinator | None = None
    """None while loading."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    loader: asyncio.Task[None] | None = None
    records_since_snapshot: int = 0
    dropped: bool = False
    fresh: bool = True
    """Loaded and not ticked yet (a load starts every member's session timer afresh)."""


class GroupRuntime:
    """The coordinators of the offsets partitions this broker leads.

    Args:
        replicas: this broker's replicas (read on every poll).
        new_coordinator: a fresh, empty `GroupCoordinator`.
        topics: the topic view the coordinator's assignors take (from the metadata image).
        snapshot_interval_records: ``group.coordinator.snapshot.interval.records``.
        node_id: for logs.
        topic: the internal topic whose partitions it serves (the transaction coordinators
            run on the same runtime over ``__transaction_state``).
        clock_ms: wall-clock milliseconds (tests inject; default `wall_clock_ms`).
    """

    def __init__(
        self,
        *,
        replicas: Callable[[], Mapping[TopicPartition, PartitionReplica]],
        new_coordinator: Callable[[], Coordinator],
        topics: Callable[[], Any],
        snapshot_interval_records: int,
        node_id: int,
        clock_ms: Callable[[], int] | None = None,
        topic: str = OFFSETS_TOPIC,
    ) -> None:
        self._clock = clock_ms or _now_ms
        self.topic = topic
        self._replicas = replicas
        self._new_coordinator = new_coordinator
        self._topics = topics
        self._snapshot_interval = snapshot_interval_records
        self._shards: dict[int, _Shard] = {}
        self._logger = _log.bind(node_id=node_id, topic=topic)
        self._closed = False
        self._seen_topics: Any = None

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Reconcile shards with leadership and run the coordinators' timers, forever."""
        while not self._closed:
            await self.poll(self._clock())
            await asyncio.sleep(POLL_INTERVAL_S)

    async def poll(self, now_ms: int) -> None:
        """One round of `run`: reconcile shards with leadership, then tick each loaded
        coordinator whose deadline passed, that was just loaded, or whose topics changed
        (created or grown topics: reassign)."""
        self.reconcile()
        topics = self._topics() if self._shards else None
        topics_changed = topics != self._seen_topics
        self._seen_topics = topics
        for shard in list(self._shards.values()):
            coordinator = shard.coordinator
            if coordinator is None or shard.lock.locked():
                continue
            try:
                deadline = coordinator.next_deadline_ms()
                if topics_changed or shard.fresh or (deadline is not None and deadline <= now_ms):
                    shard.fresh = False
                    await self._tick(shard, now_ms)
            except Exception as e:  # a coordinator bug: not a reason to stop the broker
                self._logger.exception(
                    "group_coordinator_failed", partition=shard.partition, error=repr(e)
                )
                self._drop(shard, "coordinator_failed")

    def close(self) -> None:
        self._closed = True
        for shard in list(self._shards.values()):
            self._drop(shard, "broker_stopping")

    def reconcile(self) -> None:
        """Start loading the offsets partitions newly led, drop those no longer led."""
        replicas = self._replicas()
        led: dict[int, PartitionReplica] = {}
        for tp, replica in replicas.items():
            if tp.topic == self.topic and replica.driver.is_leader and replica.offline is None:
                led[tp.partition] = replica
        for partition, shard in list(self._shards.items()):
            current = led.get(partition)
            if current is not shard.replica or current.driver.generation != shard.generation:
                self._drop(shard, "leadership_lost")
        for partition, replica in led.items():
            if partition not in self._shards:
                self._start_load(partition, replica)

    def _drop(self, shard: _Shard, reason: str) -> None:
        shard.dropped = True
        if isinstance(shard.coordinator, Replying):
            deliver(shard.coordinator.abandon())
        if shard.loader is not None:
            shard.loader.cancel()
        if self._shards.get(shard.partition) is shard:
            del self._shards[shard.partition]
        self._logger.info("group_coordinator_unloaded", partition=shard.partition, reason=reason)

    def _start_load(self, partition: int, replica: PartitionReplica) -> None:
        shard = _Shard(partition=partition, replica=replica, generation=replica.driver.generation)
        self._shards[partition] = shard
        shard.loader = asyncio.create_task(
            self._load(shard), name=f"group-coordinator-load-{partition}"
        )

    async def _load(self, shard: _Shard) -> None:
        started = time.monotonic()
        replica = shard.replica
        coordinator = self._new_coordinator()
        offset = replica.log.log_start_offset
        records = 0
        try:
            while not shard.dropped:
                changed = replica.changed
                high_watermark = replica.high_watermark
                while offset < high_watermark:
                    data = replica.read(offset, LOAD_READ_BYTES, max_offset=high_watermark)
                    if not data:
                        break
                    for pos, header in iter_batches(data):
                        if header.is_control and isinstance(coordinator, MarkerAware):
                            coordinator.replay_marker(
                                header.producer_id, header.control_type == ControlType.COMMIT
                            )
                        elif not header.is_control:
                            batch = data[pos : pos + header.size_bytes]
                            for _, _, key, value, _ in record_tuples(batch):
                                if key is not None:
                                    coordinator.replay(key, value)
                                    records += 1
                        offset = header.next_offset
                if offset >= replica.log.log_end_offset:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), 1.0)
        except Exception as e:  # a disk error, or a coordinator bug on a record
            self._logger.warning(
                "group_coordinator_load_failed", partition=shard.partition, error=repr(e)
            )
            await asyncio.sleep(1.0)  # then the next poll loads it again
            if not shard.dropped:
                self._drop(shard, "load_failed")  # the next poll loads it again
            return
        if shard.dropped:
            return
        shard.coordinator = coordinator
        shard.records_since_snapshot = records
        self._logger.info(
            "group_coordinator_loaded",
            partition=shard.partition,
            records=records,
            end_offset=offset,
            elapsed_ms=round((time.monotonic() - started) * 1000),
        )

    # --- requests -----------------------------------------------------------------------------

    def shard(self, partition: int) -> _Shard:
        """The loaded shard of ``partition``.

        Raises:
            NotCoordinatorError: not led here. CoordinatorLoadInProgressError: still loading.
        """
        shard = self._shards.get(partition)
        if shard is None:
            raise NotCoordinatorError(f"this broker does not lead {self.topic}-{partition}")
        if shard.coordinator is None:
            raise CoordinatorLoadInProgressError(
                f"loading the coordinator of {self.topic}-{partition}"
            )
        return shard

    def loaded_coordinators(self) -> list[Coordinator]:
        return [s.coordinator for s in self._shards.values() if s.coordinator is not None]

    def loaded_partitions(self) -> dict[int, int]:
        """The partitions whose coordinator is loaded, with their leader epoch."""
        return {
            p: s.replica.driver.leader_epoch
            for p, s in self._shards.items()
            if s.coordinator is not None and not s.dropped
        }

    def loading_partitions(self) -> list[int]:
        """The offsets partitions led here whose groups are still being replayed."""
        return sorted(p for p, s in self._shards.items() if s.coordinator is None)

    async def read(self, partition: int, run: Callable[[Coordinator], R]) -> R:
        """``run`` on the shard's coordinator, after the writes queued before it (read-only)."""
        shard = self.shard(partition)
        async with shard.lock:
            coordinator = self._still_loaded(shard)
            return run(coordinator)

    async def write(self, partition: int, run: Callable[[Coordinator, int], ResultLike[R]]) -> R:
        """``run(coordinator, now_ms)``; its records appended with acks=all and replayed once
        committed; then its response.

        Raises:
            NotCoordinatorError, CoordinatorLoadInProgressError: as `shard`.
            NotCoordinatorError, CoordinatorNotAvailableError: the append failed.
        """
        shard = self.shard(partition)
        async with shard.lock:
            coordinator = self._still_loaded(shard)
            result = run(coordinator, self._clock())
            await self._append(shard, coordinator, list(result.records))
            return result.response

    async def write_effects(
        self, partition: int, run: Callable[[Coordinator, int], EffectsLike]
    ) -> None:
        """``run(coordinator, now_ms)``; its records appended with acks=all and replayed once
        committed; then its replies delivered (with the append's error if it failed). The
        caller awaits its own handle after this returns, so no lock is held while it waits.

        Raises:
            NotCoordinatorError, CoordinatorLoadInProgressError: as `shard` (nothing ran).
        """
        shard = self.shard(partition)
        async with shard.lock:
            coordinator = self._still_loaded(shard)
            effects = run(coordinator, self._clock())
            try:
                await self._append(shard, coordinator, list(effects.records))
            except KraftError as e:
                fail(effects.replies, e)
                return
            deliver(effects.replies)

    def _still_loaded(self, shard: _Shard) -> Coordinator:
        if shard.dropped or shard.coordinator is None:
            raise NotCoordinatorError(f"this broker no longer leads {self.topic}-{shard.partition}")
        return shard.coordinator

    async def _tick(self, shard: _Shard, now_ms: int) -> None:
        async with shard.lock:
            coordinator = shard.coordinator
            if shard.dropped or coordinator is None:
                return
            records = coordinator.tick(now_ms, self._topics())
            replies = coordinator.take_replies() if isinstance(coordinator, Replying) else ()
            try:
                await self._append(shard, coordinator, records)
            except (NotCoordinatorError, CoordinatorNotAvailableError) as e:
                # NB: a failed append reloads the shard (or it is gone); the timer runs again.
                fail(replies, e)
                return
            deliver(replies)

    async def _append(self, shard: _Shard, coordinator: Coordinator, records: list[Record]) -> None:
        if not records:
            return
        await self._append_batches(shard, [records])
        for key, value in records:
            coordinator.replay(key, value)
        shard.records_since_snapshot += len(records)
        if shard.records_since_snapshot >= self._snapshot_interval:
            await self._snapshot(shard, coordinator)

    async def _append_batches(self, shard: _Shard, batches: list[list[Record]]) -> int:
        """Append each list as one batch with acks=all; the base offset of the first."""
        first = -1
        for records in batches:
            batch = build_batch(
                [SimpleRecord(key=k, value=v) for k, v in records],
                timestamp_ms=self._clock(),
            )
            done = await shard.replica.produce(-1, APPEND_TIMEOUT_MS, batch)
            if done.error_code is not ErrorCode.NONE:
                self._append_failed(shard, done.error_code, done.error_message)
            if first < 0:
                first = done.base_offset
        return first

    def _append_failed(self, shard: _Shard, code: ErrorCode, message: str) -> None:
        self._logger.warning(
            "group_coordinator_append_failed",
            partition=shard.partition,
            error=code.name,
            message=message[:200],
        )
        if not shard.dropped:
            self._drop(shard, "append_failed")  # reloads from the log on the next poll
        error = f"writing to {self.topic}-{shard.partition} failed: {code.name}"
        if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
            raise NotCoordinatorError(error)
        raise CoordinatorNotAvailableError(error)

    async def _snapshot(self, shard: _Shard, coordinator: Coordinator) -> None:
        """Write the coordinator's state and move the log start offset to it."""
        records = coordinator.snapshot_records()
        batches: list[list[Record]] = [[]]
        size = 0
        for key, value in records:
            size += len(key) + len(value or b"") + 16
            if size > SNAPSHOT_BATCH_BYTES and batches[-1]:
                batches.append([])
                size = 0
            batches[-1].append((key, value))
        if not records:
            batches = []
        replica = shard.replica
        if batches:
            start = await self._append_batches(shard, batches)
        else:
            start = replica.log.log_end_offset  # empty state: nothing before is needed
            if start > replica.high_watermark:
                return
        shard.records_since_snapshot = 0
        try:
            with replica.driver.storage_guard():
                moved = replica.log.advance_log_start_offset(start)
            if moved:
                replica.driver.log_start_offset_moved()
        except KraftError as e:
            self._logger.warning(
                "group_coordinator_snapshot_failed", partition=shard.partition, error=repr(e)
            )
            return
        self._logger.info(
            "group_coordinator_snapshot_written",
            partition=shard.partition,
            records=len(records),
            log_start_offset=replica.log.log_start_offset,
        )


def _now_ms() -> int:
    # NB: wall clock, not monotonic: the coordinator persists timestamps (commit times for
    # offsets.retention.minutes) that the next leader, another process, reads.
    return wall_clock_ms()


__all__ = ["GroupRuntime", "Record"]
