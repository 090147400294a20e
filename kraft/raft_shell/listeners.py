"""`LeaderListeners`: callbacks told of every change of (leader id, epoch)."""

from __future__ import annotations

from collections.abc import Callable

from structlog.typing import FilteringBoundLogger

LeaderListener = Callable[[int | None, int], None]


class LeaderListeners:
    """Calls each listener with (leader id or None, epoch) when either changes; a listener
    that raises is logged and the others still run."""

    def __init__(self, log: FilteringBoundLogger) -> None:
        self._log = log
        self._listeners: list[LeaderListener] = []
        self._last: tuple[int | None, int] = (None, -1)

    def add(self, fn: LeaderListener) -> None:
        self._listeners.append(fn)

    def observe(self, leader_id: int | None, epoch: int) -> None:
        current = (leader_id, epoch)
        if current == self._last:
            return
        self._last = current
        self._log.info("leader_changed", leader_id=leader_id, epoch=epoch)
        for fn in self._listeners:
            try:
                fn(leader_id, epoch)
            except Exception:
                self._log.exception("leader_listener_failed")


__all__ = ["LeaderListener", "LeaderListeners"]
