"""`LeaderFetcher`: the follower fetches of every partition led by one broker, in one RPC.

Kafka runs one ``ReplicaFetcherThread`` per source broker, whose FetchRequest carries every
partition this broker follows there. Here each follower core still builds its own fetch (one
in flight per partition), and `fetch` parks it; the fetcher sends whatever is parked as ONE
Fetch long-poll (a message on the leader's ``Broker.FetchStream`` call,
`replication.broker.replicas.fetch_stream`) and hands each partition its part of the answer.
Partitions answered together re-fetch in the same event-loop turn, so they stay in one
request: the RPC rate is per leader broker, not per partition (one RPC per partition costs a
gRPC call's set-up per partition per fetch).

One request is in flight per leader; a fetch parked meanwhile waits for the next one (at most
``replica.fetch.wait.max.ms``). A transport failure answers every parked partition with
NETWORK_EXCEPTION or REQUEST_TIMED_OUT (the cores back off by themselves).

A large answer (a catch-up: up to ``replica.fetch.response.max.bytes`` over hundreds of
partitions) is handed out in slices, the loop yielded between them
(`LeaderFetcher._answer_in_slices`).

Throttling (``follower.replication.throttled.rate``, `replication.broker.replicas.throttle`): the
fetch of a partition this broker is being added to by a reassignment asks for at most what the
throttle allows; when it allows nothing, the partition stays parked out of the request until it does
(Kafka's follower leaves throttled partitions out of its FetchRequest the same way)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Final

import structlog

from kraft.raft_shell.clock import clock_ms
from kraft.types import Epoch, Offset, TopicPartition
from replication.broker.loop_slice import LoopSlice
from replication.broker.replicas.change_event import ChangeEvent, wait_any
from replication.broker.replicas.throttle import ThrottleBucket
from replication.core import DivergingEpoch, FollowerFetchRequest, FollowerFetchResponse
from replication.driver import PartitionDriver
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
    FetchPartition,
    FetchPartitionData,
    FetchTopic,
)
from storage.errors import ErrorCode, KraftError
from storage.file_region import records_bytes

SendFetch = Callable[[int, BrokerFetchRequest], Awaitable[BrokerFetchResponse]]
"""Send one Fetch to a leader broker id; raises `KraftError` on transport failure."""

_log = structlog.get_logger("replication.broker.replicas.fetcher")

APPLY_SLICE_PARTITIONS: Final = 32
"""Partitions whose answers one loop turn applies at most (`LeaderFetcher._answer_in_slices`):
an answer's application (its checks, the append, the next fetch parked) costs a few hundred
microseconds in Python."""
APPLY_SLICE_BYTES: Final = 1 << 20
"""...and records: a turn stops handing out answers once they hold this many bytes (an append
checks each batch's CRC and writes it)."""

_Batch = dict[TopicPartition, tuple[FollowerFetchRequest, asyncio.Future[FollowerFetchResponse]]]
"""Parked fetches by partition, with the future each waits on."""


class LeaderFetcher:
    """Batches the follower fetches sent to ``leader_id``.

    Args:
        replica_id / send: this broker's id and the transport.
        max_wait_ms / min_bytes: ``replica.fetch.wait.max.ms`` / ``replica.fetch.min.bytes``:
            the long poll (Kafka's defaults, 500 ms / 1 byte: answered as soon as anything
            is available, with everything available then).
        max_bytes / response_max_bytes: ``replica.fetch.max.bytes`` (per partition) and
            ``replica.fetch.response.max.bytes`` (the whole response, which the leader fills
            in request order: `_rotate` keeps that fair).
    """

    def __init__(
        self,
        leader_id: int,
        *,
        replica_id: int,
        send: SendFetch,
        max_wait_ms: int,
        max_bytes: int,
        min_bytes: int = 1,
        response_max_bytes: int = 10 << 20,
        throttle: ThrottleBucket | None = None,
        is_throttled: Callable[[TopicPartition], bool] | None = None,
    ) -> None:
        self.leader_id = leader_id
        self._throttle = throttle
        self._is_throttled = is_throttled
        self._replica_id = replica_id
        self._send = send
        self._max_wait_ms = max_wait_ms
        self._max_bytes = max_bytes
        self._min_bytes = min_bytes
        self._response_max_bytes = response_max_bytes
        self._parked: dict[
            TopicPartition, tuple[FollowerFetchRequest, asyncio.Future[FollowerFetchResponse]]
        ] = {}
        self._order: dict[TopicPartition, None] = {}
        """The order of the partitions in the next request: those that got records last go
        last (`_rotate`)."""
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name=f"fetcher-{leader_id}")

    async def fetch(self, request: FollowerFetchRequest) -> FollowerFetchResponse:
        """Park ``request`` until the next batched Fetch to the leader answers it."""
        future: asyncio.Future[FollowerFetchResponse] = asyncio.get_running_loop().create_future()
        old = self._parked.pop(request.topic_partition, None)
        if old is not None and not old[1].done():
            old[1].set_result(follower_response(old[0], error_code=ErrorCode.NETWORK_EXCEPTION))
        self._parked[request.topic_partition] = (request, future)
        self._wake.set()
        return await future

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        for request, future in self._parked.values():
            if not future.done():
                future.set_result(
                    follower_response(request, error_code=ErrorCode.NETWORK_EXCEPTION)
                )
        self._parked.clear()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(0)  # partitions answered together re-fetch in this turn
            batch, self._parked = self._parked, {}
            batch = self._hold_throttled(batch)
            if batch:
                await self._fetch_batch(batch)

    def _hold_throttled(self, batch: _Batch) -> _Batch:
        """Park again the throttled partitions while the follower throttle allows nothing,
        with a wake-up when it will; the rest go now."""
        throttle, is_throttled = self._throttle, self._is_throttled
        if throttle is None or is_throttled is None or not throttle.limited:
            return batch
        now = clock_ms()
        wait_ms = throttle.wait_ms(now)
        if wait_ms == 0:
            return batch
        held = {tp: parked for tp, parked in batch.items() if is_throttled(tp)}
        if not held:
            return batch
        for tp, parked in held.items():
            self._parked.setdefault(tp, parked)  # NB: a newer fetch of tp replaced it already
        asyncio.get_running_loop().call_later(wait_ms / 1000, self._wake.set)
        return {tp: parked for tp, parked in batch.items() if tp not in held}

    async def _fetch_batch(self, batch: _Batch) -> None:
        topics: dict[str, list[FetchPartition]] = {}
        epoch = -1
        throttle, is_throttled = self._throttle, self._is_throttled
        throttled: set[TopicPartition] = set()
        if throttle is not None and is_throttled is not None and throttle.limited:
            throttled = {tp for tp in batch if is_throttled(tp)}
        allowance = throttle.available(clock_ms()) if throttled and throttle else 0
        for tp in self._in_order(batch):
            request = batch[tp][0]
            epoch = request.broker_epoch
            max_bytes = self._max_bytes
            if tp in throttled:
                max_bytes = max(1, min(max_bytes, allowance))
            topics.setdefault(tp.topic, []).append(fetch_partition(request, max_bytes))
        wire = BrokerFetchRequest(
            replica_id=self._replica_id,
            replica_epoch=epoch,
            max_wait_ms=self._max_wait_ms,
            min_bytes=self._min_bytes,
            max_bytes=self._response_max_bytes,
            topics=tuple(FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items()),
        )
        answers: dict[TopicPartition, FollowerFetchResponse] = {}
        try:
            try:
                response = await self._send(self.leader_id, wire)
            except KraftError as e:
                _log.debug("fetch_failed", leader_id=self.leader_id, error=e.code.name)
                code = e.code
            else:
                code = response.error_code
                answers = self._answers(response, batch, throttled)
                del response  # NB: the answers hold the records, each let go once handed out
            if code is ErrorCode.NONE:
                code = ErrorCode.UNKNOWN_SERVER_ERROR  # a partition the leader did not answer
            await self._answer_in_slices(batch, answers, code)
        finally:  # cancelled (`close`): no partition waits forever
            for request, future in batch.values():
                if not future.done():
                    future.set_result(
                        follower_response(request, error_code=ErrorCode.NETWORK_EXCEPTION)
                    )

    def _answers(
        self, response: BrokerFetchResponse, batch: _Batch, throttled: set[TopicPartition]
    ) -> dict[TopicPartition, FollowerFetchResponse]:
        """Each parked partition's part of ``response``, for its follower core."""
        answers: dict[TopicPartition, FollowerFetchResponse] = {}
        served: list[TopicPartition] = []
        throttle = self._throttle
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                parked = batch.get(tp)
                if parked is None:
                    continue
                if tp in throttled and throttle is not None:
                    throttle.record(len(data.records), clock_ms())
                if data.records:
                    served.append(tp)
                answers[tp] = follower_answer(parked[0], data)
        self._rotate(served)
        return answers

    async def _answer_in_slices(
        self,
        batch: _Batch,
        answers: dict[TopicPartition, FollowerFetchResponse],
        code: ErrorCode,
    ) -> None:
        """Hand each parked partition its answer (or ``code``). Each partition's fetch loop
        applies its answer (appends, moves its high watermark, parks its next fetch) as soon
        as its future completes, all in the loop turn after; so the answers go out in slices
        of `APPLY_SLICE_PARTITIONS` partitions or `APPLY_SLICE_BYTES` of records, and this
        yields the loop between slices: a 10 MiB answer for hundreds of partitions is applied
        over many turns, with produces, fetches and heartbeats served between them. Each
        partition still applies its own answers in order (one fetch in flight per partition);
        the parked partitions' next request waits for the last slice (one answer held at
        once), and the answers' records are let go slice by slice."""
        cut = LoopSlice(most=APPLY_SLICE_PARTITIONS)
        records = 0
        for tp in list(batch):
            if records >= APPLY_SLICE_BYTES:
                cut.end()
            if await cut.turn():  # the last slice's partitions applied their answers meanwhile
                records = 0
            request, future = batch.pop(tp)
            answer = answers.pop(tp, None) or follower_response(request, error_code=code)
            records += len(answer.records)
            if not future.done():
                future.set_result(answer)

    def _in_order(self, batch: _Batch) -> list[TopicPartition]:
        """``batch``'s partitions in request order: a partition new to the order goes last."""
        order = self._order
        for tp in batch:
            order.setdefault(tp, None)
        if len(order) > 2 * len(batch) + 1024:  # forget partitions no longer fetched here
            self._order = order = {tp: None for tp in order if tp in batch or tp in self._parked}
        return [tp for tp in order if tp in batch]

    def _rotate(self, served: list[TopicPartition]) -> None:
        """KIP-74: the leader fills a response in request order up to
        ``replica.fetch.response.max.bytes``, so the partitions that got records go to the end
        of the next request, and the ones left out come first (Kafka's fetch sessions and
        fetchers rotate the same way)."""
        order = self._order
        for tp in served:
            del order[tp]
            order[tp] = None


async def follower_fetch_loop(
    driver: PartitionDriver,
    changed: Callable[[], ChangeEvent],
    fetch_from_leader: Callable[[FollowerFetchRequest], Awaitable[FollowerFetchResponse]],
    on_input: Callable[[], None],
) -> None:
    """One follower partition's fetches while its driver follows: each request goes to
    ``fetch_from_leader`` (a `LeaderFetcher` batches it with the leader's other partitions)
    and its answer back to the driver; with nothing to ask (a backoff, a truncation pending),
    it waits for the replica's next change or the driver's next deadline (at most 100 ms).

    ``changed`` gives the replica's *current* change event: each change sets the event and
    replaces it, so an event kept from before would be set for good, and the loop would spin
    through the event loop until the backoff ended (stalls of 4-10 s in a broker kill)."""
    while driver.is_follower:
        generation = driver.generation
        now = clock_ms()
        request = driver.build_fetch_request(now)
        if request is None:
            deadline = driver.next_deadline_ms()
            delay_s = 0.1 if deadline is None else max(0.0, min(deadline - now, 100) / 1000)
            await wait_any((changed(),), delay_s)  # NB: no task per wait (wait_for's)
            continue
        response = await fetch_from_leader(request)
        # NB: a newer follower role has no fetch in flight: the driver drops this answer.
        driver.handle_fetch_response(generation, response, clock_ms())
        on_input()


def fetch_partition(request: FollowerFetchRequest, max_bytes: int) -> FetchPartition:
    """A follower core's fetch as one partition of a ``Broker.Fetch``."""
    return FetchPartition(
        partition=request.topic_partition.partition,
        current_leader_epoch=request.current_leader_epoch,
        fetch_offset=request.fetch_offset,
        last_fetched_epoch=request.last_fetched_epoch,
        log_start_offset=request.log_start_offset,
        partition_max_bytes=max_bytes,
    )


def follower_answer(
    request: FollowerFetchRequest, data: FetchPartitionData
) -> FollowerFetchResponse:
    """The leader's answer for one partition of a ``Broker.Fetch``, for the follower core that
    sent ``request``."""
    return follower_response(
        request,
        error_code=data.error_code,
        high_watermark=data.high_watermark,
        log_start_offset=data.log_start_offset,
        diverging_epoch=diverging_from_wire(data),
        records=records_bytes(data.records),  # bytes: decoded from gRPC
    )


def follower_response(
    request: FollowerFetchRequest,
    *,
    error_code: ErrorCode = ErrorCode.NONE,
    high_watermark: int = -1,
    log_start_offset: int = -1,
    diverging_epoch: DivergingEpoch | None = None,
    records: bytes = b"",
) -> FollowerFetchResponse:
    return FollowerFetchResponse(
        fetch_id=request.fetch_id,
        error_code=error_code,
        high_watermark=Offset(high_watermark),
        log_start_offset=Offset(log_start_offset),
        diverging_epoch=diverging_epoch,
        records=records,
    )


def diverging_from_wire(data: FetchPartitionData) -> DivergingEpoch | None:
    d = data.diverging_epoch
    return (
        None if d is None else DivergingEpoch(epoch=Epoch(d.epoch), end_offset=Offset(d.end_offset))
    )


__all__ = [
    "APPLY_SLICE_BYTES",
    "APPLY_SLICE_PARTITIONS",
    "LeaderFetcher",
    "SendFetch",
    "diverging_from_wire",
    "fetch_partition",
    "follower_answer",
    "follower_fetch_loop",
    "follower_response",
]
