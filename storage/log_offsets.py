"""A log's two checkpointed offsets: the log start offset and the recovery point.

Theory of operation
-------------------
`LogOffsets` holds each offset together with what its checkpoint file says now:

- the *log start offset* (``log-start-offset-checkpoint``): the first offset the log
  serves. It only moves up; every move is checkpointed before the call that made it returns
  (`checkpoint_log_start`), so a reopened log never serves what was deleted.
- the *recovery point* (``recovery-point-offset-checkpoint``): every offset below it is
  durable. A flush raises it to the log end offset and, unless it was an append's own
  flush, checkpoints it (`checkpoint_recovery_point`). Truncation and a corrupt read lower
  it (`lower_recovery_point`); a lowered point is checkpointed at once when the file says
  more, so the next open re-validates everything above it.

Invariant (outside a failed log): checkpointed recovery point <= recovery point. Recovery
(`storage.log_loader`) trusts segments wholly below the checkpointed one.

Writes are atomic and durable (`storage.checkpoint.write_offset`); an ``OSError`` passes to
the log's disk-error boundary (`storage.log_health`).
"""

from __future__ import annotations

from pathlib import Path
from typing import final

from storage.checkpoint import write_offset
from storage.log_loader import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT


@final
class LogOffsets:
    """The log start offset and recovery point of the log in ``directory``, as loaded; the
    ``checkpointed_*`` values are what the files held (None: no file)."""

    __slots__ = (
        "_checkpointed_log_start_offset",
        "_checkpointed_recovery_point",
        "_directory",
        "_log_start_offset",
        "_recovery_point",
    )

    def __init__(
        self,
        directory: Path,
        *,
        log_start_offset: int,
        recovery_point: int,
        checkpointed_log_start_offset: int | None,
        checkpointed_recovery_point: int | None,
    ) -> None:
        self._directory = directory
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._checkpointed_log_start_offset = checkpointed_log_start_offset
        self._checkpointed_recovery_point = checkpointed_recovery_point

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def checkpointed_recovery_point(self) -> int:
        """The recovery point the checkpoint file holds (0 without one)."""
        return self._checkpointed_recovery_point or 0

    def set_log_start_offset(self, offset: int) -> None:
        """Move the start (the caller checkpoints it with `checkpoint_log_start`)."""
        self._log_start_offset = offset

    def flushed_to(self, offset: int, *, checkpoint: bool) -> None:
        """Everything below ``offset`` is durable now; checkpoint it if asked and changed."""
        self._recovery_point = offset
        if checkpoint and self._checkpointed_recovery_point != offset:
            self._write_recovery_point()

    def lower_recovery_point(self, offset: int) -> None:
        """Nothing at or above ``offset`` is trusted any more: lower the recovery point to it,
        and the checkpoint file too if it says more."""
        self._recovery_point = min(self._recovery_point, offset)
        if self.checkpointed_recovery_point > self._recovery_point:
            self._write_recovery_point()

    def reset_at(self, offset: int) -> None:
        """The log restarts empty at ``offset``: both offsets are ``offset``, durably."""
        self._log_start_offset = self._recovery_point = offset
        self._write_log_start()
        self._write_recovery_point()

    def checkpoint_log_start(self, *, if_changed: bool = False) -> None:
        """Write the log start offset (only if the file differs, with ``if_changed``)."""
        if not if_changed or self._checkpointed_log_start_offset != self._log_start_offset:
            self._write_log_start()

    def _write_log_start(self) -> None:
        write_offset(self._directory / LOG_START_OFFSET_CHECKPOINT, self._log_start_offset)
        self._checkpointed_log_start_offset = self._log_start_offset

    def _write_recovery_point(self) -> None:
        write_offset(self._directory / RECOVERY_POINT_CHECKPOINT, self._recovery_point)
        self._checkpointed_recovery_point = self._recovery_point


__all__ = ["LogOffsets"]
