"""The record accumulator: per-partition batches, and what is ready to send to which broker.

Theory of operation
-------------------
Kafka's ``RecordAccumulator``, as a pure core (time is the ``now_ms`` argument; the producer's
lock guards it; it does no I/O):

- `append` adds a record to the open (last) batch of its partition's queue, or seals that batch
  and opens a new one when the record does not fit in ``batch.size``. With
  ``abort_on_new_batch`` it returns None instead of opening one, so the sticky partitioner
  (KIP-480) can switch partitions first.
- A partition is *ready* when its first batch is sealed (full), or has waited ``linger.ms``,
  or is a retry whose backoff has passed, or a flush or close is under way.
- `drain` takes, for every broker that leads a ready partition and can take another request,
  the first batch of EVERY partition it leads (ready or not, as Kafka's ``drain``; none in
  retry backoff), up to ``max.request.size`` bytes: the shell sends those as ONE Produce
  request per broker (gRPC unary calls are precious: batch everything). Drained batches
  are sealed, stamped with the producer id/epoch and marked in flight. It also reports
  partitions without a known leader and when to look again.
- A retry waits out its backoff only while the partition's leader is the broker its last
  attempt went to: when metadata names a new leader it goes at once (KIP-951; Kafka's
  ``RecordAccumulator.shouldBackoff`` with ``hasLeaderChangedForTheOngoingRetry``).
- Ordering: at most ``max_in_flight`` batches per partition are in flight (5 for an idempotent
  producer, KIP-98). A retried batch goes back to the head of its queue in creation order
  (`reenqueue`) and is sent only when no other batch of its partition is in flight, so
  batches behind it wait: retries cannot overtake (Kafka's ``insertInSequenceOrder``).
- `expire` removes queued batches older than ``delivery.timeout.ms``; `abort_all` empties
  everything on a fatal error or a forced close. The shell completes their futures.

Sequence numbers come from `IdempotenceState` at batch creation and advance when the batch is
sealed (see `replication.clients.batch`); `resequence` renumbers queued batches from 0 after an
epoch bump.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import final

from kraft.types import TopicPartition
from replication.clients.batch import ProducerBatch, RecordFuture
from replication.clients.sequencing import IdempotenceState
from storage.records import Header


@dataclass(slots=True)
class Drained:
    """The result of one `RecordAccumulator.drain`."""

    batches_by_node: dict[int, list[ProducerBatch]] = field(default_factory=dict)
    next_ready_check_ms: int = 0
    """Milliseconds until some queued batch may become ready (linger or backoff)."""
    unknown_leader_topics: set[str] = field(default_factory=set)
    retrying_leaders: set[int] = field(default_factory=set)
    """Leaders of partitions whose first batch waits out a retry backoff: if one of them
    is unreachable, the shell keeps refreshing metadata to learn its successor."""


@final
class RecordAccumulator:
    """Per-partition queues of batches (see the module docstring)."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        delivery_timeout_ms: int = 120_000,
        max_in_flight_per_partition: int = 5,
        idempotence: IdempotenceState | None = None,
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.max_in_flight_per_partition = max_in_flight_per_partition
        self.idempotence = idempotence
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._in_flight: dict[TopicPartition, int] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._ordinal = 0
        self._drain_index = 0
        self._flushes = 0
        self.closing = False
        self.wakeup_needed = False
        """Set when an append sealed a full batch or opened a new one: the sender should
        wake up (to send it, or to time its linger). The shell clears it."""

    # -- appending ---------------------------------------------------------------------------

    def append(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[Header, ...] | None,
        now_ms: int,
        *,
        abort_on_new_batch: bool = False,
    ) -> RecordFuture | None:
        """Append one record; None only with ``abort_on_new_batch`` when a new batch would be
        needed (the caller then picks a partition and appends again without it)."""
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        return self.append_to(
            queue, tp, timestamp_ms, key, value, headers, now_ms, abort_on_new_batch
        )

    def topic_queues(self, tps: list[TopicPartition]) -> list[deque[ProducerBatch]]:
        """The queues of ``tps`` (a topic's partitions, in order), created if needed: the
        producer keeps this list so `append_to` needs no lookup per record. Queues are never
        replaced, only emptied, so the list stays valid."""
        queues = self._queues
        out = []
        for tp in tps:
            queue = queues.get(tp)
            if queue is None:
                queue = queues[tp] = deque()
            out.append(queue)
        return out

    def append_to(
        self,
        queue: deque[ProducerBatch],
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[Header, ...] | None,
        now_ms: int,
        abort_on_new_batch: bool = False,
        callback: Callable[[RecordFuture], object] | None = None,
    ) -> RecordFuture | None:
        """`append` to ``tp``'s queue (from `topic_queues`); ``callback``: as
        `ProducerBatch.try_append`'s."""
        if queue:
            last = queue[-1]
            if not last.sealed:
                future = last.try_append(timestamp_ms, key, value, headers, callback)
                if future is not None:
                    return future
                self._seal(last)
                self.wakeup_needed = True
        if abort_on_new_batch:
            return None
        batch = self._new_batch(tp, now_ms)
        self.wakeup_needed = True
        queue.append(batch)
        future = batch.try_append(timestamp_ms, key, value, headers, callback)
        assert future is not None, "an empty batch takes any record"
        return future

    def append_many_to(
        self,
        queue: deque[ProducerBatch],
        tp: TopicPartition,
        timestamp_ms: int,
        keys: list[bytes | None] | None,
        values: list[bytes | None],
        indexes: Sequence[int],
        start: int,
        now_ms: int,
        abort_on_new_batch: bool = False,
    ) -> tuple[int, ProducerBatch | None, int]:
        """`Producer.send_batch`'s append: the records ``indexes[start:]`` into the open batch
        of ``tp``'s queue, else into ONE new batch, while they fit (`append_to` for many).

        Returns:
            The position in ``indexes`` after the last record appended, the batch they went
            to (None if none went: ``abort_on_new_batch`` and no open batch took any), and the
            index in that batch of the first of them.
        """
        end = len(indexes)
        if queue:
            last = queue[-1]
            if not last.sealed:
                first = last.record_count
                nxt = last.try_append_many(timestamp_ms, keys, values, indexes, start)
                if nxt < end:  # it filled
                    self._seal(last)
                    self.wakeup_needed = True
                if nxt > start:
                    return nxt, last, first
        if abort_on_new_batch:
            return start, None, 0
        batch = self._new_batch(tp, now_ms)
        self.wakeup_needed = True
        queue.append(batch)
        nxt = batch.try_append_many(timestamp_ms, keys, values, indexes, start)
        assert nxt > start, "an empty batch takes any record"
        if nxt < end:
            self._seal(batch)
        return nxt, batch, 0

    def _new_batch(self, tp: TopicPartition, now_ms: int) -> ProducerBatch:
        self._ordinal += 1
        sequence = self.idempotence.next_sequence(tp) if self.idempotence is not None else -1
        batch = ProducerBatch(
            tp,
            created_ms=now_ms,
            batch_size=self.batch_size,
            base_sequence=sequence,
            ordinal=self._ordinal,
        )
        self._incomplete.add(batch)
        return batch

    def _seal(self, batch: ProducerBatch) -> None:
        if batch.sealed:
            return
        batch.sealed = True
        if self.idempotence is not None:
            self.idempotence.on_batch_sealed(batch.tp, batch.base_sequence, batch.record_count)

    # -- draining ----------------------------------------------------------------------------

    def drain(
        self,
        now_ms: int,
        leader_of: Callable[[TopicPartition], int | None],
        node_ready: Callable[[int], bool],
        max_request_size: int,
        sendable: Callable[[TopicPartition], bool] | None = None,
    ) -> Drained:
        """Take what to send now, grouped by leader: one request's worth per broker.

        Kafka's ``RecordAccumulator.ready`` then ``drain``: a broker is *ready* when it leads a
        partition whose first batch is ready (full, lingered, a retry past its backoff, a
        flush); from every ready broker that can take another request, take the first batch
        of EVERY partition it leads (one per partition, ready or not, but none in retry
        backoff and within the in-flight limits), up to ``max_request_size`` bytes. A request
        the broker costs anyway carries every partition's data: fewer requests per record.
        A transactional producer drains only the partitions ``sendable`` says were added to
        its transaction (Kafka's ``isSendToPartitionAllowed``).

        ``next_ready_check_ms`` is when to look again: at a lingering batch's or a backoff's
        end, or after ``linger.ms`` for a partition held back for another reason; not for a
        batch held back only by the in-flight limits, as Kafka's sender waits for the network
        then: the answer that frees a slot wakes the sender.
        """
        out = Drained(next_ready_check_ms=60_000)
        queues = self._queues
        tps = [tp for tp, q in queues.items() if q]
        if not tps:
            return out
        recheck_ms = max(self.linger_ms, 1)
        ready_nodes: set[int] = set()
        candidates: list[tuple[TopicPartition, int]] = []
        for tp in tps:
            if sendable is not None and not sendable(tp):
                out.next_ready_check_ms = min(out.next_ready_check_ms, recheck_ms)
                continue
            queue = queues[tp]
            first = queue[0]
            leader = leader_of(tp)
            if leader is None:
                out.unknown_leader_topics.add(tp.topic)
                out.next_ready_check_ms = min(out.next_ready_check_ms, recheck_ms)
                continue
            wait_ms = self._wait_ms(first, len(queue), now_ms, leader)
            if first.attempts > 0 and first.sent_to == leader:
                out.retrying_leaders.add(leader)
            if wait_ms > 0:
                out.next_ready_check_ms = min(out.next_ready_check_ms, wait_ms)
                if first.attempts > 0:
                    continue  # backing off: not even a free ride
            else:
                ready_nodes.add(leader)
            candidates.append((tp, leader))
        if not ready_nodes:
            return out
        sizes: dict[int, int] = {}
        blocked: set[int] = set()
        start = self._drain_index % len(candidates)
        self._drain_index += 1
        # rotate: no partition starves under size limits
        for tp, leader in candidates[start:] + candidates[:start]:
            if leader not in ready_nodes or leader in blocked:
                continue
            queue = queues[tp]
            first = queue[0]
            if not self._partition_can_send(tp, first):
                continue
            if leader not in sizes and not node_ready(leader):
                blocked.add(leader)
                continue
            size = sizes.get(leader, 0)
            if size and size + first.size_bytes > max_request_size:
                out.next_ready_check_ms = min(out.next_ready_check_ms, recheck_ms)
                continue  # the next request takes it
            queue.popleft()
            if queue:  # the next request may take the next one
                out.next_ready_check_ms = min(out.next_ready_check_ms, recheck_ms)
            self._seal(first)
            self._stamp(first)
            first.in_flight = True
            first.attempts += 1
            first.sent_to = leader
            self._in_flight[tp] = self._in_flight.get(tp, 0) + 1
            sizes[leader] = size + first.size_bytes
            out.batches_by_node.setdefault(leader, []).append(first)
        return out

    def _wait_ms(self, first: ProducerBatch, queued: int, now_ms: int, leader: int) -> int:
        """Milliseconds until the first batch of a queue may be sent (<= 0: ready)."""
        if first.attempts > 0:
            if first.sent_to != leader:
                return 0  # a new leader: no backoff (KIP-951)
            return first.retry_at_ms - now_ms
        if first.sealed or queued > 1 or self._flushes > 0 or self.closing:
            return 0
        return first.created_ms + self.linger_ms - now_ms

    def _partition_can_send(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        in_flight = self._in_flight.get(tp, 0)
        if first.attempts > 0:
            return in_flight == 0  # a retry goes alone: nothing may overtake it
        return in_flight < self.max_in_flight_per_partition

    def _stamp(self, batch: ProducerBatch) -> None:
        state = self.idempotence
        if state is not None and state.has_producer_id:
            batch.set_producer_state(state.producer_id, state.producer_epoch, batch.base_sequence)

    # -- outcomes ----------------------------------------------------------------------------

    def on_done(self, batch: ProducerBatch) -> None:
        """The batch completed (success or final failure); the caller completes its result."""
        if batch.in_flight:
            batch.in_flight = False
            self._in_flight[batch.tp] -= 1
        self._incomplete.discard(batch)

    def reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        """Put an in-flight batch back for a retry after the backoff (KIP-580: exponential),
        at its place in creation order."""
        assert batch.in_flight, "only an in-flight batch is retried"
        batch.in_flight = False
        self._in_flight[batch.tp] -= 1
        batch.retry_at_ms = now_ms + self.retry_delay_ms(batch)
        queue = self._queues.setdefault(batch.tp, deque())
        index = 0
        while index < len(queue) and queue[index].ordinal < batch.ordinal:
            index += 1
        queue.insert(index, batch)

    def retry_delay_ms(self, batch: ProducerBatch) -> int:
        """The backoff `reenqueue` would use for ``batch`` now."""
        backoff = self.retry_backoff_ms * (1 << min(max(batch.attempts - 1, 0), 16))
        return min(backoff, self.retry_backoff_max_ms)

    def has_time_left(self, batch: ProducerBatch, now_ms: int) -> bool:
        """Would a retry after the backoff still start before ``delivery.timeout.ms``?"""
        deadline = batch.created_ms + self.delivery_timeout_ms
        return now_ms + self.retry_delay_ms(batch) < deadline

    def expire(self, now_ms: int) -> list[ProducerBatch]:
        """Remove and return the queued batches past ``delivery.timeout.ms`` (Kafka's
        ``expiredBatches``); in-flight ones time out through their request instead."""
        expired: list[ProducerBatch] = []
        for tp, queue in self._queues.items():
            while queue and queue[0].created_ms + self.delivery_timeout_ms <= now_ms:
                batch = queue.popleft()
                self._seal(batch)
                self._incomplete.discard(batch)
                expired.append(batch)
            del tp
        return expired

    def abort_all(self) -> list[ProducerBatch]:
        """Remove and return every queued batch (a fatal error or a forced close)."""
        aborted = [b for q in self._queues.values() for b in q]
        for batch in aborted:
            self._seal(batch)
            self._incomplete.discard(batch)
        for queue in self._queues.values():
            queue.clear()  # NB: not the dict: the producer holds the queues (topic_queues)
        return aborted

    def resequence(self) -> None:
        """After an epoch bump (`IdempotenceState.set_producer_id_and_epoch`): number every
        queued batch's records again from 0 per partition, in queue order."""
        state = self.idempotence
        assert state is not None
        assert not any(self._in_flight.values()), "bump the epoch only with nothing in flight"
        for tp, queue in self._queues.items():
            sequence = 0
            for batch in queue:
                batch.set_producer_state(state.producer_id, state.producer_epoch, sequence)
                if batch.sealed:
                    sequence += batch.record_count
            state.set_next_sequence(tp, sequence)

    # -- flush and introspection ---------------------------------------------------------------

    def begin_flush(self) -> list[ProducerBatch]:
        """Make every batch ready now; returns the batches the flush must wait for."""
        self._flushes += 1
        return list(self._incomplete)

    def end_flush(self) -> None:
        self._flushes -= 1

    @property
    def in_flight_count(self) -> int:
        return sum(self._in_flight.values())

    def has_queued(self) -> bool:
        return any(self._queues.values())

    def queued_partitions(self) -> list[TopicPartition]:
        return [tp for tp, q in self._queues.items() if q]

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)

    def queued(self, tp: TopicPartition) -> Iterator[ProducerBatch]:
        return iter(self._queues.get(tp, ()))


__all__ = ["Drained", "RecordAccumulator"]
