"""A consumer's membership of its group (KIP-848, the ``consumer`` protocol) and its committed
offsets: Kafka's ``ConsumerMembershipManager``, ``ConsumerHeartbeatRequestManager`` and
``CommitRequestManager``, for `replication.clients.consumer.Consumer`.

Theory of operation
-------------------
*Coordinator.* FindCoordinator on any broker names the group's coordinator (the leader of its
``__consumer_offsets`` partition); NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and
COORDINATOR_LOAD_IN_PROGRESS make the member look it up again after ``retry.backoff.ms``.

*Heartbeats.* A thread sends ConsumerGroupHeartbeat every heartbeat interval (the
coordinator's), at once when the owned partitions changed, and never waits on ``poll``: a
member stays alive between polls. The first heartbeat joins (member epoch 0) with a member id
the client draws (KIP-1082), the subscription, ``max.poll.interval.ms`` as the rebalance
timeout and ``group.remote.assignor``; each one carries the partitions the member owns. The
coordinator answers with the member epoch and, when it changed, the member's assignment.

*Reconciliation, in poll.* The heartbeat thread only stores the assignment; `reconcile`,
called from ``poll`` on the application's thread, applies it: partitions no longer assigned are
revoked first (auto-commit commits their positions, then ``on_revoke(consumer, partitions)``),
then new ones are assigned (their committed offsets are fetched, then ``on_assign``). The next
heartbeat reports the new owned set, which is what lets the coordinator hand the revoked
partitions to their new owners: a partition is never owned by two members at once.

*Losing the membership.* FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID (the coordinator expired
the member: its session timed out) mean the partitions are already someone else's: the next
``poll`` calls ``on_lost`` (nothing is committed) and the member joins again with epoch 0. A
member whose poll loop stalls past ``max.poll.interval.ms`` leaves the group by itself (epoch
-1) from the heartbeat thread; its next commit raises `FencedMemberEpochError` saying so, and
its next poll calls ``on_lost`` and joins again.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import structlog

from kraft.types import TopicPartition
from replication.clients.network import BrokerNetwork
from replication.messages import (
    COORDINATOR_KEY_TYPE_GROUP,
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupTopicPartitions,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
)
from storage.errors import (
    ErrorCode,
    FencedMemberEpochError,
    KraftError,
    RequestTimedOutError,
    error_for,
)

if TYPE_CHECKING:
    from replication.clients.config import ConsumerConfig

log = structlog.get_logger("kraft.consumer.group")

COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
"""Look the coordinator up again (after a backoff) and retry."""
_SAME_COORDINATOR = frozenset(
    {
        ErrorCode.STALE_MEMBER_EPOCH,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
    }
)
"""Retried at the same coordinator: a heartbeat brings the new member epoch; the previous
transaction's markers are being written; an offset pending in a transaction is settled by its
end (KIP-447)."""
_LOST_ERRORS = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
_FATAL_HEARTBEAT_ERRORS = frozenset(
    {
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        ErrorCode.INVALID_GROUP_ID,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
    }
)


def find_coordinator(
    network: BrokerNetwork,
    group_id: str,
    *,
    timeout_s: float,
    addresses: Iterable[str] = (),
    key_type: int = COORDINATOR_KEY_TYPE_GROUP,
) -> tuple[int, str]:
    """The coordinator of ``group_id`` (or of a transactional id, with
    ``key_type=COORDINATOR_KEY_TYPE_TRANSACTION``): (node id, address); retried until
    ``timeout_s``.

    Raises:
        KraftError: a non-retriable error, or a retriable one when time is up.
    """

    def check(response: FindCoordinatorResponse) -> None:
        (c,) = response.coordinators
        if c.error_code is not ErrorCode.NONE:
            raise error_for(c.error_code, c.error_message or f"no coordinator for {group_id!r}")

    response = network.call_any(
        "FindCoordinator",
        FindCoordinatorRequest(key_type=key_type, coordinator_keys=(group_id,)),
        FindCoordinatorResponse,
        addresses=addresses,
        timeout_s=timeout_s,
        check=check,
    )
    (c,) = response.coordinators
    return c.node_id, c.address


def commit_topics(offsets: Mapping[TopicPartition, int]) -> tuple[OffsetCommitRequestTopic, ...]:
    """An OffsetCommit's (or TxnOffsetCommit's) topics for ``offsets``, in order."""
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for tp, offset in sorted(offsets.items()):
        by_topic.setdefault(tp.topic, []).append(
            OffsetCommitRequestPartition(partition_index=tp.partition, committed_offset=offset)
        )
    return tuple(OffsetCommitRequestTopic(name=t, partitions=tuple(p)) for t, p in by_topic.items())


def group_partitions(parts: Iterable[TopicPartition]) -> tuple[GroupTopicPartitions, ...]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(parts):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return tuple(GroupTopicPartitions(topic=t, partitions=tuple(p)) for t, p in by_topic.items())


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """A consumer's place in its group, for `Producer.send_offsets_to_transaction` (Kafka's
    ``ConsumerGroupMetadata``, KIP-447): the coordinator refuses the offsets of a member that
    is no longer the group's (a zombie) by its member id and generation (member epoch)."""

    group_id: str
    generation_id: int = -1
    """The member epoch (KIP-848); -1 with ``member_id`` "": not checked."""
    member_id: str = ""
    group_instance_id: str | None = None


class _Backoff(Protocol):
    @property
    def retry_backoff_ms(self) -> int: ...


class GroupClient:
    """Coordinator lookup, OffsetCommit and OffsetFetch for one group (thread-safe); with
    ``key_type=COORDINATOR_KEY_TYPE_TRANSACTION``, the lookup and `retrying` of a transactional
    id's coordinator (`replication.clients.transactions`)."""

    def __init__(
        self,
        network: BrokerNetwork,
        group_id: str,
        config: _Backoff,
        key_type: int = COORDINATOR_KEY_TYPE_GROUP,
    ) -> None:
        self.network = network
        self.group_id = group_id
        self._config = config
        self._key_type = key_type
        self._lock = threading.Lock()
        self._coordinator: str | None = None
        self.coordinator_id = -1
        """The node id of the coordinator last found."""

    def coordinator(self, timeout_s: float) -> str:
        with self._lock:
            if self._coordinator is not None:
                return self._coordinator
        node_id, address = find_coordinator(
            self.network, self.group_id, timeout_s=timeout_s, key_type=self._key_type
        )
        with self._lock:
            self._coordinator, self.coordinator_id = address, node_id
        return address

    def forget_coordinator(self) -> None:
        with self._lock:
            self._coordinator = None

    def retrying(self, timeout_s: float, attempt: Callable[[str], ErrorCode | None]) -> None:
        """Run ``attempt(coordinator)`` until it returns None (done), re-finding the
        coordinator on a coordinator error, until ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        backoff = self._config.retry_backoff_ms / 1000
        last: str = ""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RequestTimedOutError(
                    f"group {self.group_id!r}: no answer within {timeout_s:.0f}s ({last})"
                )
            try:
                address = self.coordinator(remaining)
                code = attempt(address)
            except KraftError as e:
                if not e.retriable or self.network.unreachable() is not None:
                    raise  # NB: nothing listens at any bootstrap address: no use waiting
                code, last = e.code, e.message[:200]
            if code is None:
                return
            last = last or code.name
            if code not in _SAME_COORDINATOR:
                self.forget_coordinator()
            time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))

    def commit(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        member_id: str = "",
        member_epoch: Callable[[], int] = lambda: -1,
        timeout_s: float,
    ) -> None:
        """OffsetCommit ``offsets`` (each the next offset to read).

        Raises:
            FencedMemberEpochError, UnknownMemberIdError, StaleMemberEpochError: the member
                may no longer commit (its partitions are someone else's).
            KraftError: another error for a partition.
        """
        topics = commit_topics(offsets)

        def attempt(address: str) -> ErrorCode | None:
            request = OffsetCommitRequest(
                group_id=self.group_id,
                generation_id_or_member_epoch=member_epoch(),
                member_id=member_id,
                topics=topics,
            )
            response = self.network.call(address, "OffsetCommit", request, OffsetCommitResponse)
            codes = [response.error_code] + [
                p.error_code for t in response.topics for p in t.partitions
            ]
            failed = [c for c in codes if c is not ErrorCode.NONE]
            if not failed:
                return None
            code = failed[0]
            if code in COORDINATOR_ERRORS:
                return code
            if code is ErrorCode.STALE_MEMBER_EPOCH and member_epoch() > 0:
                return code  # a heartbeat brings the new epoch: retry with it
            raise error_for(code, response.error_message or f"OffsetCommit failed: {code.name}")

        self.retrying(timeout_s, attempt)

    def committed(
        self,
        partitions: Iterable[TopicPartition],
        *,
        timeout_s: float,
        require_stable: bool = False,
    ) -> dict[TopicPartition, int | None]:
        """The committed offsets of ``partitions`` (None: nothing committed). With
        ``require_stable`` (a read_committed consumer, KIP-447), an offset pending in an open
        transaction is asked for again until the transaction ends, as Kafka's consumer does."""
        wanted = sorted(set(partitions))
        by_topic: dict[str, list[int]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out: dict[TopicPartition, int | None] = dict.fromkeys(wanted)

        def attempt(address: str) -> ErrorCode | None:
            request = OffsetFetchRequest(
                group_id=self.group_id,
                require_stable=require_stable,
                topics=tuple(
                    OffsetFetchRequestTopic(name=t, partition_indexes=tuple(p))
                    for t, p in by_topic.items()
                ),
            )
            response = self.network.call(address, "OffsetFetch", request, OffsetFetchResponse)
            if response.error_code in COORDINATOR_ERRORS:
                return response.error_code
            if response.error_code is not ErrorCode.NONE:
                raise error_for(response.error_code, response.error_message)
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code in COORDINATOR_ERRORS or (
                        p.error_code is ErrorCode.UNSTABLE_OFFSET_COMMIT
                    ):
                        return p.error_code
                    if p.error_code is not ErrorCode.NONE:
                        raise error_for(p.error_code, f"OffsetFetch {tp}")
                    if tp in out:
                        out[tp] = p.committed_offset if p.committed_offset >= 0 else None
            return None

        if wanted:
            self.retrying(timeout_s, attempt)
        return out


class GroupMembership:
    """One consumer's membership of its group: the heartbeat thread and the assignment it
    received (applied by the consumer's ``poll``, see the module docstring)."""

    def __init__(self, client: GroupClient, config: ConsumerConfig, topics: Iterable[str]) -> None:
        self.client = client
        self._config = config
        self.member_id = uuid.uuid4().hex  # KIP-1082: the client draws its member id
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self._topics = tuple(sorted(set(topics)))
        self._cond = threading.Condition()
        self._owned: frozenset[TopicPartition] = frozenset()
        self._target: frozenset[TopicPartition] | None = None  # a new assignment to apply
        self._lost = False
        self._left_for_poll_timeout = False
        self._fatal: KraftError | None = None
        self._interval_s = config.heartbeat_interval_ms / 1000
        self._heartbeat_now = True
        self._last_poll = time.monotonic()
        self._stopping = False
        self._thread = threading.Thread(
            target=self._run, name=f"kraft-heartbeat-{client.group_id}", daemon=True
        )
        self._thread.start()

    # --- the application's thread (poll) -------------------------------------------------------

    def polled(self) -> None:
        """``poll`` was called: the member is alive for ``max.poll.interval.ms`` more."""
        with self._cond:
            self._last_poll = time.monotonic()
            if self._left_for_poll_timeout:
                self._left_for_poll_timeout = False
                self._lost = True  # applied by take_changes: on_lost, then rejoin

    def take_changes(self) -> tuple[bool, frozenset[TopicPartition] | None]:
        """(lost, new target assignment or None); raises a fatal heartbeat error."""
        with self._cond:
            if self._fatal is not None:
                raise self._fatal
            lost, target = self._lost, self._target
            self._lost = False
            self._target = None
            if lost:
                target = None
                self._owned = frozenset()
                self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
                self._heartbeat_now = True
                self._cond.notify_all()
            return lost, target

    def set_owned(self, owned: Iterable[TopicPartition]) -> None:
        """The partitions the consumer now owns; reported by the next heartbeat, at once."""
        with self._cond:
            self._owned = frozenset(owned)
            self._heartbeat_now = True
            self._cond.notify_all()

    def epoch_for_commit(self) -> int:
        """The member epoch to commit with.

        Raises:
            FencedMemberEpochError: the member left the group after a stalled poll loop.
        """
        with self._cond:
            if self._left_for_poll_timeout:
                raise FencedMemberEpochError(
                    f"this consumer left group {self.client.group_id!r}: poll() was not called "
                    f"within max.poll.interval.ms={self._config.max_poll_interval_ms}, so its "
                    "partitions were revoked and may be consumed by another member; poll() "
                    "again to rejoin"
                )
            return self.member_epoch

    def close(self, timeout_s: float = 5.0) -> None:
        """Leave the group (a heartbeat with epoch -1) and stop the heartbeat thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout_s + 1)

    # --- the heartbeat thread -----------------------------------------------------------------

    def _run(self) -> None:
        next_at = time.monotonic()
        while True:
            with self._cond:
                while not self._stopping and not self._heartbeat_now:
                    wait = next_at - time.monotonic()
                    stalled = self._poll_deadline() - time.monotonic()
                    if wait <= 0 or stalled <= 0:
                        break
                    self._cond.wait(min(wait, max(stalled, 0.01)))
                if self._stopping:
                    break
                if (
                    time.monotonic() >= self._poll_deadline()
                    and self.member_epoch > 0
                    and not self._left_for_poll_timeout
                ):
                    self._leave_for_poll_timeout()
                    continue
                if self._left_for_poll_timeout or self._lost or self._fatal is not None:
                    self._cond.wait(0.1)
                    continue
                self._heartbeat_now = False
                request = self._request()
            delay = self._send(request)
            next_at = time.monotonic() + delay
        self._leave()

    def _poll_deadline(self) -> float:
        return self._last_poll + self._config.max_poll_interval_ms / 1000

    def _request(self, epoch: int | None = None) -> ConsumerGroupHeartbeatRequest:
        return ConsumerGroupHeartbeatRequest(
            group_id=self.client.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch if epoch is None else epoch,
            rebalance_timeout_ms=self._config.max_poll_interval_ms,
            subscribed_topic_names=self._topics,
            server_assignor=self._config.group_remote_assignor,
            owned_partitions=group_partitions(self._owned),
            client_id=self._config.client_id,
        )

    def _send(self, request: ConsumerGroupHeartbeatRequest) -> float:
        """One heartbeat; the seconds until the next."""
        backoff = self._config.retry_backoff_ms / 1000
        try:
            address = self.client.coordinator(self._config.request_timeout_ms / 1000)
            response = self.client.network.call(
                address,
                "ConsumerGroupHeartbeat",
                request,
                ConsumerGroupHeartbeatResponse,
                timeout_s=min(self._config.request_timeout_ms / 1000, 10.0),
            )
        except KraftError as e:
            log.info("heartbeat_failed", group=self.client.group_id, error=str(e)[:200])
            self.client.forget_coordinator()
            return backoff
        code = response.error_code
        with self._cond:
            if request.member_epoch != self.member_epoch:
                return 0.0  # the member was reset meanwhile (lost): send afresh
            if code is ErrorCode.NONE:
                self.member_epoch = response.member_epoch
                if response.heartbeat_interval_ms > 0:
                    self._interval_s = response.heartbeat_interval_ms / 1000
                if response.assignment is not None:
                    self._target = frozenset(
                        TopicPartition(t.topic, p)
                        for t in response.assignment
                        for p in t.partitions
                    )
                return self._interval_s
            if code in COORDINATOR_ERRORS:
                self.client.forget_coordinator()
                return backoff
            if code in _LOST_ERRORS:
                log.warning("group_membership_lost", group=self.client.group_id, error=code.name)
                self._lost = True
                self._target = None
                return backoff
            if code in _FATAL_HEARTBEAT_ERRORS:
                self._fatal = error_for(code, response.error_message or code.name)
                return backoff
        log.warning("heartbeat_error", group=self.client.group_id, error=code.name)
        return backoff

    def _leave_for_poll_timeout(self) -> None:
        """Called with the lock held: leave, and tell the application on its next commit."""
        log.warning(
            "poll_timeout_left_group",
            group=self.client.group_id,
            max_poll_interval_ms=self._config.max_poll_interval_ms,
        )
        self._left_for_poll_timeout = True
        request = self._request(LEAVE_GROUP_MEMBER_EPOCH)
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self._cond.release()
        try:
            self._send_leave(request)
        finally:
            self._cond.acquire()

    def _leave(self) -> None:
        with self._cond:
            if self.member_epoch <= 0:
                return
            request = self._request(LEAVE_GROUP_MEMBER_EPOCH)
        self._send_leave(request)

    def _send_leave(self, request: ConsumerGroupHeartbeatRequest) -> None:
        try:
            address = self.client.coordinator(2.0)
            self.client.network.call(
                address,
                "ConsumerGroupHeartbeat",
                request,
                ConsumerGroupHeartbeatResponse,
                timeout_s=2.0,
            )
        except KraftError as e:  # the session timeout removes it instead
            log.info("leave_group_failed", group=self.client.group_id, error=str(e)[:200])


__all__ = [
    "COORDINATOR_ERRORS",
    "ConsumerGroupMetadata",
    "GroupClient",
    "GroupMembership",
    "commit_topics",
    "find_coordinator",
    "group_partitions",
]
