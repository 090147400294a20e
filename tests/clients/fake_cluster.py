"""An in-memory stand-in for a broker cluster, behind the clients' `BrokerNetwork` interface.

It answers Metadata, InitProducerId, Produce, Fetch and ListOffsets the way a Kafka broker
does where the clients can tell (leaders and leader epochs, KIP-320 epoch checks, KIP-951
leader hints, KIP-98 duplicate and gap detection over the last 5 batches per producer and
partition, OFFSET_OUT_OF_RANGE), so the producer's and consumer's shells are tested before a
real broker exists. Faults are injected by the test: lost responses (the broker applied the
request, the client sees a network error), moved leaders, random delays that reorder
in-flight requests, per-partition errors, paused brokers (a call to one waits, as a call to a
SIGSTOPped process does, until the broker resumes, the call's deadline passes or the caller
cancels it), stale brokers (one whose picture stopped when it was cut from the controllers:
it answers Metadata, Fetch and ListOffsets from its own old leaders, epochs and log).

It is a test double, not a broker: no replication, no disk, acks are not honoured.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kraft.types import TopicPartition
from replication.clients.network import BrokerNetwork, Cancellable
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
    FetchPartitionData,
    FetchTopicResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    LeaderIdAndEpoch,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)
from storage.errors import ErrorCode, KraftError, NetworkError, RequestTimedOutError
from storage.records import iter_batches, set_base_offset, validate_batch

R = TypeVar("R")


@dataclass
class _ProducerEntry:
    epoch: int
    last_sequence: int = -1
    recent: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=5))


@dataclass
class _View:
    """What a broker believes: the partitions' leaders and epochs, and its copy of the logs."""

    leaders: dict[TopicPartition, tuple[int, int]]
    logs: dict[TopicPartition, list[bytes]]
    log_end: dict[TopicPartition, int]
    log_start: dict[TopicPartition, int]


@dataclass
class Stats:
    produce_requests: int = 0
    produce_partitions: list[int] = field(default_factory=list)
    fetch_requests: int = 0
    fetch_partitions: list[int] = field(default_factory=list)
    list_offsets_requests: int = 0
    metadata_requests: int = 0
    init_producer_id_requests: int = 0
    held: dict[str, int] = field(default_factory=dict)
    """Calls a paused broker held, by method."""
    refused: dict[str, int] = field(default_factory=dict)
    """Calls a dead broker refused, by method."""


class FakeCluster:
    """Brokers 1..n; partition p of every topic is led by broker ``p % n + 1`` at epoch 0."""

    def __init__(self, brokers: int = 3, topics: dict[str, int] | None = None, seed: int = 0):
        self.lock = threading.RLock()
        self.addresses = {b: f"fake-{b}:9092" for b in range(1, brokers + 1)}
        self.by_address = {a: b for b, a in self.addresses.items()}
        self.client_ids: set[str] = set()
        """The ``client.id`` of every call a real transport brought (tests/clients loopback)."""
        self.partitions: dict[str, int] = {}
        self.leaders: dict[TopicPartition, tuple[int, int]] = {}
        self.logs: dict[TopicPartition, list[bytes]] = {}
        self.log_end: dict[TopicPartition, int] = {}
        self.log_start: dict[TopicPartition, int] = {}
        self.producers: dict[tuple[int, TopicPartition], _ProducerEntry] = {}
        self.next_producer_id = 1000
        self.producer_epochs: dict[int, int] = {}
        self.stats = Stats()
        self.rng = random.Random(seed)
        # faults
        self.lose_produce_responses = 0
        """The next this-many Produce calls are applied, but the client sees NetworkError."""
        self.max_delay_s = 0.0
        """Each call is delayed by up to this long (reorders concurrent requests)."""
        self.partition_errors: dict[TopicPartition, ErrorCode] = {}
        """Produce to these partitions fails with the code (the request is not applied)."""
        self.max_batch_bytes = 1 << 20
        self.paused: set[int] = set()
        """Brokers that answer nothing until `resume`."""
        self.dead: set[int] = set()
        """Brokers whose calls fail at once with NetworkError (a killed process)."""
        self.stale: dict[int, _View] = {}
        """Brokers answering from the picture they had when `make_stale` froze it."""
        self._unpaused = threading.Condition(self.lock)
        for name, count in (topics or {"t": 3}).items():
            self.create_topic(name, count)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses.values())

    def create_topic(self, name: str, count: int) -> None:
        with self.lock:
            self.partitions[name] = count
            for p in range(count):
                tp = TopicPartition(name, p)
                self.leaders[tp] = (p % len(self.addresses) + 1, 0)
                self.logs[tp] = []
                self.log_end[tp] = 0
                self.log_start[tp] = 0

    def pause(self, node: int) -> None:
        with self.lock:
            self.paused.add(node)

    def resume(self, node: int) -> None:
        with self.lock:
            self.paused.discard(node)
            self._unpaused.notify_all()

    def wake_waiters(self) -> None:
        with self.lock:
            self._unpaused.notify_all()

    def make_stale(self, node: int) -> None:
        """From now on ``node`` answers from what it knows now (leaders, epochs, logs), as a
        broker cut from the controllers and from the other brokers does; `refresh` ends it."""
        with self.lock:
            self.stale[node] = _View(
                dict(self.leaders),
                {tp: list(log) for tp, log in self.logs.items()},
                dict(self.log_end),
                dict(self.log_start),
            )

    def refresh(self, node: int) -> None:
        with self.lock:
            self.stale.pop(node, None)

    def _view(self, node: int) -> _View:
        return self.stale.get(node) or _View(self.leaders, self.logs, self.log_end, self.log_start)

    def move_leader(self, tp: TopicPartition, leader: int) -> None:
        with self.lock:
            self.leaders[tp] = (leader, self.leaders[tp][1] + 1)

    def records(self, tp: TopicPartition) -> list[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of every record in the partition's log."""
        from storage.records import iter_records

        with self.lock:
            return [(r.offset, r.key, r.value) for b in self.logs[tp] for r in iter_records(b)]

    # -- dispatch ------------------------------------------------------------------------------

    def handle(
        self,
        address: str,
        method: str,
        request: Any,
        *,
        timeout_s: float | None = None,
        cancelled: threading.Event | None = None,
    ) -> Any:
        """Answer one call; a paused broker holds it until it resumes (RequestTimedOutError
        after ``timeout_s``, NetworkError once ``cancelled`` is set)."""
        node = self.by_address[address]
        with self.lock:
            if node in self.dead:
                self.stats.refused[method] = self.stats.refused.get(method, 0) + 1
                raise NetworkError(f"fake: {address} refused the connection")
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            if node in self.paused:
                self.stats.held[method] = self.stats.held.get(method, 0) + 1
            while node in self.paused:
                if cancelled is not None and cancelled.is_set():
                    raise NetworkError(f"fake: the call to {address} was cancelled")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise RequestTimedOutError(f"fake: {address} did not answer in time")
                self._unpaused.wait(0.05 if left is None else min(left, 0.05))
        if self.max_delay_s:
            with self.lock:
                delay = self.rng.uniform(0, self.max_delay_s)
            time.sleep(delay)
        handler: Callable[[int, Any], Any] = getattr(self, f"_{method}")
        return handler(node, request)

    def _Metadata(self, node: int, request: MetadataRequest) -> MetadataResponse:
        with self.lock:
            self.stats.metadata_requests += 1
            names = request.topics or tuple(self.partitions)
            view = self._view(node)
            topics = []
            for name in names:
                if name not in self.partitions:
                    topics.append(
                        MetadataTopic(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    )
                    continue
                parts = []
                for p in range(self.partitions[name]):
                    leader, epoch = view.leaders[TopicPartition(name, p)]
                    replicas = tuple(self.addresses)
                    parts.append(
                        MetadataPartition(
                            partition_index=p,
                            leader_id=leader,
                            leader_epoch=epoch,
                            replica_nodes=replicas,
                            isr_nodes=replicas,
                        )
                    )
                topics.append(MetadataTopic(name=name, partitions=tuple(parts)))
            brokers = tuple(
                MetadataBroker(node_id=b, host=a.rsplit(":", 1)[0], port=int(a.rsplit(":", 1)[1]))
                for b, a in self.addresses.items()
            )
            return MetadataResponse(brokers=brokers, controller_id=1, topics=tuple(topics))

    def _InitProducerId(self, node: int, request: InitProducerIdRequest) -> InitProducerIdResponse:
        with self.lock:
            self.stats.init_producer_id_requests += 1
            if request.producer_id < 0:
                pid = self.next_producer_id
                self.next_producer_id += 1
                self.producer_epochs[pid] = 0
            else:  # KIP-360: bump the epoch of an existing producer
                pid = request.producer_id
                self.producer_epochs[pid] += 1
            return InitProducerIdResponse(producer_id=pid, producer_epoch=self.producer_epochs[pid])

    def _Produce(self, node: int, request: ProduceRequest) -> ProduceResponse:
        with self.lock:
            self.stats.produce_requests += 1
            self.stats.produce_partitions.append(
                sum(len(t.partition_data) for t in request.topic_data)
            )
            out = []
            for topic in request.topic_data:
                parts = []
                for data in topic.partition_data:
                    tp = TopicPartition(topic.name, data.index)
                    parts.append(self._produce_partition(node, tp, data.records))
                out.append(ProduceTopicResponse(name=topic.name, partition_responses=tuple(parts)))
            response = ProduceResponse(responses=tuple(out))
            if self.lose_produce_responses > 0:
                self.lose_produce_responses -= 1
                raise NetworkError("fake: the response was lost")
            return response

    def _produce_partition(self, node: int, tp: TopicPartition, records: bytes) -> Any:
        def answer(code: ErrorCode, **kw: Any) -> ProducePartitionResponse:
            return ProducePartitionResponse(index=tp.partition, error_code=code, **kw)

        if tp not in self.leaders:
            return answer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        leader, epoch = self.leaders[tp]
        if leader != node:
            hint = LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
            return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER, current_leader=hint)
        if tp in self.partition_errors:
            return answer(self.partition_errors[tp])
        if len(records) > self.max_batch_bytes:
            return answer(ErrorCode.MESSAGE_TOO_LARGE)
        header = validate_batch(records)
        entry: _ProducerEntry | None = None
        if header.producer_id >= 0:
            key = (header.producer_id, tp)
            entry = self.producers.get(key)
            if entry is None or header.producer_epoch > entry.epoch:
                if header.base_sequence != 0:
                    return answer(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
                entry = self.producers[key] = _ProducerEntry(epoch=header.producer_epoch)
            elif header.producer_epoch < entry.epoch:
                return answer(ErrorCode.INVALID_PRODUCER_EPOCH)
            for first, last, base in entry.recent:  # a retry of a batch we have
                if (first, last) == (header.base_sequence, header.last_sequence):
                    return answer(ErrorCode.NONE, base_offset=base)
            if header.base_sequence != entry.last_sequence + 1:
                return answer(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        base = self.log_end[tp]
        batch = bytearray(records)
        set_base_offset(batch, base)
        self.logs[tp].append(bytes(batch))
        self.log_end[tp] = base + header.record_count
        if header.producer_id >= 0:
            assert entry is not None
            entry.last_sequence = header.last_sequence
            entry.recent.append((header.base_sequence, header.last_sequence, base))
        return answer(ErrorCode.NONE, base_offset=base)

    def _Fetch(self, node: int, request: BrokerFetchRequest) -> BrokerFetchResponse:
        with self.lock:
            self.stats.fetch_requests += 1
            self.stats.fetch_partitions.append(sum(len(t.partitions) for t in request.topics))
        deadline = time.monotonic() + request.max_wait_ms / 1000
        while True:
            with self.lock:
                topics, size = self._fetch_once(node, request)
            if size >= request.min_bytes or time.monotonic() >= deadline:
                return BrokerFetchResponse(responses=topics)
            time.sleep(0.005)  # the long poll

    def _fetch_once(self, node: int, request: BrokerFetchRequest) -> tuple[Any, int]:
        topics = []
        total = 0
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                parts.append(
                    self._fetch_partition(node, tp, p.fetch_offset, p.current_leader_epoch)
                )
                total += len(parts[-1].records)
            topics.append(FetchTopicResponse(topic=topic.topic, partitions=tuple(parts)))
        return tuple(topics), total

    def _fetch_partition(self, node: int, tp: TopicPartition, offset: int, epoch: int) -> Any:
        def answer(code: ErrorCode, **kw: Any) -> FetchPartitionData:
            return FetchPartitionData(partition_index=tp.partition, error_code=code, **kw)

        view = self._view(node)
        leader, leader_epoch = view.leaders[tp]
        hint = LeaderIdAndEpoch(leader_id=leader, leader_epoch=leader_epoch)
        if epoch >= 0 and epoch < leader_epoch:
            return answer(ErrorCode.FENCED_LEADER_EPOCH, current_leader=hint)
        if epoch > leader_epoch:
            return answer(ErrorCode.UNKNOWN_LEADER_EPOCH)
        if leader != node:
            return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER, current_leader=hint)
        end, start = view.log_end[tp], view.log_start[tp]
        if not start <= offset <= end:
            return answer(ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=start, high_watermark=end)
        chunks = []
        for batch in view.logs[tp]:
            for _, header in iter_batches(batch):
                if header.last_offset >= offset:
                    chunks.append(batch)
        return answer(
            ErrorCode.NONE,
            high_watermark=end,
            log_start_offset=start,
            records=b"".join(chunks[:50]),
        )

    def _ListOffsets(self, node: int, request: ListOffsetsRequest) -> ListOffsetsResponse:
        with self.lock:
            self.stats.list_offsets_requests += 1
            view = self._view(node)
            topics = []
            for topic in request.topics:
                parts = []
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, p.partition_index)
                    offset = view.log_start[tp] if p.timestamp == -2 else view.log_end[tp]
                    parts.append(
                        ListOffsetsPartitionResponse(partition_index=tp.partition, offset=offset)
                    )
                topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=tuple(parts)))
            return ListOffsetsResponse(topics=tuple(topics))


class FakeNetwork(BrokerNetwork):
    """`BrokerNetwork` whose calls go to a `FakeCluster` (async ones on a thread pool)."""

    def __init__(self, cluster: FakeCluster, *, request_timeout_s: float = 5.0) -> None:
        super().__init__(cluster.bootstrap, request_timeout_s=request_timeout_s)
        self.cluster = cluster
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="fake-broker")

    def close(self) -> None:
        super().close()
        self._pool.shutdown(wait=True)

    def call(
        self,
        address: str,
        method: str,
        request: Any,
        response_cls: type[R],
        timeout_s: float | None = None,
    ) -> R:
        try:
            response: R = self.cluster.handle(
                address, method, request, timeout_s=timeout_s or self.request_timeout_s
            )
        except KraftError as e:
            self._note_outcome(address, e)
            raise
        self._note_outcome(address, None)
        return response

    def call_async(
        self,
        address: str,
        method: str,
        request: Any,
        response_cls: type[R],
        on_done: Callable[[R | None, KraftError | None], None],
        timeout_s: float | None = None,
    ) -> Cancellable:
        call = _FakeCall(self.cluster)

        def run() -> None:
            try:
                response = self.cluster.handle(
                    address,
                    method,
                    request,
                    timeout_s=timeout_s or self.request_timeout_s,
                    cancelled=call.cancelled,
                )
            except KraftError as e:
                self._note_outcome(address, e)
                on_done(None, e)
                return
            self._note_outcome(address, None)
            on_done(response, None)

        self._pool.submit(run)
        return call


class _FakeCall:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.cancelled = threading.Event()

    def cancel(self) -> bool:
        self.cancelled.set()
        self.cluster.wake_waiters()
        return True
