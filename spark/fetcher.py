"""The executor's half: fetch one `OffsetRange` from its partition's leader, and nothing more.

Theory of operation
-------------------
A task owns one range ``[from_offset, until_offset)`` of one partition. `RangeFetcher.chunks`
looks the partition up (one Metadata call) and sends Fetches for it to the leader (or, with
``client_rack``, the closest in-sync replica: see below), one at a time, each returning up to
``fetch_max_bytes`` of whole v2 batches. While the task decodes one
response the next one is already on its way (one Fetch in flight), so the broker's read and
the network overlap the decoding. The last response usually holds records past
``until_offset``: the decoders drop them, so a range stops exactly at its end.

Failures, per response:

- the leader unreachable, or a stale-leader error (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
  ...): fetch again from the new leader (KIP-951's ``current_leader`` hint, else fresh
  metadata), falling back to the other in-sync replicas in turn while the metadata still names
  the old one; all under ``timeout_s`` without progress.
- KIP-392, with ``client_rack`` (the executor's rack): the fetcher reads from an in-sync
  replica in that rack when the metadata shows one (the leader if it is there), else from the
  leader; it sends the rack in every Fetch and follows a leader's ``preferred_read_replica``.
  A follower serves up to its own high watermark, so a range may wait a moment there for the
  follower to catch up; any error from a follower sends the next Fetch to the leader.
- data loss: the range starts below the log start offset (retention deleted it), a gap in the
  offsets, or the range runs past the end of the log (an unclean election truncated it).
  ``fail_on_data_loss`` raises `OffsetOutOfRangeError` naming the lost offsets; otherwise the
  fetcher logs ``data_loss_skipped`` and goes on from the first offset that exists, as Spark's
  Kafka source does with ``failOnDataLoss=false``.

Not thread-safe: one fetcher per task.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Self

import pyarrow as pa
import structlog

from kraft.logs import ensure_configured
from kraft.security.tls import TlsConfig
from kraft.types import TopicPartition
from replication.clients.metadata import ClusterSnapshot, PartitionInfo, snapshot_from_response
from replication.clients.network import BrokerNetwork
from replication.clients.read_committed import drop_aborted
from replication.clients.sequencing import METADATA_ERRORS
from replication.messages import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    BrokerFetchRequest,
    BrokerFetchResponse,
    FetchPartition,
    FetchPartitionData,
    FetchTopic,
)
from spark.offsets import OffsetRange
from spark.options import DEFAULT_FETCH_MAX_BYTES
from storage.columnar import decode_arrow
from storage.errors import (
    ErrorCode,
    KraftError,
    NetworkError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    error_for,
)
from storage.file_region import records_bytes
from storage.records import Header, iter_batches, iter_records

log = structlog.get_logger("kraft.spark")

_STALE = METADATA_ERRORS | {ErrorCode.OFFSET_NOT_AVAILABLE}
_BACKOFF_S = 0.1


class TopicRecord(NamedTuple):
    """One record as the RDD yields it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[Header, ...]


@dataclass(frozen=True, slots=True)
class Chunk:
    """Whole v2 batches from one Fetch; the wanted records are ``[position, until)``."""

    records: bytes
    position: int
    until: int


class _InFlight:
    """One Fetch on its way: ``wait`` gives its partition's answer or the call's error."""

    __slots__ = ("_done", "broker", "error", "offset", "response")

    def __init__(self, offset: int, broker: int) -> None:
        self.offset = offset
        self.broker = broker
        self.response: BrokerFetchResponse | None = None
        self.error: KraftError | None = None
        self._done = threading.Event()

    def complete(self, response: BrokerFetchResponse | None, error: KraftError | None) -> None:
        self.response, self.error = response, error
        self._done.set()

    def wait(self, timeout_s: float) -> tuple[BrokerFetchResponse | None, KraftError | None]:
        if not self._done.wait(timeout_s):
            return None, RequestTimedOutError(f"no Fetch answer within {timeout_s}s")
        return self.response, self.error


class RangeFetcher:
    """Reads offset ranges from the cluster, for executors.

    Args:
        bootstrap: ``host:port,...`` of (some of) the brokers.
        fail_on_data_loss: raise on lost offsets (else skip them with a warning).
        fetch_max_bytes: bytes one Fetch may return (at least one batch comes back anyway).
        timeout_s: how long the fetcher may go without progress before it gives up.
        max_wait_ms: the broker's long poll when the range is not all committed yet.
        network: a `BrokerNetwork` to use (tests); closed with the fetcher.
        tls: the client's TLS settings (`kraft.security.tls`; None: plaintext).
        client_rack: the reader's rack (``client.rack``, KIP-392): read from an in-sync
            replica there; empty: from the leader.
        read_committed: Fetch with ``isolation.level=read_committed`` (KIP-98): up to the
            last stable offset, and the aborted transactions' batches dropped (a range
            planned under read_committed ends at or below the last stable offset).
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        fail_on_data_loss: bool = True,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        timeout_s: float = 60.0,
        max_wait_ms: int = 500,
        network: BrokerNetwork | None = None,
        tls: TlsConfig | None = None,
        client_rack: str = "",
        read_committed: bool = False,
    ) -> None:
        ensure_configured()  # no output unless the application configures logging
        self.fail_on_data_loss = fail_on_data_loss
        self._isolation = READ_COMMITTED if read_committed else READ_UNCOMMITTED
        self.fetch_max_bytes = fetch_max_bytes
        self.timeout_s = timeout_s
        self.max_wait_ms = max_wait_ms
        self._network = network or BrokerNetwork(bootstrap, request_timeout_s=30.0, tls=tls)
        self._snapshot = ClusterSnapshot()
        self._attempt = 0
        self.client_rack = client_rack
        self._use_closest = True
        """KIP-392: read from the closest replica (until one fails: then from the leader)."""
        self._preferred: int | None = None
        """The replica the leader named (``preferred_read_replica``)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._network.close()

    # -- what tasks call ----------------------------------------------------------------------

    def arrow_batches(
        self, r: OffsetRange, *, include_headers: bool, columns: Sequence[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The records of ``r`` as RecordBatches in the Kafka source schema (one per Fetch),
        or of only ``columns`` of it (see `storage.columnar.decode_arrow`).

        Raises:
            OffsetOutOfRangeError: data loss and ``fail_on_data_loss``.
            KraftError: the partition stayed unreadable for ``timeout_s``.
        """
        for chunk in self.chunks(r):
            batch = decode_arrow(
                chunk.records,
                chunk.position,
                chunk.until,
                r.topic,
                r.partition,
                include_headers=include_headers,
                columns=columns,
            )
            if batch.num_rows:
                yield batch

    def records(self, r: OffsetRange) -> Iterator[TopicRecord]:
        """The records of ``r`` in offset order (what `spark.topic_rdd` yields).

        Raises: as `arrow_batches`.
        """
        for chunk in self.chunks(r):
            view = memoryview(chunk.records)
            for pos, header in iter_batches(view):
                if header.next_offset <= chunk.position or header.is_control:
                    continue
                for rec in iter_records(view[pos : pos + header.size_bytes]):
                    if chunk.position <= rec.offset < chunk.until:
                        yield TopicRecord(
                            r.topic,
                            r.partition,
                            rec.offset,
                            rec.key,
                            rec.value,
                            rec.timestamp_ms,
                            rec.headers,
                        )

    def chunks(self, r: OffsetRange) -> Iterator[Chunk]:
        """Fetch responses covering ``r`` from its first offset to its last, in order.

        Raises: as `arrow_batches`.
        """
        tp = r.topic_partition
        position, until = r.from_offset, r.until_offset
        if position >= until:
            return
        self._refresh(tp)
        in_flight: _InFlight | None = None
        progress_deadline = time.monotonic() + self.timeout_s
        while position < until:
            if in_flight is None or in_flight.offset != position:
                in_flight = self._send(tp, position)
            response, error = in_flight.wait(self.timeout_s + self.max_wait_ms / 1000)
            broker = in_flight.broker
            in_flight = None
            part = None if response is None else _partition_of(response, tp)
            if error is None and part is not None and part.preferred_read_replica >= 0:
                self._preferred, self._use_closest = part.preferred_read_replica, True  # KIP-392
                continue
            failed = error is not None or part is None or part.error_code is not ErrorCode.NONE
            if failed and self._use_closest and broker != self._leader(tp):
                self._fail_over(tp, broker, error, part, progress_deadline, from_closest=True)
                continue
            if error is not None or part is None or _is_stale(response, part):
                self._fail_over(tp, broker, error, part, progress_deadline)
                continue
            code = part.error_code
            if code is ErrorCode.OFFSET_OUT_OF_RANGE:
                position = self._out_of_range(r, position, part)
                progress_deadline = time.monotonic() + self.timeout_s
                continue
            if code is not ErrorCode.NONE:
                raise error_for(code, part.error_message or f"{code.name} fetching {tp}")
            self._attempt = 0
            records = records_bytes(part.records)  # bytes: decoded from gRPC
            first_base, next_offset = _span(records, position)
            if next_offset <= position:  # nothing new: the range is not all committed (yet)
                if time.monotonic() >= progress_deadline:
                    position = self._data_lost(
                        r,
                        position,
                        until,
                        f"the partition's high watermark stayed at {part.high_watermark}",
                    )
                continue
            if first_base > position:  # a hole in the offsets before the first batch
                position = self._data_lost(
                    r, position, min(first_base, until), f"the next batch starts at {first_base}"
                )
            if next_offset < until:
                in_flight = self._send(tp, next_offset)  # overlap the next Fetch with decoding
            progress_deadline = time.monotonic() + self.timeout_s
            # read_committed: the span above is of every batch (aborted ones move the
            # position too); what is decoded leaves them out.
            yield Chunk(drop_aborted(records, part.aborted_transactions), position, until)
            position = next_offset

    # -- internals -----------------------------------------------------------------------------

    def _refresh(self, tp: TopicPartition) -> None:
        response = self._network.fetch_metadata(
            [tp.topic], addresses=self._snapshot.brokers.values(), timeout_s=self.timeout_s
        )
        self._snapshot = snapshot_from_response(response)

    def _target(self, tp: TopicPartition) -> tuple[int, int]:
        """The broker to fetch from and the leader epoch to send: the leader first, then the
        other in-sync replicas, one per failed attempt."""
        info = self._snapshot.partition(tp)
        if info is None:
            return -1, -1
        candidates = [info.leader_id] if info.leader_id >= 0 else []
        candidates += [b for b in info.isr if b != info.leader_id]
        if (
            self._attempt == 0
            and self._use_closest
            and (closest := self._closest(info)) is not None
        ):
            return closest, info.leader_epoch
        candidates = [b for b in candidates if b in self._snapshot.brokers]
        if not candidates:
            return -1, -1
        broker = candidates[self._attempt % len(candidates)]
        return broker, info.leader_epoch if broker == info.leader_id else -1

    def _closest(self, info: PartitionInfo) -> int | None:
        """KIP-392: the replica the leader named, else an in-sync one in the reader's rack
        (the leader first); None: none (read from the leader)."""
        if self._preferred is not None and self._preferred in info.isr:
            return self._preferred if self._preferred in self._snapshot.brokers else None
        if not self.client_rack:
            return None
        in_rack = [
            b
            for b in (info.leader_id, *sorted(info.isr))
            if self._snapshot.racks.get(b) == self.client_rack and b in self._snapshot.brokers
        ]
        return in_rack[0] if in_rack else None

    def _leader(self, tp: TopicPartition) -> int:
        info = self._snapshot.partition(tp)
        return -1 if info is None else info.leader_id

    def _send(self, tp: TopicPartition, offset: int) -> _InFlight:
        broker, epoch = self._target(tp)
        in_flight = _InFlight(offset, broker)
        if broker < 0:
            in_flight.complete(None, NetworkError(f"no known leader or replica for {tp}"))
            return in_flight
        request = BrokerFetchRequest(
            max_wait_ms=self.max_wait_ms,
            min_bytes=1,
            max_bytes=self.fetch_max_bytes,
            isolation_level=self._isolation,
            topics=(
                FetchTopic(
                    topic=tp.topic,
                    partitions=(
                        FetchPartition(
                            partition=tp.partition,
                            current_leader_epoch=epoch,
                            fetch_offset=offset,
                            partition_max_bytes=self.fetch_max_bytes,
                        ),
                    ),
                ),
            ),
            rack_id=self.client_rack,
        )
        self._network.call_async(
            self._snapshot.brokers[broker],
            "Fetch",
            request,
            BrokerFetchResponse,
            in_flight.complete,
            timeout_s=self.max_wait_ms / 1000 + 30.0,
        )
        return in_flight

    def _fail_over(
        self,
        tp: TopicPartition,
        broker: int,
        error: KraftError | None,
        part: FetchPartitionData | None,
        deadline: float,
        *,
        from_closest: bool = False,
    ) -> None:
        """Give up past ``deadline``, else fetch again after a backoff: from the next replica,
        or (``from_closest``: a follower chosen for the reader's rack failed: it fell behind our
        position, left the ISR, went away) from the leader, as Kafka's consumer does."""
        why = str(error) if error is not None else (part.error_code.name if part else "no data")
        if time.monotonic() >= deadline:
            if error is not None:
                raise error
            raise error_for(
                part.error_code if part else ErrorCode.LEADER_NOT_AVAILABLE,
                f"{tp} stayed unreadable for {self.timeout_s}s: {why}",
            )
        log.info("fetch_retried", topic_partition=str(tp), broker=broker, reason=why)
        time.sleep(_BACKOFF_S)
        if from_closest:  # KIP-392: the leader may name a follower again
            self._use_closest, self._preferred = False, None
            return
        self._attempt += 1
        try:
            self._refresh(tp)
        except KraftError as e:
            log.warning("metadata_refresh_failed", error=str(e))
        hint = part.current_leader if part is not None else None
        info = self._snapshot.partition(tp)
        if hint is not None and info is not None and hint.leader_epoch > info.leader_epoch:
            self._attempt = 0  # KIP-951: go straight to the leader the broker named

    def _out_of_range(self, r: OffsetRange, position: int, part: FetchPartitionData) -> int:
        start = part.log_start_offset
        if 0 <= position < start:
            return self._data_lost(
                r,
                position,
                min(start, r.until_offset),
                f"the log start offset is now {start}: retention deleted them",
            )
        return self._data_lost(
            r,
            position,
            r.until_offset,
            f"the log ends at {part.high_watermark}: it was truncated",
        )

    def _data_lost(self, r: OffsetRange, lost_from: int, lost_until: int, why: str) -> int:
        """Raise, or skip ``[lost_from, lost_until)`` and return where to go on."""
        message = (
            f"data loss reading {r}: offsets [{lost_from}, {lost_until}) of "
            f"{r.topic}-{r.partition} are not available ({why})"
        )
        if self.fail_on_data_loss:
            raise OffsetOutOfRangeError(message + "; set failOnDataLoss=false to skip lost offsets")
        log.warning("data_loss_skipped", message=message)
        return lost_until


def _partition_of(response: BrokerFetchResponse, tp: TopicPartition) -> FetchPartitionData | None:
    for topic in response.responses:
        if topic.topic == tp.topic:
            for part in topic.partitions:
                if part.partition_index == tp.partition:
                    return part
    return None


def _is_stale(response: BrokerFetchResponse | None, part: FetchPartitionData) -> bool:
    if response is not None and response.error_code is not ErrorCode.NONE:
        return True
    code = part.error_code
    return code in _STALE or (
        code not in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE) and error_for(code).retriable
    )


def _span(records: bytes, position: int) -> tuple[int, int]:
    """The base offset of the first whole batch that reaches past ``position``, and the offset
    after the last whole batch (``position`` when there is none)."""
    first_base, next_offset = position, position
    for _, header in iter_batches(records):
        if header.next_offset <= position:
            continue
        if next_offset == position:
            first_base = header.base_offset
        next_offset = header.next_offset
    return first_base, next_offset


__all__ = ["Chunk", "RangeFetcher", "TopicRecord"]
