"""`ConsumerCoordinator`: the group side of a `replication.clients.consumer.Consumer` with a
``group_id`` (Kafka's client-side ``ConsumerCoordinator``): ``subscribe``, ``unsubscribe``,
``commit``, ``committed``, auto-commit and the reconciliation ``poll`` runs. The membership and
its heartbeat thread are `replication.clients.group_membership`'s.

It owns the group state (the membership, the rebalance callbacks, the auto-commit deadline, the
commit thread) and reaches the consumer's partitions only through `OwnedPartitions`: read the
positions, assign, seek, add metadata topics, and the consumer's lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

import structlog

from kraft.types import TopicPartition
from replication.clients.group_membership import (
    ConsumerGroupMetadata,
    GroupClient,
    GroupMembership,
)
from storage.errors import KraftError

if TYPE_CHECKING:
    from replication.clients.config import ConsumerConfig
    from replication.clients.consumer import Consumer

log = structlog.get_logger("kraft.consumer")

Rebalance = Callable[["Consumer", set[TopicPartition]], object]
"""``on_assign`` / ``on_revoke`` / ``on_lost`` of ``subscribe``: ``cb(consumer, partitions)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnedPartitions:
    """What a `ConsumerCoordinator` may read and change of its consumer (Kafka's
    ``SubscriptionState``, as the coordinator sees it)."""

    lock: threading.RLock
    """The consumer's lock: held while the coordinator reads or changes the assignment."""
    positions: Callable[[], dict[TopicPartition, int | None]]
    """A copy of the assigned partitions and their positions (None: not known yet)."""
    assign: Callable[[Iterable[TopicPartition]], None]
    """Replace the assignment (positions of partitions that stay are kept)."""
    seek: Callable[[TopicPartition, int], None]
    """Set the position of an assigned partition."""
    add_topics: Callable[[Iterable[str]], object]
    """Keep the metadata of these topics."""


@final
class ConsumerCoordinator:
    """A consumer's group: its membership (while subscribed), rebalance callbacks, commits
    (in order, on one thread) and auto-commit. Every method runs under the consumer's lock
    except the wait of a synchronous commit.

    Args:
        client: the group's coordinator lookup, OffsetCommit and OffsetFetch.
        config: the consumer's config.
        partitions: the consumer's assignment and positions.
        consumer: passed to the rebalance callbacks as their first argument.
    """

    __slots__ = (
        "_callbacks",
        "_client",
        "_commits",
        "_config",
        "_consumer",
        "_membership",
        "_next_auto_commit",
        "_partitions",
    )

    def __init__(
        self,
        client: GroupClient,
        config: ConsumerConfig,
        partitions: OwnedPartitions,
        consumer: Consumer,
    ) -> None:
        self._client = client
        self._config = config
        self._partitions = partitions
        self._consumer = consumer
        self._membership: GroupMembership | None = None
        self._callbacks: dict[str, Rebalance | None] = {}
        self._next_auto_commit = time.monotonic() + config.auto_commit_interval_ms / 1000
        self._commits: ThreadPoolExecutor | None = None

    @property
    def subscribed(self) -> bool:
        return self._membership is not None

    def subscribe(
        self,
        topics: Iterable[str],
        on_assign: Rebalance | None = None,
        on_revoke: Rebalance | None = None,
        on_lost: Rebalance | None = None,
    ) -> None:
        """Join the group for ``topics`` (see `Consumer.subscribe`)."""
        names = sorted(set(topics))
        with self._partitions.lock:
            self._stop_membership(revoke=True)
            self._partitions.assign([])
            self._callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
            self._partitions.add_topics(names)
            self._membership = GroupMembership(self._client, self._config, names)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The member's id and epoch now (KIP-447; -1 and "" when not a member)."""
        membership = self._membership
        if membership is None:
            return ConsumerGroupMetadata(self._client.group_id)
        return ConsumerGroupMetadata(
            self._client.group_id, membership.member_epoch, membership.member_id
        )

    def unsubscribe(self) -> None:
        """Revoke every partition (committing first with ``enable.auto.commit``), leave."""
        with self._partitions.lock:
            self._stop_membership(revoke=True)
            self._partitions.assign([])

    def close(self) -> None:
        """Commit (with ``enable.auto.commit``), leave the group, wait for the commits."""
        with self._partitions.lock:
            try:
                if self._membership is not None:
                    self._stop_membership(revoke=True)
                elif self._config.enable_auto_commit:
                    self._commit_quietly(self._positions_to_commit(None))
            finally:
                self._close_commits()

    def _stop_membership(self, *, revoke: bool) -> None:
        membership = self._membership
        if membership is None:
            return
        owned = set(self._partitions.positions())
        try:
            if revoke and owned:
                self._revoke(owned)  # commits as the member (auto-commit), then on_revoke
        finally:
            self._membership = None
            membership.close()

    def commit(
        self, offsets: Mapping[TopicPartition, int] | None = None, asynchronous: bool = False
    ) -> None:
        """Commit ``offsets`` (default: every assigned partition's position); see
        `Consumer.commit` for what raises."""
        with self._partitions.lock:
            to_commit = self._positions_to_commit(offsets)
            group, membership = self._client, self._membership
            member_id = membership.member_id if membership is not None else ""
            if membership is not None:
                membership.epoch_for_commit()  # raises if the member left
            epoch = membership.epoch_for_commit if membership is not None else (lambda: -1)
        timeout_s = self._config.default_api_timeout_ms / 1000

        def run() -> None:
            group.commit(to_commit, member_id=member_id, member_epoch=epoch, timeout_s=timeout_s)

        # One thread runs every commit in the order asked, so an asynchronous commit never
        # lands after a later one (committed offsets never go back), as Kafka orders them.
        if self._commits is None:
            self._commits = ThreadPoolExecutor(1, thread_name_prefix="kraft-commit")
        if not asynchronous:
            self._commits.submit(run).result()
            return

        def background() -> None:
            try:
                run()
            except KraftError as e:
                log.warning("async_commit_failed", group=group.group_id, error=str(e)[:200])

        self._commits.submit(background)

    def _close_commits(self) -> None:
        """Wait for the asynchronous commits still running (each bounded by its timeout)."""
        commits, self._commits = self._commits, None
        if commits is not None:
            commits.shutdown(wait=True)

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets of ``partitions`` (None: nothing committed)."""
        return self._client.committed(
            partitions,
            timeout_s=self._config.default_api_timeout_ms / 1000,
            require_stable=self._config.isolation_level == "read_committed",
        )

    def _positions_to_commit(
        self, offsets: Mapping[TopicPartition, int] | None
    ) -> dict[TopicPartition, int]:
        if offsets is not None:
            return dict(offsets)
        return {tp: p for tp, p in self._partitions.positions().items() if p is not None}

    def _commit_quietly(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        try:
            self.commit(offsets)
        except KraftError as e:
            log.warning("auto_commit_failed", error=str(e)[:200])

    def _revoke(self, partitions: set[TopicPartition]) -> None:
        if self._config.enable_auto_commit:
            self._commit_quietly(self._positions_to_commit(None))
        self._callback("revoke", partitions)
        self._partitions.assign([tp for tp in self._partitions.positions() if tp not in partitions])

    def _callback(self, name: str, partitions: set[TopicPartition]) -> None:
        cb = self._callbacks.get(name)
        if cb is not None:
            cb(self._consumer, set(partitions))

    def poll(self) -> None:
        """Apply what the heartbeat thread received; auto-commit when due. Called by
        ``Consumer.poll`` with the consumer's lock held."""
        membership = self._membership
        if membership is not None:
            membership.polled()
            lost, target = membership.take_changes()
            if lost:
                owned = set(self._partitions.positions())
                self._partitions.assign([])
                self._callback("lost", owned)
            if target is not None:
                owned = set(self._partitions.positions())
                revoked = owned - target
                if revoked:
                    self._revoke(revoked)
                    membership.set_owned(self._partitions.positions())
                added = set(target) - set(self._partitions.positions())
                if added:
                    self._take_partitions(added)
                    membership.set_owned(self._partitions.positions())
                    self._callback("assign", added)
        if self._config.enable_auto_commit and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + self._config.auto_commit_interval_ms / 1000
            self._commit_quietly(self._positions_to_commit(None))

    def _take_partitions(self, added: set[TopicPartition]) -> None:
        """Assign ``added`` at their committed offsets (else ``auto.offset.reset``)."""
        committed = self.committed(added)
        self._partitions.assign([*self._partitions.positions(), *sorted(added)])
        for tp, offset in committed.items():
            if offset is not None:
                self._partitions.seek(tp, offset)


__all__ = ["ConsumerCoordinator", "OwnedPartitions", "Rebalance"]
