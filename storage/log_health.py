"""The disk-error boundary of a log: open, closed or failed, and the one place ``OSError``
becomes `KafkaStorageError`.

Theory of operation
-------------------
Every ``OSError`` of a log's I/O (ENOSPC, EIO, a vanished directory) becomes
`KafkaStorageError` in one place: `LogHealth.failed_by`, which `maps_storage_errors` calls for
each public method of `storage.log.SegmentedLog` (`SegmentedLog.append`, the hot path, calls it
itself, without the decorator's frame); the callers never see an ``OSError``. What the log
looks like afterwards:

- An append whose write failed is undone (the file is cut back to where it was): the log is
  as before the call, nothing of it is visible, and the next append may succeed once the
  disk has room again.
- Any other failure (a failed fsync, truncation, checkpoint or index write, a failed undo)
  leaves the log *failed* (`LogHealth.fail`): every later call raises `KafkaStorageError`
  until it is abandoned and opened again, which recovers it from disk. Kafka takes the whole
  log directory offline at this point; the broker takes this replica offline (see
  ``replication.broker``).
- Every read validates what it returns (see `storage.log_read`): a batch corrupted on disk is
  never served, the read raises `CorruptRecordError` instead (the log stays usable: the
  caller decides). A caller that has another copy calls `SegmentedLog.fail_corrupt`: the
  recovery point drops to that segment's base offset, so the next open re-validates it and
  cuts it at the corrupt batch, and the log fails.

`LogHealth` holds the two facts every call checks first (`check_open`): whether the log was
closed, and the error that failed it. A failed log stays failed: the first error is kept.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar, final

from structlog.typing import FilteringBoundLogger

from storage.errors import KafkaStorageError, LogClosedError
from storage.file_io import storage_error


@final
class LogHealth:
    """Whether the log in ``directory`` still serves calls."""

    __slots__ = ("_closed", "_directory", "_failed", "_log", "serving")

    def __init__(self, directory: Path, logger: FilteringBoundLogger) -> None:
        self._directory = directory
        self._log = logger
        self._closed = False
        self._failed: KafkaStorageError | None = None
        self.serving = True
        """Neither closed nor failed: hot paths test this one attribute and call
        `check_open` (which raises) only when it is False."""

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def failed(self) -> KafkaStorageError | None:
        """The error that failed the log, or None if it works."""
        return self._failed

    def mark_closed(self) -> None:
        self._closed = True
        self.serving = False

    def check_open(self) -> None:
        """Raises:
        KafkaStorageError: the log failed (with the failure's message).
        LogClosedError: the log is closed.
        """
        if self._failed is not None:
            raise KafkaStorageError(self._failed.message)
        if self._closed:
            raise LogClosedError(f"log {self._directory} is closed")

    def fail(self, error: KafkaStorageError) -> KafkaStorageError:
        """Fail the log (every later call raises the first failure's message); returns
        ``error`` for the caller to raise."""
        if self._failed is None:
            self._failed = error
            self.serving = False
            self._log.error("log_failed", error=error.message)
        return error

    def failed_by(self, error: OSError, op: str) -> KafkaStorageError:
        """Fail the log with ``error`` of ``op`` as `KafkaStorageError`; returns it to raise."""
        return self.fail(storage_error(error, op, self._directory))


class HasLogHealth(Protocol):
    """A log whose public methods `maps_storage_errors` wraps."""

    _health: LogHealth


S = TypeVar("S", bound=HasLogHealth)
P = ParamSpec("P")
R = TypeVar("R")


def maps_storage_errors(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """An ``OSError`` of ``method`` fails the log and raises `KafkaStorageError` instead."""

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except OSError as e:
            raise self._health.failed_by(e, method.__name__) from e

    return wrapper


__all__ = ["HasLogHealth", "LogHealth", "maps_storage_errors"]
