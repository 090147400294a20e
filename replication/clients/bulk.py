"""`Producer.send_batch`: many records in one call, one future for all of them.

Theory of operation
-------------------
``send`` costs a call, a future and a callback per record; for a data pipeline that already
holds its records in a list or an Arrow array that is most of the client's CPU. `send_batch`
takes the whole sequence and appends it with `ProducerBatch.try_append_many` (one loop over
the records, no object per record), taking the producer's lock once per producer batch it
fills (so the sender thread is never kept from draining for long). It returns one
`BatchFuture` over the producer batches it filled.

Partitioning is `send`'s, applied per record: an explicit ``partition`` takes every record;
else each key's murmur2 partition (the records of one partition keep their order in the
call); else the KIP-480 sticky partition, switched whenever a producer batch fills, exactly
as a loop of ``send`` calls would.

Guarantees are those of ``send`` because the records travel in the same `ProducerBatch`es:
``acks``, idempotence (sequence numbers per producer batch), per-partition order, retries,
``delivery.timeout.ms``. As with a loop of ``send`` calls, the call is not atomic: each
producer batch succeeds or fails on its own; `BatchFuture.result` raises the first failure,
`BatchFuture.parts` tells which parts landed.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, final

from kraft.types import TopicPartition
from replication.clients.accumulator import RecordAccumulator
from replication.clients.batch import ProducerBatch, ProduceResult
from replication.clients.partitioner import StickyPartitioner
from replication.clients.routing import KeyPartitions, TopicState
from storage.errors import KraftError, RecordTooLargeError

Values = Sequence[bytes | None] | Any
"""A sequence of ``bytes`` / None, or a pyarrow binary or string array (chunked or not)."""


def as_value_list(values: Values, what: str) -> list[bytes | None]:
    """``values`` as a list of ``bytes`` or None: an Arrow array through ``to_pylist`` (string
    arrays cast to binary first, which copies nothing), a sequence as is.

    Raises:
        TypeError: an element that is neither ``bytes`` nor None (before anything is sent).
    """
    out: list[bytes | None]
    if hasattr(values, "to_pylist") and hasattr(values, "type"):
        import pyarrow as pa

        arrow: Any = values
        if pa.types.is_string(arrow.type):
            arrow = arrow.cast(pa.binary())
        elif pa.types.is_large_string(arrow.type):
            arrow = arrow.cast(pa.large_binary())
        out = arrow.to_pylist()
    else:
        out = values if isinstance(values, list) else list(values)
    kinds = set(map(type, out))
    if not kinds <= {bytes, type(None)}:
        bad = sorted(k.__name__ for k in kinds - {bytes, type(None)})
        raise TypeError(f"send_batch: {what} must be bytes or None, not {', '.join(bad)[:80]}")
    return out


@dataclass(frozen=True, slots=True)
class SentPart:
    """Records of one `send_batch` call that went in one producer batch."""

    partition: int
    base_offset: int
    """The offset of the part's first record, -1 when the broker did not say (acks=0)."""
    record_count: int


@final
class BatchFuture:
    """The future of one `send_batch` call: done when every producer batch it filled is.

    ``result()`` returns the `SentPart`s in the order they were filled (with a key, the
    records of one partition are in call order, and the parts follow the partitions).

    Raises (from ``result``):
        KraftError: the typed error of the first part that failed.
        TimeoutError: ``timeout`` passed first.
    """

    __slots__ = ("_callbacks", "_done", "_finished", "_lock", "_parts", "_remaining", "topic")

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self._parts: list[tuple[ProduceResult, int, int]] = []  # (result, first index, count)
        self._lock = threading.Lock()
        self._remaining = 0
        self._done = threading.Event()
        self._finished = False  # under _lock: set with the callbacks taken
        self._callbacks: list[Callable[[BatchFuture], object]] = []

    # -- built by send_batch -------------------------------------------------------------------

    def add_part(self, result: ProduceResult, first_index: int, count: int) -> None:
        """A part of the call: ``count`` records from index ``first_index`` of ``result``'s
        producer batch. Call `seal` after the last one."""
        self._parts.append((result, first_index, count))

    def seal(self) -> None:
        """No more parts: count the producer batches down as they complete."""
        results = {id(r): r for r, _, _ in self._parts}
        with self._lock:
            self._remaining = len(results) + 1  # +1: released below, after registering
        for result in results.values():
            result.add_callback(self._part_done, result)
        self._part_done(None)

    def _part_done(self, _: object) -> None:
        with self._lock:
            self._remaining -= 1
            if self._remaining:
                return
            self._finished = True
            callbacks, self._callbacks = self._callbacks, []
        self._done.set()
        for fn in callbacks:
            _run_callback(fn, self)

    # -- the reading surface ---------------------------------------------------------------------

    @property
    def record_count(self) -> int:
        return sum(count for _, _, count in self._parts)

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> list[SentPart]:
        error = self.exception(timeout)
        if error is not None:
            raise error
        return self.parts()

    def exception(self, timeout: float | None = None) -> KraftError | None:
        if not self._done.wait(timeout):
            raise TimeoutError(f"send_batch to {self.topic}: not acknowledged within {timeout}s")
        for result, _, _ in self._parts:
            if result.error is not None:
                return result.error
        return None

    def parts(self) -> list[SentPart]:
        """Each part as it stands (``base_offset`` -1 while pending or failed)."""
        return [
            SentPart(
                result.tp.partition,
                result.base_offset + first
                if result.base_offset >= 0 and result.error is None
                else -1,
                count,
            )
            for result, first, count in self._parts
        ]

    def add_done_callback(self, fn: Callable[[BatchFuture], object]) -> None:
        """Run ``fn(self)`` once every part completed (at once if they have); it runs on the
        producer's I/O threads and must not block."""
        with self._lock:
            if not self._finished:
                self._callbacks.append(fn)
                return
        _run_callback(fn, self)


def _run_callback(fn: Callable[[BatchFuture], object], future: BatchFuture) -> None:
    import structlog

    try:
        fn(future)
    except Exception:  # user code: log it, as the per-record callbacks are
        structlog.get_logger("kraft.producer").exception(
            "producer_callback_failed", topic=future.topic
        )


def failed_batch_future(topic: str, partition: int, error: KraftError) -> BatchFuture:
    """A `BatchFuture` that failed before anything was queued."""
    result = ProduceResult(TopicPartition(topic, partition))
    result.complete(-1, -1, error)
    future = BatchFuture(topic)
    future.add_part(result, 0, 0)
    future.seal()
    return future


def fill(
    future: BatchFuture,
    lock: threading.Lock,
    accumulator: RecordAccumulator,
    queues: list[deque[ProducerBatch]],
    tps: list[TopicPartition],
    timestamp_ms: int,
    now_ms: int,
    keys: list[bytes | None] | None,
    values: list[bytes | None],
    indexes: Sequence[int],
    partition: int,
    switch: Callable[[int], int] | None = None,
) -> int:
    """Append the records ``indexes`` into ``partition``'s batches, taking ``lock`` once per
    producer batch, and add each part to ``future``. With ``switch`` (the sticky partitioner,
    KIP-480), a new batch is due means a new partition: ``switch(old)`` picks it, under the
    lock, as ``send`` does. Returns the partition of the last record (the sticky one)."""
    start, end = 0, len(indexes)
    while start < end:
        with lock:
            nxt, batch, first = accumulator.append_many_to(
                queues[partition],
                tps[partition],
                timestamp_ms,
                keys,
                values,
                indexes,
                start,
                now_ms,
                switch is not None,
            )
            if batch is None:  # sticky: the open batch is full, so switch partitions
                assert switch is not None
                partition = switch(partition)
                nxt, batch, first = accumulator.append_many_to(
                    queues[partition],
                    tps[partition],
                    timestamp_ms,
                    keys,
                    values,
                    indexes,
                    start,
                    now_ms,
                )
            assert batch is not None
        future.add_part(batch.result, first, nxt - start)
        start = nxt
    return partition


def group_by_key(
    keys: list[bytes | None], partition_for_key: Callable[[bytes], int]
) -> tuple[dict[int, list[int]], list[int]]:
    """The indexes of keyed records per partition (in call order), and those of the records
    without a key (which take the sticky partition, as in ``send``)."""
    groups: dict[int, list[int]] = {}
    keyless: list[int] = []
    for i, key in enumerate(keys):
        if key is None:
            keyless.append(i)
        else:
            p = partition_for_key(key)
            group = groups.get(p)
            if group is None:
                groups[p] = [i]
            else:
                group.append(i)
    return groups, keyless


def first_oversized(
    values: list[bytes | None], keys: list[bytes | None] | None, limit: int
) -> RecordTooLargeError | None:
    """The error for the first record whose key and value exceed ``limit`` bytes, if any
    (``send``'s check; nothing of the call is queued then)."""
    largest = max(map(len, filter(None, values)), default=0)
    if keys is not None:
        largest += max(map(len, filter(None, keys)), default=0)
    if largest <= limit:  # NB: a bound (largest key plus largest value): the common answer
        return None
    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        size = (len(value) if value else 0) + (len(key) if key else 0)
        if size > limit:
            return RecordTooLargeError(
                f"record {i} is {size} bytes, more than max.request.size ({limit})"
            )
    return None


def fill_routed(
    lock: threading.Lock,
    accumulator: RecordAccumulator,
    partitioner: StickyPartitioner,
    key_partitions: KeyPartitions,
    state: TopicState,
    topic: str,
    now_ms: int,
    keys: list[bytes | None] | None,
    values: list[bytes | None],
    partition: int | None,
) -> BatchFuture:
    """Route every record as ``send`` would (``partition``; else the key's partition; else
    the sticky one, KIP-480), append them with `fill`, and return the sealed future."""
    future = BatchFuture(topic)
    args = (lock, accumulator, state.queues, state.tps, now_ms, now_ms, keys, values)
    if partition is not None:
        fill(future, *args, range(len(values)), partition)
        future.seal()
        return future
    keyless: Sequence[int] = range(len(values))
    if keys is not None:
        groups, keyless = group_by_key(
            keys, lambda key: key_partitions.partition(topic, key, state.count)
        )
        for p, indexes in groups.items():
            fill(future, *args, indexes, p)
    if keyless:

        def switch(old: int) -> int:  # under the lock, as in send
            state.sticky = partitioner.on_new_batch(
                topic, state.count, state.snapshot.available_partitions(topic), old
            )
            return state.sticky

        with lock:
            if state.sticky < 0:
                state.sticky = partitioner.partition(
                    topic, state.count, state.snapshot.available_partitions(topic)
                )
            sticky = state.sticky
        fill(future, *args, keyless, sticky, switch)
    future.seal()
    return future


__all__ = [
    "BatchFuture",
    "SentPart",
    "Values",
    "as_value_list",
    "failed_batch_future",
    "fill",
    "fill_routed",
    "first_oversized",
    "group_by_key",
]
