"""A simulated KIP-848 consumer: heartbeats, reconciles, processes, commits after processing.

It behaves as a careful client does (the rules the checkers rely on):

* one request at a time on its connection (heartbeat, commit or offset fetch), with a timeout;
* told to revoke partitions, it stops processing them, commits their positions, and only
  then heartbeats without them (Kafka's ``onPartitionsRevoked`` before the ack);
* a new partition is processed only after an OffsetFetch gave its start position (the
  committed offset, else 0: ``auto.offset.reset=earliest``);
* FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: every partition is lost (no commit), rejoin with
  epoch 0 and the same member id (KIP-1082);
* its ownership is a lease: it treats every partition as lost once ``session.timeout.ms`` has
  passed since it sent its last heartbeat that succeeded (the coordinator cannot have expired
  it earlier), and once ``rebalance_timeout_ms`` has passed since the first heartbeat after
  its last clean state without finishing a revocation (the coordinator's rebalance timeout
  cannot have fired earlier). A paused process checks its lease before acting again.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, final

from kraft.sim.scheduler import Scheduler
from replication.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TopicPartitions,
)
from storage.errors import ErrorCode

from .host import CoordinatorHost, Link, Request

if TYPE_CHECKING:
    from .checker import GroupChecker
    from .data import DataTopics

TP = tuple[str, int]  # (topic id, partition)
REQUEST_TIMEOUT_MS = 300
RETRY_BACKOFF_MS = 40
POLL_EVERY_MS = 15
AUTO_COMMIT_EVERY_MS = 120
MAX_RECORDS_PER_POLL = 8
REBALANCE_TIMEOUT_MS = 1_000
FENCED = (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.GROUP_ID_NOT_FOUND)


@final
class SimMember:
    def __init__(
        self,
        *,
        member_id: str,
        group_id: str,
        scheduler: Scheduler,
        rng: random.Random,
        host: CoordinatorHost,
        link: Link,
        data: DataTopics,
        checker: GroupChecker,
        subscription: tuple[str, ...],
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        assignor: str | None,
    ) -> None:
        self.member_id = member_id
        self.group_id = group_id
        self._scheduler = scheduler
        self._rng = rng
        self._host = host
        self.link = link
        self._data = data
        self._checker = checker
        self.subscription = subscription
        self._session_timeout_ms = session_timeout_ms
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._assignor = assignor
        self.alive = True
        self.paused_until = -1
        self.left = False
        self.epoch = 0
        self.owned: set[TP] = set()
        self.revoking: set[TP] = set()
        self.positions: dict[TP, int] = {}  # only partitions whose start position is known
        self.committed_by_me: dict[TP, int] = {}
        self._lease_send_ms: int | None = None
        self._first_send_after_clean: int | None = None
        self._revoke_deadline_ms: int | None = None
        self._queue: deque[tuple[str, Callable[[], Request | None]]] = deque()
        self._inflight = 0  # request serial in flight, 0 = none
        self._inflight_kind = ""
        self._serial = 0
        self._hb_queued = False
        self.processed = 0
        self.commits_ok = 0
        self.fenced = 0

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._queue_heartbeat()
        self._scheduler.after(POLL_EVERY_MS, self._poll)
        self._scheduler.after(AUTO_COMMIT_EVERY_MS, self._auto_commit)

    def crash(self) -> None:
        self.alive = False
        self.owned = set()
        self.revoking = set()

    def pause(self, ms: int) -> None:
        self.paused_until = max(self.paused_until, self._now() + ms)

    def leave(self) -> None:
        """Graceful: commit what was processed, then heartbeat with epoch -1."""
        if not self.alive or self.left:
            return
        self.left = True
        self._queue.clear()
        self._queue_commit(set(self.owned))

        def leave_request() -> Request | None:
            self._drop_all()
            return HeartbeatRequest(
                group_id=self.group_id, member_id=self.member_id, member_epoch=-1
            )

        self._queue.append(("leave", leave_request))
        self._send_next()

    def _now(self) -> int:
        return self._scheduler.clock.now_ms

    def _paused(self) -> bool:
        return self._now() < self.paused_until

    def _active(self) -> bool:
        return self.alive and not self._paused()

    # --- the ownership lease -------------------------------------------------------------------

    def view(self, now_ms: int) -> set[TP]:
        """The partitions this member believes it may process at ``now_ms``."""
        if not self.alive or self._lease_send_ms is None:
            return set()
        if now_ms >= self._lease_send_ms + self._session_timeout_ms:
            return set()
        if self._revoke_deadline_ms is not None and now_ms >= self._revoke_deadline_ms:
            return set()
        return set(self.owned)

    def _enforce_lease(self) -> None:
        if self.owned and not self.view(self._now()):
            self._lose_all()

    def _lose_all(self) -> None:
        """onPartitionsLost: no commit; rejoin with epoch 0."""
        self._drop_all()
        self.epoch = 0

    def _drop_all(self) -> None:
        self.owned = set()
        self.revoking = set()
        self.positions = {}
        self._revoke_deadline_ms = None

    # --- requests --------------------------------------------------------------------------------

    def _send_next(self) -> None:
        if self._inflight or not self._queue or not self._active():
            return
        kind, build = self._queue.popleft()
        if kind == "heartbeat":
            self._hb_queued = False
        request = build()
        if request is None:
            self._send_next()
            return
        self._serial += 1
        serial = self._inflight = self._serial
        self._inflight_kind = kind
        sent_ms = self._now()

        def on_reply(response: object) -> None:
            self.link.send(
                False, lambda: self._on_response(serial, kind, request, response, sent_ms)
            )

        self.link.send(True, lambda: self._host.receive(request, on_reply))
        self._scheduler.after(REQUEST_TIMEOUT_MS, lambda: self._on_timeout(serial, kind))

    def _on_timeout(self, serial: int, kind: str) -> None:
        if self._inflight != serial or not self.alive:
            return
        self._inflight = 0
        if self._paused():
            self._scheduler.at(self.paused_until, self._resume)
            return
        if kind == "heartbeat" or kind == "leave":
            self._scheduler.after(RETRY_BACKOFF_MS, self._queue_heartbeat)
        if kind == "revoke_commit":
            self._finish_revocation()
        self._send_next()

    def _resume(self) -> None:
        if self.alive and not self._paused():
            self._enforce_lease()
            self._send_next()

    def _on_response(
        self, serial: int, kind: str, request: Request, response: object, sent_ms: int
    ) -> None:
        if self._inflight != serial or not self.alive:
            return
        if self._paused():  # the process handles it when it wakes up
            self._scheduler.at(
                self.paused_until,
                lambda: self._on_response(serial, kind, request, response, sent_ms),
            )
            return
        self._inflight = 0
        self._enforce_lease()
        match response:
            case HeartbeatResponse():
                self._on_heartbeat(kind, response, sent_ms)
            case OffsetCommitResponse():
                assert isinstance(request, OffsetCommitRequest)
                self._on_commit(kind, request, response)
            case OffsetFetchResponse():
                self._on_fetch(response)
        self._send_next()

    # --- heartbeat -----------------------------------------------------------------------------

    def _queue_heartbeat(self) -> None:
        if not self.alive or self.left or self._hb_queued:
            return
        self._hb_queued = True
        self._queue.append(("heartbeat", self._heartbeat_request))
        self._send_next()

    def _heartbeat_request(self) -> Request | None:
        if self.left:
            return None
        if self._first_send_after_clean is None:
            self._first_send_after_clean = self._now()
        return HeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            subscribed_topic_names=self.subscription,
            server_assignor=self._assignor,
            topic_partitions=_tps(self.owned) if self.epoch else (),
            client_id=self.member_id,
            client_host="/sim",
        )

    def _on_heartbeat(self, kind: str, r: HeartbeatResponse, sent_ms: int) -> None:
        if kind == "leave" or self.left:
            return  # leaving: an assignment that arrives now is moot
        if r.error_code in FENCED:
            self.fenced += 1
            self._lose_all()
            self._queue_heartbeat()
            return
        if r.error_code != ErrorCode.NONE:
            self._scheduler.after(RETRY_BACKOFF_MS, self._queue_heartbeat)
            return
        self._lease_send_ms = sent_ms
        self.epoch = r.member_epoch
        target = {(tp.topic_id, p) for tp in r.assignment or () for p in tp.partitions}
        revoke = self.owned - target
        if revoke:
            if self._revoke_deadline_ms is None:
                first = self._first_send_after_clean or sent_ms
                self._revoke_deadline_ms = first + REBALANCE_TIMEOUT_MS
            if not self.revoking:
                self.revoking = set(revoke)
                self._queue_commit(set(revoke), kind="revoke_commit")
        else:
            self._first_send_after_clean = None
            self._revoke_deadline_ms = None
        added = target - self.owned
        if added and not revoke:
            self.owned |= added
            self._checker.on_gained(self, added)
            self._queue.append(("fetch", lambda: self._fetch_request(added)))
        next_ms = 0 if revoke else self._heartbeat_interval_ms
        self._scheduler.after(next_ms, self._queue_heartbeat)

    def _finish_revocation(self) -> None:
        self.owned -= self.revoking
        for tp in self.revoking:
            self.positions.pop(tp, None)
        self.revoking = set()
        self._queue_heartbeat()

    # --- offsets ---------------------------------------------------------------------------------

    def _fetch_request(self, parts: set[TP]) -> Request | None:
        wanted = sorted(parts & self.owned)
        if not wanted:
            return None
        return OffsetFetchRequest(
            group_id=self.group_id,
            partitions=tuple((self._data.name_of(t), p) for t, p in wanted),
            member_id=self.member_id,
            member_epoch=self.epoch,
        )

    def _maybe_fetch_positions(self) -> None:
        """Owned partitions without a start position get one (again, if a fetch was lost)."""
        missing = self.owned - self.revoking - set(self.positions)
        fetching = (self._inflight and self._inflight_kind == "fetch") or any(
            k == "fetch" for k, _ in self._queue
        )
        if missing and not fetching:
            self._queue.append(("fetch", lambda: self._fetch_request(missing)))

    def _on_fetch(self, r: OffsetFetchResponse) -> None:
        if r.error_code != ErrorCode.NONE:
            return  # the next poll asks again
        for o in r.offsets:
            tp = (self._data.id_of(o.topic), o.partition)
            if tp in self.owned and tp not in self.positions:
                self.positions[tp] = max(o.offset, 0)
                self.committed_by_me[tp] = max(o.offset, 0)

    def _queue_commit(self, parts: set[TP], kind: str = "commit") -> None:
        if kind == "commit" and any(k == "commit" for k, _ in self._queue):
            return  # the queued one commits the latest positions when it is sent

        def build() -> Request | None:
            offsets = {
                tp: pos
                for tp, pos in sorted(self.positions.items())
                if tp in parts and tp in self.owned and pos > self.committed_by_me.get(tp, -1)
            }
            if not offsets:
                if kind == "revoke_commit":
                    self._finish_revocation()
                return None
            return OffsetCommitRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                member_epoch=self.epoch,
                partitions=tuple(
                    OffsetCommitPartition(topic=self._data.name_of(t), partition=p, offset=o)
                    for (t, p), o in offsets.items()
                ),
            )

        self._queue.append((kind, build))
        self._send_next()

    def _on_commit(self, kind: str, req: OffsetCommitRequest, r: OffsetCommitResponse) -> None:
        for part in r.partitions:
            if part.error_code == ErrorCode.NONE:
                tp = (self._data.id_of(part.topic), part.partition)
                sent = next(
                    p.offset
                    for p in req.partitions
                    if p.topic == part.topic and p.partition == part.partition
                )
                self.committed_by_me[tp] = max(self.committed_by_me.get(tp, -1), sent)
                self.commits_ok += 1
        if kind == "revoke_commit":
            self._finish_revocation()
        if r.error_code in (ErrorCode.STALE_MEMBER_EPOCH, *FENCED):
            self._queue_heartbeat()

    def _auto_commit(self) -> None:
        if not self.alive:
            return
        self._scheduler.after(AUTO_COMMIT_EVERY_MS, self._auto_commit)
        if self._active() and not self.left and self.epoch > 0:
            self._enforce_lease()
            self._queue_commit(set(self.owned) - self.revoking)

    # --- processing ---------------------------------------------------------------------------

    def _poll(self) -> None:
        if not self.alive:
            return
        self._scheduler.after(POLL_EVERY_MS, self._poll)
        if not self._active():
            return
        self._enforce_lease()
        self._maybe_fetch_positions()
        self._send_next()
        for tp in sorted(self.owned - self.revoking):
            pos = self.positions.get(tp)
            if pos is None:
                continue
            end = min(self._data.end(tp), pos + MAX_RECORDS_PER_POLL)
            if end > pos:
                self._checker.on_processed(self, tp, pos, end)
                self.positions[tp] = end
                self.processed += end - pos


def _tps(parts: set[TP]) -> tuple[TopicPartitions, ...]:
    by: dict[str, list[int]] = {}
    for t, p in sorted(parts):
        by.setdefault(t, []).append(p)
    return tuple(TopicPartitions(topic_id=t, partitions=tuple(ps)) for t, ps in by.items())
