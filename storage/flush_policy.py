"""When a log flushes by itself: Kafka's ``flush.messages`` and ``flush.ms``.

Theory of operation
-------------------
`FlushPolicy` counts the records appended since the last flush and remembers when that flush
was. After each append the log asks `on_appended` ("flush now?"): yes once ``flush.messages``
records are unflushed, or ``flush.ms`` has passed since the last flush. A periodic tick asks
`is_due` (time only: the log itself knows whether anything is unflushed). Whoever flushes
tells the policy with `flushed`, which restarts both counts.

The policy does no I/O and reads no clock: ``now_ms`` comes in. With ``sync_every_append``
the log syncs each append itself and never consults the policy (Kafka's defaults leave both
settings at "never", the replication being the durability).
"""

from __future__ import annotations

from typing import final

from storage.config import LONG_MAX, LogConfig


@final
class FlushPolicy:
    """The ``flush.messages`` / ``flush.ms`` counters of one log.

    Args:
        config: the log's settings (``flush.messages``, ``flush.ms``).
        now_ms: the time of the last flush (the log's open counts as one).
    """

    __slots__ = ("_flush_messages", "_flush_ms", "_last_flush_ms", "_unflushed_messages")

    def __init__(self, config: LogConfig, now_ms: int) -> None:
        self._flush_messages = config.flush_messages
        self._flush_ms = config.flush_ms
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms

    @property
    def unflushed_messages(self) -> int:
        """Records appended since the last flush."""
        return self._unflushed_messages

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    def update_config(self, config: LogConfig) -> None:
        """A changed config governs the next decision (Kafka's ``updateConfig``)."""
        self._flush_messages = config.flush_messages
        self._flush_ms = config.flush_ms

    def on_appended(self, records: int, now_ms: int) -> bool:
        """Count ``records`` just appended; True if the log must flush now."""
        self._unflushed_messages += records
        return (
            self._unflushed_messages >= self._flush_messages
            or now_ms - self._last_flush_ms >= self._flush_ms
        )

    def due_at_ms(self) -> int | None:
        """When ``flush.ms`` will have passed since the last flush (None: ``flush.ms`` is off)."""
        if self._flush_ms >= LONG_MAX:
            return None
        return self._last_flush_ms + self._flush_ms

    def is_due(self, now_ms: int) -> bool:
        """True if ``flush.ms`` has passed since the last flush (the periodic check)."""
        return now_ms - self._last_flush_ms >= self._flush_ms

    def flushed(self, now_ms: int) -> None:
        """The log flushed everything at ``now_ms``."""
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms

    def __repr__(self) -> str:
        return (
            f"FlushPolicy(unflushed_messages={self._unflushed_messages}, "
            f"last_flush_ms={self._last_flush_ms})"
        )


__all__ = ["FlushPolicy"]
