"""The driver's questions to the cluster: which partitions, and which offsets.

`OffsetLookup` answers them with the broker protocol: Metadata (from any broker) for the
partitions of topics, and ListOffsets (one request per partition leader, carrying all of its
partitions) for the earliest offset (log start), the latest (the high watermark: a reader sees
only committed records; with ``read_committed``, the last stable offset: no open transaction's
records, KIP-98) or the first offset at or after a timestamp (KIP-79). A stale leader
refreshes the metadata and the request is retried, under one deadline.

Thread-safe: no (one per planning call; close it when done).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Self

import structlog

from kraft.logs import ensure_configured
from kraft.security.tls import TlsConfig
from kraft.types import TopicPartition
from replication.clients.metadata import ClusterSnapshot, snapshot_from_response
from replication.clients.network import BrokerNetwork
from replication.clients.sequencing import METADATA_ERRORS
from replication.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ListOffsetsResponse,
)
from spark.options import (
    EARLIEST,
    LATEST,
    Assign,
    OffsetSpec,
    Subscribe,
    SubscribePattern,
    Subscription,
)
from storage.errors import (
    ErrorCode,
    KraftError,
    OffsetNotAvailableError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    error_for,
)

log = structlog.get_logger("kraft.spark")

_RETRY_ERRORS = METADATA_ERRORS | {ErrorCode.OFFSET_NOT_AVAILABLE}
_PENDING_TOPIC = _RETRY_ERRORS - {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
_BACKOFF_S = 0.1
_UNKNOWN_TOPIC_GRACE_S = 2.0


class OffsetLookup:
    """Partitions and offsets of topics, for planning reads.

    Args:
        bootstrap: ``host:port,...`` of (some of) the brokers.
        timeout_s: how long one question may take, retries included.
        tls: the client's TLS settings (`kraft.security.tls`; None: plaintext).
        read_committed: ListOffsets under ``read_committed`` (latest: the last stable offset).
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout_s: float = 30.0,
        tls: TlsConfig | None = None,
        read_committed: bool = False,
    ) -> None:
        ensure_configured()  # no output unless the application configures logging
        self.timeout_s = timeout_s
        self._isolation = READ_COMMITTED if read_committed else READ_UNCOMMITTED
        self._network = BrokerNetwork(bootstrap, request_timeout_s=min(10.0, timeout_s), tls=tls)
        self._snapshot = ClusterSnapshot()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._network.close()

    def refresh(self, topics: Iterable[str] = ()) -> ClusterSnapshot:
        """Fresh metadata of ``topics`` (none: every topic)."""
        response = self._network.fetch_metadata(
            topics, addresses=self._snapshot.brokers.values(), timeout_s=self.timeout_s
        )
        self._snapshot = snapshot_from_response(response)
        return self._snapshot

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The partitions a subscription reads now, in topic and partition order.

        Raises:
            UnknownTopicOrPartitionError: a subscribed or assigned topic (or partition) that
                does not exist.
        """
        match subscription:
            case Subscribe(topics):
                snapshot = self._wait_for_topics(topics)
                return [TopicPartition(t, p.partition) for t in topics for p in snapshot.topics[t]]
            case SubscribePattern():
                snapshot = self.refresh()
                return [
                    TopicPartition(t, p.partition)
                    for t in sorted(snapshot.topics)
                    if subscription.matches(t)
                    for p in snapshot.topics[t]
                ]
            case Assign(tps):
                snapshot = self._wait_for_topics(sorted({tp.topic for tp in tps}))
                for tp in tps:
                    if snapshot.partition(tp) is None:
                        raise UnknownTopicOrPartitionError(f"assign: no partition {tp}")
                return list(tps)
        raise AssertionError(subscription)  # pragma: no cover (the union is closed)

    def _wait_for_topics(self, topics: Iterable[str]) -> ClusterSnapshot:
        """Metadata naming every one of ``topics``; a topic some broker does not know yet
        (its metadata lags the controller's by a moment after a create) gets a short grace."""
        wanted = sorted(set(topics))
        started = time.monotonic()
        while True:
            snapshot = self.refresh(wanted)
            missing = [t for t in wanted if t not in snapshot.topics]
            if not missing:
                return snapshot
            unknown = any(
                snapshot.topic_errors.get(t, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                not in _PENDING_TOPIC
                for t in missing
            )
            waited = time.monotonic() - started
            if waited >= (_UNKNOWN_TOPIC_GRACE_S if unknown else min(5.0, self.timeout_s)):
                raise UnknownTopicOrPartitionError(f"no such topic: {', '.join(missing)}")
            time.sleep(_BACKOFF_S)

    def resolve(
        self,
        tps: Iterable[TopicPartition],
        spec: OffsetSpec,
        *,
        strategy: str = "latest",
    ) -> dict[TopicPartition, int]:
        """The concrete offset of each partition under ``spec``.

        Args:
            strategy: a timestamp with no record at or after it: ``latest`` (the high
                watermark) or ``error``.

        Raises:
            OffsetNotAvailableError: ``strategy="error"`` and a timestamp past the last record.
        """
        tps = list(tps)
        out: dict[TopicPartition, int] = {}
        queries: dict[TopicPartition, int] = {}
        for tp in tps:
            timestamp = spec.timestamp_for(tp)
            offset = spec.offset_for(tp)
            if timestamp is not None:
                queries[tp] = timestamp
            elif offset == EARLIEST:
                queries[tp] = EARLIEST_TIMESTAMP
            elif offset == LATEST:
                queries[tp] = LATEST_TIMESTAMP
            else:
                out[tp] = offset
        found = self.list_offsets(queries)
        missing = [tp for tp, offset in found.items() if offset < 0]
        if missing:
            if strategy == "error":
                raise OffsetNotAvailableError(
                    f"no record at or after the timestamp in {', '.join(map(str, missing))}; "
                    "set startingOffsetsByTimestampStrategy=latest to start at the end"
                )
            found.update(self.list_offsets(dict.fromkeys(missing, LATEST_TIMESTAMP)))
        out.update(found)
        return {tp: out[tp] for tp in tps}

    def list_offsets(self, queries: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """ListOffsets of each partition (-2 earliest, -1 latest, else a timestamp): the
        offset, or -1 for a timestamp after the last record.

        Raises:
            RequestTimedOutError: no answer for some partition within the deadline.
            KraftError: a partition error no retry fixes.
        """
        if not queries:
            return {}
        deadline = time.monotonic() + self.timeout_s
        pending = dict(queries)
        found: dict[TopicPartition, int] = {}
        snapshot = self._snapshot
        if any(snapshot.leader_for(tp) is None for tp in pending):
            snapshot = self.refresh({tp.topic for tp in pending})
        while pending:
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                leader = snapshot.leader_for(tp)
                if leader is not None:
                    by_leader.setdefault(leader, []).append(tp)
            for leader, tps in by_leader.items():
                for tp, offset in self._list_offsets_at(snapshot, leader, tps, pending).items():
                    found[tp] = offset
                    del pending[tp]
            if not pending:
                break
            if time.monotonic() >= deadline:
                raise RequestTimedOutError(
                    f"ListOffsets: no answer for {', '.join(map(str, pending))} "
                    f"within {self.timeout_s}s"
                )
            time.sleep(_BACKOFF_S)
            snapshot = self.refresh({tp.topic for tp in pending})
        return found

    def _list_offsets_at(
        self,
        snapshot: ClusterSnapshot,
        leader: int,
        tps: list[TopicPartition],
        queries: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, int]:
        request = snapshot.list_offsets_request(
            {tp: queries[tp] for tp in tps}, isolation_level=self._isolation
        )
        try:
            response = self._network.call(
                snapshot.brokers[leader], "ListOffsets", request, ListOffsetsResponse
            )
        except KraftError as e:
            if not e.retriable:
                raise
            log.warning("list_offsets_failed", broker=leader, error=str(e))
            return {}
        out = {}
        for topic in response.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.partition_index)
                if part.error_code is ErrorCode.NONE:
                    out[tp] = part.offset
                elif (
                    part.error_code not in _RETRY_ERRORS
                    and not error_for(part.error_code).retriable
                ):
                    raise error_for(part.error_code, part.error_message or f"ListOffsets {tp}")
        return out


__all__ = ["OffsetLookup"]
