"""The simulated coordinator shell: the pure `GroupCoordinator` behind an offsets partition.

`CoordinatorHost` does what the broker's group service does, on simulated time:

* writes (heartbeat, commit, tick) run one at a time; each write's records are appended to the
  offsets partition, and only once they commit (after a replication delay) are they replayed
  and the response sent;
* reads (offset fetch) are answered from the replayed state;
* a crash of the coordinator's broker loses the queue, the in-flight write and its response;
  of the partition's uncommitted tail a random prefix survives on the new leader (as with
  Kafka's ISR, where the new leader may hold records the old one never committed), the rest
  is lost. The new leader then loads: it answers COORDINATOR_LOAD_IN_PROGRESS until it has
  replayed the committed records into a fresh coordinator;
* now and then the committed prefix is compacted by key (latest value per key, tombstones
  dropped), as log compaction of ``__consumer_offsets`` does.

`Link` carries messages between a member and the coordinator: FIFO (a TCP connection), with
random delay and loss, cut while the member is isolated or the coordinator is down.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import final

from kraft.sim.scheduler import Scheduler
from replication.group import (
    GroupConfig,
    GroupCoordinator,
    HeartbeatRequest,
    HeartbeatResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Record,
    Result,
    TopicInfo,
)
from storage.errors import ErrorCode

Request = HeartbeatRequest | OffsetCommitRequest | OffsetFetchRequest
Response = HeartbeatResponse | OffsetCommitResponse | OffsetFetchResponse

TICK_EVERY_MS = 10


@final
class Link:
    """One member's connection: FIFO in each direction, delayed, lossy, breakable."""

    def __init__(self, scheduler: Scheduler, rng: random.Random, delay_max_ms: int, loss: float):
        self._scheduler = scheduler
        self._rng = rng
        self._delay_max_ms = delay_max_ms
        self.loss = loss
        self.cut_until_ms = -1
        self._last_arrival = {True: 0, False: 0}

    def is_cut(self) -> bool:
        return self._scheduler.clock.now_ms < self.cut_until_ms

    def send(self, to_coordinator: bool, deliver: Callable[[], None]) -> None:
        if self.is_cut() or self._rng.random() < self.loss:
            return
        now = self._scheduler.clock.now_ms
        at = max(now + self._rng.randint(1, self._delay_max_ms), self._last_arrival[to_coordinator])
        self._last_arrival[to_coordinator] = at

        def arrive() -> None:
            if not self.is_cut():
                deliver()

        self._scheduler.at(at, arrive)


@dataclass(slots=True)
class _Write:
    run: Callable[[], Result[object]]
    reply: Callable[[object], None]
    request: Request | None


class HostObserver:
    """What the checker learns from the host (no-op defaults)."""

    def on_replayed(
        self, coord: GroupCoordinator, request: Request | None, response: object
    ) -> None:
        pass

    def on_loaded(self, coord: GroupCoordinator) -> None:
        pass


@final
class CoordinatorHost:
    def __init__(
        self,
        scheduler: Scheduler,
        rng: random.Random,
        config: GroupConfig,
        topics: Callable[[], Mapping[str, TopicInfo]],
        observer: HostObserver,
    ) -> None:
        self._scheduler = scheduler
        self._rng = rng
        self._config = config
        self._topics = topics
        self._observer = observer
        self.log: list[Record] = []
        self.committed = 0  # records below this index are committed
        self.coord: GroupCoordinator | None = GroupCoordinator(config)
        self.loading = False
        self.incarnation = 0
        self._queue: deque[_Write] = deque()
        self._busy = False
        self._tick_queued = False
        self.crashes = 0
        self.compactions = 0
        self.lost_tail_records = 0
        scheduler.after(TICK_EVERY_MS, self._ticker)

    # --- requests --------------------------------------------------------------------------

    @property
    def is_up(self) -> bool:
        return self.coord is not None

    def receive(self, request: Request, reply: Callable[[object], None]) -> None:
        coord = self.coord
        if coord is None:
            return  # the broker is down: the request is lost
        if self.loading:
            reply(_load_in_progress(request))
            return
        match request:
            case OffsetFetchRequest():
                reply(coord.fetch_offsets(request))
            case HeartbeatRequest():
                self._enqueue(
                    lambda: coord.heartbeat(request, self._topics(), self._now()),  # type: ignore[arg-type, return-value]
                    reply,
                    request,
                )
            case OffsetCommitRequest():
                self._enqueue(
                    lambda: coord.commit_offsets(request, self._now()),  # type: ignore[arg-type, return-value]
                    reply,
                    request,
                )

    def _now(self) -> int:
        return self._scheduler.clock.now_ms

    def _enqueue(
        self,
        run: Callable[[], Result[object]],
        reply: Callable[[object], None],
        request: Request | None,
    ) -> None:
        self._queue.append(_Write(run, reply, request))
        self._pump()

    def _pump(self) -> None:
        if self._busy or not self._queue or self.coord is None or self.loading:
            return
        write = self._queue.popleft()
        result = write.run()
        if not result.records:
            write.reply(result.response)
            self._observer.on_replayed(self.coord, write.request, result.response)
            self._pump()
            return
        self._busy = True
        self.log.extend(result.records)
        incarnation = self.incarnation

        def committed() -> None:
            if incarnation != self.incarnation or self.coord is None:
                return  # the broker crashed meanwhile: no replay here, no response
            self.committed = len(self.log)  # one write in flight: the whole log is now in
            for key, value in result.records:
                self.coord.replay(key, value)
            self._busy = False
            self._observer.on_replayed(self.coord, write.request, result.response)
            write.reply(result.response)
            self._pump()

        self._scheduler.after(self._rng.randint(1, 6), committed)

    def _ticker(self) -> None:
        self._scheduler.after(TICK_EVERY_MS, self._ticker)
        coord = self.coord
        if coord is None or self.loading or self._tick_queued:
            return
        deadline = coord.next_deadline_ms()
        if deadline is None or deadline > self._now():
            return
        self._tick_queued = True

        def run() -> Result[object]:
            self._tick_queued = False
            assert self.coord is not None
            return Result(records=self.coord.tick(self._now(), self._topics()), response=None)

        self._enqueue(run, lambda _: None, None)

    def topics_changed(self) -> None:
        """The metadata image changed: a tick picks up created or grown topics."""
        if self.coord is None or self.loading:
            return

        def run() -> Result[object]:
            assert self.coord is not None
            return Result(records=self.coord.tick(self._now(), self._topics()), response=None)

        self._enqueue(run, lambda _: None, None)

    # --- faults -------------------------------------------------------------------------------

    def crash(self, down_ms: int) -> None:
        """The coordinator's broker dies; another broker becomes the partition's leader."""
        if self.coord is None:
            return
        self.crashes += 1
        self.incarnation += 1
        self.coord = None
        self._queue.clear()
        self._busy = False
        self._tick_queued = False
        tail = len(self.log) - self.committed
        survive = self._rng.randint(0, tail)
        self.lost_tail_records += tail - survive
        del self.log[self.committed + survive :]
        self.committed = len(self.log)  # the new leader commits what it holds
        self._scheduler.after(down_ms, self._start_loading)

    def _start_loading(self) -> None:
        self.coord = GroupCoordinator(self._config)
        self.loading = True
        incarnation = self.incarnation

        def loaded() -> None:
            if incarnation != self.incarnation or self.coord is None:
                return
            for key, value in self.log[: self.committed]:
                self.coord.replay(key, value)
            self.loading = False
            self._observer.on_loaded(self.coord)
            self._pump()

        self._scheduler.after(5 + self.committed // 200, loaded)

    def compact(self) -> None:
        """Log compaction of the committed prefix: the latest value per key, no tombstones."""
        last: dict[bytes, tuple[int, bytes | None]] = {}
        for i, (key, value) in enumerate(self.log[: self.committed]):
            last[key] = (i, value)
        kept = [
            (key, value)
            for key, (_, value) in sorted(last.items(), key=lambda kv: kv[1][0])
            if value is not None
        ]
        self.log[: self.committed] = kept
        self.committed = len(kept)
        self.compactions += 1


def _load_in_progress(request: Request) -> Response:
    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    match request:
        case HeartbeatRequest():
            return HeartbeatResponse(error_code=code)
        case OffsetCommitRequest():
            return OffsetCommitResponse(error_code=code)
        case OffsetFetchRequest():
            return OffsetFetchResponse(error_code=code)
