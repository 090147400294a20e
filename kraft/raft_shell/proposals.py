"""`Proposals`: the futures of proposed entries, settled by what commits.

Raft decides; this class only reads the outcome. By Raft's log matching, a proposal made in
epoch E is committed exactly when the committed batch holding its last offset was written in
E; once the log has committed past a proposal in another epoch's batch, it was lost with the
leadership. A node that is no longer leader cannot tell whether its uncommitted entries will
survive on the new leader, so those fail at once (KIP-595: the caller hears NOT_CONTROLLER and
retries; the entry may still commit).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from kraft.raft_shell.state_machine import AppliedBatch


@dataclass(slots=True)
class _Proposal:
    first: int
    last: int
    epoch: int
    future: asyncio.Future[int]
    proposed_ms: int


class Proposals:
    """Futures of proposals in offset order; each resolves with its first offset or fails
    with the error ``not_leader()`` builds (the shell's NOT_CONTROLLER, with a leader hint).
    ``on_committed(ms)`` hears, once per committed batch that settles proposals, how long the
    oldest of them took (``clock`` milliseconds from `add` to the commit): as Kafka records its
    commit latency once per batch, not per record, which also keeps a clock read and a histogram
    update off each of 100,000 proposals a second."""

    def __init__(
        self,
        not_leader: Callable[[], Exception],
        *,
        clock: Callable[[], int] = lambda: 0,
        on_committed: Callable[[int], None] = lambda _ms: None,
    ) -> None:
        self._pending: deque[_Proposal] = deque()
        self._not_leader = not_leader
        self._clock = clock
        self._on_committed = on_committed

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, first: int, count: int, epoch: int, future: asyncio.Future[int]) -> None:
        """Track entries [first, first + count) proposed in ``epoch``."""
        self._pending.append(_Proposal(first, first + count - 1, epoch, future, self._clock()))

    def committed(self, batch: AppliedBatch) -> None:
        """Settle proposals that end in the committed ``batch``."""
        props = self._pending
        oldest_ms: int | None = None
        while props and props[0].last < batch.end_offset:
            p = props.popleft()
            if p.future.done():
                continue
            if p.last >= batch.base_offset and batch.epoch == p.epoch:
                p.future.set_result(p.first)
                if oldest_ms is None:
                    oldest_ms = p.proposed_ms
            else:
                p.future.set_exception(self._not_leader())
        if oldest_ms is not None:
            self._on_committed(self._clock() - oldest_ms)

    def settle(self, *, is_leader: bool, epoch: int, high_watermark: int) -> None:
        """After a Ready: fail proposals of an epoch we no longer lead once the log moved past
        them, and all uncommitted ones if we no longer lead."""
        props = self._pending
        if is_leader and props and props[0].epoch == epoch:
            return
        while props and props[0].epoch != epoch and props[0].last < high_watermark:
            p = props.popleft()
            if not p.future.done():
                p.future.set_exception(self._not_leader())
        if not is_leader:
            while props and props[0].last >= high_watermark:
                p = props.popleft()
                if not p.future.done():
                    p.future.set_exception(self._not_leader())

    def fail_all(self, error: Exception) -> None:
        """The driver stopped or died: nothing pending will be settled by a commit."""
        for p in self._pending:
            if not p.future.done():
                p.future.set_exception(error)
        self._pending.clear()


__all__ = ["Proposals"]
