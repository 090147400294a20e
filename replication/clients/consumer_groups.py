"""The consumer-group half of `replication.clients.consumer.Consumer`: ``subscribe``,
``unsubscribe``, ``commit``, ``committed`` and the reconciliation ``poll`` runs (a mixin: the
membership and its heartbeat thread are `replication.clients.group_membership`'s)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import structlog

from kraft.types import TopicPartition
from replication.clients.group_membership import GroupClient, GroupMembership
from storage.errors import KraftError

if TYPE_CHECKING:
    from replication.clients.config import ConsumerConfig
    from replication.clients.metadata import MetadataCache

log = structlog.get_logger("kraft.consumer")

Rebalance = Callable[["GroupConsumer", set[TopicPartition]], object]
"""``on_assign`` / ``on_revoke`` / ``on_lost`` of ``subscribe``: ``cb(consumer, partitions)``."""


class GroupConsumer:
    """The group methods of `Consumer` (which sets these attributes)."""

    config: ConsumerConfig
    _lock: threading.RLock
    _positions: dict[TopicPartition, int | None]
    _metadata: MetadataCache
    _group: GroupClient | None
    _membership: GroupMembership | None
    _callbacks: dict[str, Rebalance | None]
    _next_auto_commit: float
    _commits: ThreadPoolExecutor | None = None

    def _assign(self, partitions: Iterable[TopicPartition]) -> None:  # pragma: no cover
        raise NotImplementedError

    def subscribe(
        self,
        topics: Iterable[str],
        on_assign: Rebalance | None = None,
        on_revoke: Rebalance | None = None,
        on_lost: Rebalance | None = None,
    ) -> None:
        """Join ``group_id`` for ``topics``: the group coordinator assigns the partitions.
        The callbacks run inside ``poll`` as ``cb(consumer, partitions)``."""
        if self._group is None:
            raise ValueError("subscribe() needs a group_id")
        names = sorted(set(topics))
        with self._lock:
            self._stop_membership(revoke=True)
            self._assign([])
            self._callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
            self._metadata.add_topics(names)
            self._membership = GroupMembership(self._group, self.config, names)

    def unsubscribe(self) -> None:
        """Revoke every partition (committing first with ``enable.auto.commit``), leave."""
        with self._lock:
            self._stop_membership(revoke=True)
            self._assign([])

    def _stop_membership(self, *, revoke: bool) -> None:
        membership = self._membership
        if membership is None:
            return
        owned = set(self._positions)
        try:
            if revoke and owned:
                self._revoke(owned)  # commits as the member (auto-commit), then on_revoke
        finally:
            self._membership = None
            membership.close()

    def commit(
        self, offsets: Mapping[TopicPartition, int] | None = None, asynchronous: bool = False
    ) -> None:
        """Commit ``offsets`` (each the next offset to read; default: the position of every
        assigned partition) to the group.

        Raises:
            FencedMemberEpochError: the member lost its partitions (a stalled poll loop, an
                expired session); nothing was committed.
            KraftError: the commit failed (asynchronous commits log failures instead).
        """
        with self._lock:
            to_commit = self._positions_to_commit(offsets)
            group, membership = self._group, self._membership
            if group is None:
                raise ValueError("commit() needs a group_id")
            member_id = membership.member_id if membership is not None else ""
            if membership is not None:
                membership.epoch_for_commit()  # raises if the member left
            epoch = membership.epoch_for_commit if membership is not None else (lambda: -1)
        timeout_s = self.config.default_api_timeout_ms / 1000

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
        if self._group is None:
            raise ValueError("committed() needs a group_id")
        return self._group.committed(
            partitions, timeout_s=self.config.default_api_timeout_ms / 1000
        )

    def _positions_to_commit(
        self, offsets: Mapping[TopicPartition, int] | None
    ) -> dict[TopicPartition, int]:
        if offsets is not None:
            return dict(offsets)
        return {tp: p for tp, p in self._positions.items() if p is not None}

    def _commit_quietly(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        try:
            self.commit(offsets)
        except KraftError as e:
            log.warning("auto_commit_failed", error=str(e)[:200])

    def _revoke(self, partitions: set[TopicPartition]) -> None:
        if self.config.enable_auto_commit:
            self._commit_quietly(self._positions_to_commit(None))
        self._callback("revoke", partitions)
        self._assign([tp for tp in self._positions if tp not in partitions])

    def _callback(self, name: str, partitions: set[TopicPartition]) -> None:
        cb = self._callbacks.get(name)
        if cb is not None:
            cb(self, set(partitions))

    def _group_poll(self) -> None:
        """Apply what the heartbeat thread received; auto-commit when due."""
        membership = self._membership
        if membership is not None:
            membership.polled()
            lost, target = membership.take_changes()
            if lost:
                owned = set(self._positions)
                self._assign([])
                self._callback("lost", owned)
            if target is not None:
                owned = set(self._positions)
                revoked = owned - target
                if revoked:
                    self._revoke(revoked)
                    membership.set_owned(self._positions)
                added = set(target) - set(self._positions)
                if added:
                    self._take_partitions(added)
                    membership.set_owned(self._positions)
                    self._callback("assign", added)
        if (
            self._group is not None
            and self.config.enable_auto_commit
            and time.monotonic() >= self._next_auto_commit
        ):
            self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
            self._commit_quietly(self._positions_to_commit(None))

    def _take_partitions(self, added: set[TopicPartition]) -> None:
        """Assign ``added`` at their committed offsets (else ``auto.offset.reset``)."""
        assert self._group is not None
        committed = self._group.committed(
            added, timeout_s=self.config.default_api_timeout_ms / 1000
        )
        self._assign([*self._positions, *sorted(added)])
        for tp, offset in committed.items():
            if offset is not None:
                self._positions[tp] = offset


__all__ = ["GroupConsumer", "Rebalance"]
