"""A producer batch under construction, and the futures its records hand back to `send`.

Theory of operation
-------------------
`ProducerBatch` is Kafka's ``ProducerBatch`` + ``MemoryRecordsBuilder``: each `try_append`
encodes one record straight into v2 record bytes (``storage.records`` layout) with table-looked
varints and appends them to the batch's one growing buffer (a ``bytearray``, as Kafka's
builder writes into one ``ByteBuffer``), so the per-record cost is one small ``bytes`` join
and one small future object, and the batch's size in bytes is exact, not estimated. `encode`
adds the 61-byte header and the CRC when the batch is sent; the records section is kept, so a
batch re-sequenced after a producer-epoch bump (KIP-360) is re-headered without re-encoding its
records.

The records of a batch share one `ProduceResult` (Kafka's ``ProduceRequestResult``): one event
per batch, not per record. `RecordFuture` is a slotted view of it (batch result + index +
timestamp) with the ``concurrent.futures.Future`` reading surface (``result``, ``exception``,
``done``, ``add_done_callback``). A callback given to ``send`` (Kafka's ``send(record,
callback)``) is kept in its record's future, queued as that future by `try_append`: no pair
object per record, as a callback added later needs.

Sequence numbers (KIP-98): a batch takes ``base_sequence`` when it is created; it can only be
created once the previous batch of its partition is sealed, so the sequence is the previous
batch's base plus its final record count (`sealed` is when that count becomes final).
"""

from __future__ import annotations

import struct
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, final

import google_crc32c
import structlog

from kraft.types import TopicPartition
from storage.compression import (
    Compression,
    compress,  # storage's codec helper, so both sides compress identically
)
from storage.errors import KraftError
from storage.records import (
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Header,
    encode_varint,
)

_VARINTS = [encode_varint(i) for i in range(1 << 14)]
_LIMIT = 1 << 14
_SMALL = 1 << 12  # key and value both below it: the record is below _LIMIT
_NULL = b"\x01"  # zigzag(-1): a null key or value
_NO_HEADERS = b"\x00"
_join = b"".join
_new_future = object.__new__
_ATTRIBUTES = b"\x00"
_PREFIX = struct.Struct(">qiibI")  # base offset, length, leader epoch, magic, crc
_COVERED = struct.Struct(">hiqqqhii")  # attributes .. record count: what the CRC covers
RECORD_BATCH_OVERHEAD = 61
_TRANSACTIONAL = 0x10  # the batch attributes' bit 4 (storage.records)
_COMPLETE_LOCK = threading.Lock()
_log = structlog.get_logger("kraft.producer")
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a sent record landed: what ``Producer.send(...).result()`` returns.

    ``offset`` is -1 when the broker did not say (acks=0, or a duplicate whose original
    offset the broker no longer knows, as Kafka's DUPLICATE_SEQUENCE_NUMBER).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int


@final
class ProduceResult:
    """The outcome of one batch, shared by its records (Kafka's ``ProduceRequestResult``).

    Callbacks are lock-free (one per record, from ``send`` or `RecordFuture.add_done_callback`):
    a callback is appended to a deque and whoever sees the result done pops and runs what is
    queued (``deque.append`` / ``popleft`` are atomic), so each runs exactly once, in the order
    added, on the completing thread, or on the adding thread if the batch had already completed.
    """

    __slots__ = (
        "_callbacks",
        "_event",
        "base_offset",
        "completed",
        "error",
        "log_append_time_ms",
        "tp",
    )

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.completed = False
        self._event = threading.Event()
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: KraftError | None = None
        # a future holding its ``send`` callback (`ProducerBatch.try_append`), or (fn,
        # argument): a callback added later and its future, or a `BatchFuture`'s countdown
        self._callbacks: deque[RecordFuture | tuple[Callable[[Any], object], Any]] = deque()

    def complete(
        self, base_offset: int, log_append_time_ms: int = -1, error: KraftError | None = None
    ) -> None:
        """Set the outcome once and run the records' callbacks (call it without locks held:
        callbacks are user code)."""
        with _COMPLETE_LOCK:  # NB: per batch, not per record: only makes the outcome set once
            if self.completed:
                return
            self.base_offset = base_offset
            self.log_append_time_ms = log_append_time_ms
            self.error = error
            self.completed = True
        self._event.set()
        self.run_callbacks()

    def run_callbacks(self) -> None:
        callbacks = self._callbacks
        popleft = callbacks.popleft
        while callbacks:
            try:
                item = popleft()
            except IndexError:  # another thread took the last one
                return
            try:
                if item.__class__ is RecordFuture:
                    item._callback(item)
                else:
                    fn, arg = item  # type: ignore[misc]
                    fn(arg)
            except Exception:  # user code: log it, as Kafka's producer does, and go on
                _log.exception("producer_callback_failed", tp=str(self.tp))

    def wait(self, timeout: float | None) -> bool:
        return self.completed or self._event.wait(timeout)

    def add_callback(self, fn: Callable[[_T], object], future: _T) -> None:
        """Run ``fn(future)`` once the batch completes (now, if it has)."""
        self._callbacks.append((fn, future))
        if self.completed:  # completed before or while we appended: run what is queued
            self.run_callbacks()


@final
class RecordFuture:
    """The future of one sent record; ``result()`` gives its `RecordMetadata`.

    Raises (from ``result``):
        KraftError: the typed error the batch failed with (e.g. `NotEnoughReplicasError`
            after retries ran out, `RecordTooLargeError`, `RequestTimedOutError` for
            ``delivery.timeout.ms``).
        TimeoutError: ``timeout`` passed before the batch completed.
    """

    __slots__ = ("_callback", "_index", "_result", "_timestamp_ms")

    def __init__(self, result: ProduceResult, index: int, timestamp_ms: int) -> None:
        self._result = result
        self._index = index
        self._timestamp_ms = timestamp_ms
        self._callback: Callable[[RecordFuture], object]
        """Set only on a future queued with its ``send`` callback (`ProducerBatch.try_append`)."""

    def done(self) -> bool:
        return self._result.completed

    def result(self, timeout: float | None = None) -> RecordMetadata:
        result = self._result
        if not result.completed and not result.wait(timeout):
            raise TimeoutError(f"record to {result.tp} not acknowledged within {timeout}s")
        if result.error is not None:
            raise result.error
        base = result.base_offset
        return RecordMetadata(
            result.tp.topic,
            result.tp.partition,
            base + self._index if base >= 0 else -1,
            result.log_append_time_ms if result.log_append_time_ms >= 0 else self._timestamp_ms,
        )

    def exception(self, timeout: float | None = None) -> KraftError | None:
        # NB: the flag first: a callback asks this of a completed batch, and Event.wait
        # takes a lock even then.
        result = self._result
        if not result.completed and not result.wait(timeout):
            raise TimeoutError(f"record to {result.tp} not acknowledged within {timeout}s")
        return result.error

    def add_done_callback(self, fn: Callable[[RecordFuture], object]) -> None:
        """Run ``fn(self)`` when the record completes (at once if it has); callbacks run on
        the producer's I/O threads and must not block."""
        self._result.add_callback(fn, self)


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[Header, ...] | None,
) -> bytes:
    """One v2 record (varint length prefix included), as ``storage.records`` decodes it."""
    ts = (
        _VARINTS[timestamp_delta]
        if 0 <= timestamp_delta < _LIMIT
        else encode_varint(timestamp_delta)
    )
    od = _VARINTS[offset_delta] if offset_delta < _LIMIT else encode_varint(offset_delta)
    if key is None:
        key_len, key = _NULL, b""
    else:
        n = len(key)
        key_len = _VARINTS[n] if n < _LIMIT else encode_varint(n)
    if value is None:
        value_len, value = _NULL, b""
    else:
        n = len(value)
        value_len = _VARINTS[n] if n < _LIMIT else encode_varint(n)
    tail = _NO_HEADERS if not headers else _encode_headers(headers)
    body = b"".join((_ATTRIBUTES, ts, od, key_len, key, value_len, value, tail))
    n = len(body)
    return (_VARINTS[n] if n < _LIMIT else encode_varint(n)) + body


def _encode_headers(headers: tuple[Header, ...]) -> bytes:
    parts = [encode_varint(len(headers))]
    for hkey, hvalue in headers:
        raw = hkey.encode()
        parts.append(encode_varint(len(raw)))
        parts.append(raw)
        if hvalue is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(hvalue)))
            parts.append(hvalue)
    return b"".join(parts)


@final
class ProducerBatch:
    """The records of one partition sent together in one v2 batch.

    Invariant: ``size_bytes`` is the exact size of the records section (uncompressed);
    a batch never exceeds ``batch_size`` unless its one record alone is larger (Kafka sends
    such a record in a batch of its own).
    """

    __slots__ = (
        "_encoded",
        "_records",
        "attempts",
        "base_sequence",
        "base_timestamp_ms",
        "batch_size",
        "created_ms",
        "in_flight",
        "max_timestamp_ms",
        "ordinal",
        "producer_epoch",
        "producer_id",
        "record_count",
        "result",
        "retry_at_ms",
        "sealed",
        "sent_to",
        "size_bytes",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        *,
        created_ms: int,
        batch_size: int,
        base_sequence: int = -1,
        ordinal: int = 0,
    ) -> None:
        self.tp = tp
        self.ordinal = ordinal
        """Creation order within the producer: a retried batch goes back in this order."""
        self.created_ms = created_ms
        self.batch_size = batch_size
        self.base_sequence = base_sequence
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        # NB: one buffer, not a list of records joined at `encode`: that join walked (and then
        # freed) ~600 small objects per batch long out of the cache, on the sender thread.
        self._records = bytearray()
        self._encoded: bytes | None = None
        self.size_bytes = 0
        self.record_count = 0
        self.base_timestamp_ms = -1
        self.max_timestamp_ms = -1
        self.result = ProduceResult(tp)
        self.sealed = False
        self.in_flight = False
        self.attempts = 0
        self.retry_at_ms = 0
        self.sent_to = -1
        """The broker the last attempt went to: a retry to a new leader skips the backoff."""

    def try_append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[Header, ...] | None,
        callback: Callable[[RecordFuture], object] | None = None,
    ) -> RecordFuture | None:
        """Append one record, or return None when it does not fit (the caller then seals
        this batch and opens another). ``callback`` runs with the record's future once the
        batch completes, in append order with the batch's other callbacks."""
        count = self.record_count
        if count == 0:
            self.base_timestamp_ms = timestamp_ms
        delta = timestamp_ms - self.base_timestamp_ms
        # NB: the common record, encoded inline (one join, no calls): this is send()'s hot
        # path. Same bytes as encode_record; key and value below _SMALL keep it below _LIMIT.
        if (
            headers is None
            and value is not None
            and count < _LIMIT
            and 0 <= delta < _LIMIT
            and (n := len(value)) < _SMALL
            and (key is None or len(key) < _SMALL)
        ):
            if key is None:
                body = _join(
                    (
                        _ATTRIBUTES,
                        _VARINTS[delta],
                        _VARINTS[count],
                        _NULL,
                        _VARINTS[n],
                        value,
                        _NO_HEADERS,
                    )
                )
            else:
                body = _join(
                    (
                        _ATTRIBUTES,
                        _VARINTS[delta],
                        _VARINTS[count],
                        _VARINTS[len(key)],
                        key,
                        _VARINTS[n],
                        value,
                        _NO_HEADERS,
                    )
                )
            record = _VARINTS[len(body)] + body
        else:
            record = encode_record(count, delta, key, value, headers)
        size = self.size_bytes + len(record)
        if size > self.batch_size and count > 0:
            return None
        self._records += record
        self.size_bytes = size
        self.record_count = count + 1
        if timestamp_ms > self.max_timestamp_ms:
            self.max_timestamp_ms = timestamp_ms
        # NB: RecordFuture(self.result, count, timestamp_ms) without its __init__ (3.11 calls
        # a Python __init__ through a slot wrapper: a third of the cost of the whole future)
        future = _new_future(RecordFuture)
        future._result = result = self.result
        future._index = count
        future._timestamp_ms = timestamp_ms
        if callback is not None:
            # NB: queued before the batch can complete: a batch still taking records is never
            # completed (it is sealed and leaves its queue first, under the producer's lock)
            future._callback = callback
            result._callbacks.append(future)
        return future

    def try_append_many(
        self,
        timestamp_ms: int,
        keys: list[bytes | None] | None,
        values: list[bytes | None],
        indexes: Sequence[int],
        start: int,
    ) -> int:
        """Append the records ``indexes[start:]`` (of ``values``, and ``keys`` if given) while
        they fit; returns the position in ``indexes`` after the last appended (``start`` if
        none fit). The bulk form of `try_append` (`Producer.send_batch`): same bytes, no
        future per record. The caller makes the future of the batch's new records."""
        count = self.record_count
        if count == 0:
            self.base_timestamp_ms = timestamp_ms
        delta = timestamp_ms - self.base_timestamp_ms
        ts = _VARINTS[delta] if 0 <= delta < _LIMIT else encode_varint(delta)
        size = self.size_bytes
        limit = self.batch_size
        records = self._records
        varints = _VARINTS
        join = b"".join
        i, stop = start, len(indexes)
        while i < stop:
            index = indexes[i]
            value = values[index]
            key = keys[index] if keys is not None else None
            if (
                count < _LIMIT
                and value is not None
                and (n := len(value)) < _SMALL
                and (key is None or len(key) < _SMALL)
            ):
                od = varints[count]
                value_len = varints[n]
                if key is None:
                    body_len = 3 + len(ts) + len(od) + len(value_len) + n
                    head = varints[body_len]
                    new_size = size + len(head) + body_len
                    if new_size > limit and count > 0:
                        break
                    records += join(
                        (head, _ATTRIBUTES, ts, od, _NULL, value_len, value, _NO_HEADERS)
                    )
                else:
                    k = len(key)
                    key_len = varints[k]
                    body_len = 2 + len(ts) + len(od) + len(key_len) + k + len(value_len) + n
                    head = varints[body_len]
                    new_size = size + len(head) + body_len
                    if new_size > limit and count > 0:
                        break
                    records += join(
                        (head, _ATTRIBUTES, ts, od, key_len, key, value_len, value, _NO_HEADERS)
                    )
            else:
                record = encode_record(count, delta, key, value, None)
                new_size = size + len(record)
                if new_size > limit and count > 0:
                    break
                records += record
            size = new_size
            count += 1
            i += 1
        if i > start:
            self.size_bytes = size
            self.record_count = count
            if timestamp_ms > self.max_timestamp_ms:
                self.max_timestamp_ms = timestamp_ms
        return i

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.record_count - 1) & 0x7FFFFFFF

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """(Re)stamp the idempotence fields; the next `encode` rebuilds header and CRC."""
        if (producer_id, producer_epoch, base_sequence) != (
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
        ):
            self.producer_id = producer_id
            self.producer_epoch = producer_epoch
            self.base_sequence = base_sequence
            self._encoded = None

    def encode(
        self, compression: Compression = Compression.NONE, transactional: bool = False
    ) -> bytes:
        """The whole v2 batch (base offset 0: the leader assigns offsets); ``transactional``
        sets the attributes' transactional bit (KIP-98: a transactional producer's batches)."""
        if self._encoded is not None:
            return self._encoded
        assert self.record_count > 0, "an empty batch is never sent"
        body = compress(compression, bytes(self._records))  # NB: the CRC reads only bytes
        head = _COVERED.pack(
            int(compression) | (_TRANSACTIONAL if transactional else 0),
            self.record_count - 1,
            self.base_timestamp_ms,
            self.max_timestamp_ms,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence if self.producer_id >= 0 else NO_SEQUENCE,
            self.record_count,
        )
        # the CRC covers head + body; one join copies the records once (not once per +)
        crc = google_crc32c.extend(google_crc32c.value(head), body)
        length = len(head) + len(body) + 9  # the bytes after the length field
        self._encoded = _join(
            (_PREFIX.pack(0, length, NO_PARTITION_LEADER_EPOCH, MAGIC, crc), head, body)
        )
        return self._encoded

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.tp}, records={self.record_count}, seq={self.base_sequence}, "
            f"attempts={self.attempts})"
        )


__all__ = [
    "RECORD_BATCH_OVERHEAD",
    "ProduceResult",
    "ProducerBatch",
    "RecordFuture",
    "RecordMetadata",
    "encode_record",
]
