"""What a Fetch returned for one partition, buffered until ``poll`` or ``poll_batch`` hands it
out (Kafka's ``CompletedFetch``).

At fetch time only the batch headers are read, and their CRCs checked with ``check.crcs``
(`scan_partition_batches`): that finds the whole, sound batches at or after the position and
the offset to fetch next. The records are decoded when they are handed out, in the form the
caller asked for: `ConsumerRecord` objects for ``poll`` (`decode_partition_records`), or one
Arrow RecordBatch for ``poll_batch`` (`storage.columnar.decode_arrow`, no Python object per
record). A partition read by both in turn re-decodes only what is left, from its position.

A batch that cannot be decoded stops its partition: the records before it are handed out
first, then its `CorruptRecordError` (with topic, partition and offset) is raised until a seek.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, NamedTuple

from kraft.types import TopicPartition
from storage.errors import CorruptRecordError, KraftError
from storage.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    Header,
    compute_crc,
    read_header,
    record_tuples,
)

if TYPE_CHECKING:
    import pyarrow as pa

_NO_END = 2**63 - 1


class ConsumerRecord(NamedTuple):
    """One record as ``poll`` returns it: immutable, compared and hashed by its fields.

    NB: a tuple (as kafka-python's ``ConsumerRecord``), not a frozen dataclass: the decoder
    builds each one with a single ``tuple.__new__`` (about 0.1 µs, against 0.5 µs for a
    frozen dataclass's ``__init__``), which was a quarter of ``poll()``'s CPU per record.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[Header, ...] = ()


def _corrupt(
    tp: TopicPartition, header: BatchHeader | None, next_offset: int, e: KraftError
) -> CorruptRecordError:
    bad_end = header.next_offset if header is not None else -1
    where = max(next_offset, header.base_offset) if header is not None else next_offset
    return CorruptRecordError(
        f"corrupt record batch in {tp} at offset {where}"
        + (f" (up to {bad_end})" if bad_end > where else "")
        + f": {e.message[:200]}; seek past it to continue",
        topic=tp.topic,
        partition=tp.partition,
        offset=where,
        next_offset=bad_end if bad_end > where else -1,
    )


def _walk(
    tp: TopicPartition,
    data: bytes,
    position: int,
    *,
    check_crcs: bool,
    decode: bool,
    start: int = 0,
    end: int | None = None,
) -> tuple[list[ConsumerRecord], int, int, int, CorruptRecordError | None]:
    """The batches of ``data[start:end]``: ``(records, first, after, next_offset, error)``
    where ``[first, after)`` are the bytes of the whole, sound batches that hold offsets at or
    after ``position`` (records decoded only with ``decode``)."""
    records: list[ConsumerRecord] = []
    next_offset = position
    topic, partition = tp.topic, tp.partition
    record, new = ConsumerRecord, tuple.__new__
    pos = start
    end = len(data) if end is None else end
    first = -1
    while end - pos >= BATCH_HEADER_SIZE:
        header: BatchHeader | None = None
        try:
            header = read_header(data, pos)
            size = header.size_bytes
            if end - pos < size:
                break
            if header.next_offset <= position:
                pos += size
                continue
            if check_crcs and compute_crc(data, pos, size) != header.crc:
                raise CorruptRecordError("CRC mismatch")
            decoded = () if header.is_control or not decode else record_tuples(data, pos)
        except KraftError as e:  # the header, CRC, codec or records of a batch
            error = _corrupt(tp, header, next_offset, e)
            return records, first if first >= 0 else pos, pos, next_offset, error
        if first < 0:
            first = pos
        next_offset = max(next_offset, header.next_offset)
        if not decoded:
            pass
        elif header.base_offset >= position:  # each record built in one C call, no __init__
            records += [new(record, (topic, partition, o, k, v, t, h)) for o, t, k, v, h in decoded]
        else:  # the batch the position is in
            records += [
                new(record, (topic, partition, o, k, v, t, h))
                for o, t, k, v, h in decoded
                if o >= position
            ]
        pos += size
    return records, first if first >= 0 else pos, pos, next_offset, None


def decode_partition_records(
    tp: TopicPartition, data: bytes, position: int, *, check_crcs: bool = True
) -> tuple[deque[ConsumerRecord], int, CorruptRecordError | None]:
    """The records at or after ``position`` in a Fetch's record bytes, the offset to fetch
    next (past control batches too), and the error of a corrupt batch if one stopped the
    decoding. A torn last batch is ignored: the next fetch gets it.

    As Kafka's ``CompletedFetch``: the records of the batches before a corrupt one are
    returned, and the error names the offset where consumption stopped (the batch's CRC is
    checked when ``check_crcs``, Kafka's ``check.crcs``).
    """
    records, _, _, next_offset, error = _walk(
        tp, data, position, check_crcs=check_crcs, decode=True
    )
    return deque(records), next_offset, error


def scan_partition_batches(
    tp: TopicPartition, data: bytes, position: int, *, check_crcs: bool = True
) -> FetchedPartition | None:
    """What a Fetch returned for ``tp`` at ``position``, headers and CRCs checked, records
    not decoded yet; None when it holds nothing at or after ``position``."""
    _, first, after, next_offset, error = _walk(
        tp, data, position, check_crcs=check_crcs, decode=False
    )
    if next_offset <= position and error is None:
        return None
    return FetchedPartition(tp, data, first, after, position, next_offset, error)


class FetchedPartition:
    """Decoded-on-demand records of one partition from one Fetch. ``next_offset`` is where
    the next fetch starts once everything here is out; ``error`` a corrupt batch met after
    the records (raised once they are out, until a seek)."""

    __slots__ = (
        "_arrow",
        "_arrow_headers",
        "_next",
        "_records",
        "_row",
        "after",
        "data",
        "error",
        "first",
        "next_offset",
        "position",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        data: bytes,
        first: int,
        after: int,
        position: int,
        next_offset: int,
        error: CorruptRecordError | None = None,
    ) -> None:
        self.tp = tp
        self.data = data
        self.first, self.after = first, after  # the sound batches' bytes
        self.position = position  # the offset of the next record to hand out
        self.next_offset = next_offset
        self.error = error
        self._records: list[ConsumerRecord] | None = None
        self._next = 0  # the first of _records not handed out yet
        self._arrow: pa.RecordBatch | None = None
        self._arrow_headers = False
        self._row = 0

    def take(self, position: int, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` of the records not handed out yet (from ``position``), which
        are then handed out."""
        records, first = self._decoded(position), self._next
        taken = records[first : first + max(0, max_records)]
        self._next = first + len(taken)
        return taken

    def records(self, position: int) -> list[ConsumerRecord]:
        """The records not handed out yet (from ``position``), as `ConsumerRecord`s."""
        return self._decoded(position)[self._next :]

    def _decoded(self, position: int) -> list[ConsumerRecord]:
        """Every record decoded for ``poll`` (decoded from ``position`` if not yet); those
        before ``_next`` are out."""
        if self._records is None:
            self._arrow = None
            self.position = position
            records, _, after, next_offset, error = _walk(
                self.tp,
                self.data,
                position,
                check_crcs=False,
                decode=True,
                start=self.first,
                end=self.after,
            )
            if error is not None:  # a batch sound by its CRC whose records are not
                self.after, self.next_offset, self.error = after, next_offset, error
            self._records, self._next = records, 0
        return self._records

    def arrow(self, position: int, max_rows: int, *, include_headers: bool) -> pa.RecordBatch:
        """Up to ``max_rows`` records not handed out yet (from ``position``) as one Arrow
        RecordBatch (a zero-copy slice of the decoded response)."""
        from storage.columnar import decode_arrow

        if self._arrow is None or self._arrow_headers != include_headers:
            self._records = None
            self.position = position
            data = self.data if self.after == len(self.data) else self.data[: self.after]
            tp = self.tp
            try:
                self._arrow = decode_arrow(
                    data, position, _NO_END, tp.topic, tp.partition, include_headers=include_headers
                )
            except KraftError:  # a batch sound by its CRC whose records are not: stop before it
                _, _, after, next_offset, error = _walk(
                    tp,
                    self.data,
                    position,
                    check_crcs=False,
                    decode=True,
                    start=self.first,
                    end=self.after,
                )
                self.after, self.next_offset, self.error = after, next_offset, error
                self._arrow = decode_arrow(
                    self.data[:after],
                    position,
                    _NO_END,
                    tp.topic,
                    tp.partition,
                    include_headers=include_headers,
                )
            self._arrow_headers = include_headers
            self._row = 0
        rows = self._arrow.slice(self._row, max_rows)
        self._row += rows.num_rows
        return rows

    def left(self) -> bool:
        """Whether records may be left to hand out (in undecoded batches, or decoded)."""
        if self._records is not None:
            return self._next < len(self._records)
        if self._arrow is not None:
            return self.rows_left() > 0
        return self.after > self.first

    def rows_left(self) -> int:
        """Records decoded for ``arrow`` and not handed out yet (0 before any ``arrow``)."""
        return 0 if self._arrow is None else self._arrow.num_rows - self._row


def broker_found_corrupt(tp: TopicPartition, position: int, message: str) -> FetchedPartition:
    """The partition stopped at ``position``: the broker answered CORRUPT_MESSAGE (it could not
    read its log there); Kafka's consumer raises this too ("Encountered corrupt message when
    fetching offset"), where other retriable errors are retried."""
    detail = (message or "corrupt batch")[:200]
    error = CorruptRecordError(
        f"the broker found a corrupt batch in {tp} at offset {position}: {detail}; "
        "seek past it to continue",
        topic=tp.topic,
        partition=tp.partition,
        offset=position,
    )
    return FetchedPartition(tp, b"", 0, 0, position, position, error)


__all__ = [
    "ConsumerRecord",
    "FetchedPartition",
    "broker_found_corrupt",
    "decode_partition_records",
    "scan_partition_batches",
]
