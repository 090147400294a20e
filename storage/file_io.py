"""`FileIO`: the system calls a log segment makes, and the seam where tests inject disk faults.

A `SegmentedLog` and its `LogSegment`s do their data I/O through one `FileIO` (open, write,
writev, pread, fsync, fdatasync, ftruncate). In production it is `FileIO` itself: the ``os``
functions, nothing else. Tests inject faults two ways:

- in process: pass a `FileIO` subclass to ``SegmentedLog.open(..., file_io=...)`` (see
  `FailingFileIO`);
- across processes: set the environment variable `TEST_FAULTS_ENV` (``KRAFT_TEST_FAULTS``) to
  a directory before starting a broker. Every log it opens then checks that directory for
  *fault files* (`arm_fault` writes one, `clear_fault` removes it): a fault names a log
  directory, an errno and the operations that fail (`ENOSPC_OPS`, `WRITE_OPS`, `READ_OPS`).
  It costs one ``stat`` of the fault directory per operation, so it is for tests only;
  without the variable nothing is checked.

An ``OSError`` from here becomes `storage.errors.KafkaStorageError` through `storage_error`, the
one mapping, which the log applies at its boundary (``storage.log``); callers never see one.
`probe_log_directory` checks that a directory whose log failed takes writes again.
"""

from __future__ import annotations

import contextlib
import errno as errno_module
import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from storage.errors import KafkaStorageError

TEST_FAULTS_ENV: Final = "KRAFT_TEST_FAULTS"
"""A directory of fault files (`arm_fault`); set only in tests."""

_FAULT_SUFFIX = ".fault"
_RECENT_NS = 100_000_000
WRITE_OPS: Final = frozenset({"open", "write", "writev", "fsync", "fdatasync", "ftruncate"})
ENOSPC_OPS: Final = frozenset({"open", "write", "writev"})
"""What a full disk fails: creating files and writing; cutting a file shorter still works."""
READ_OPS: Final = frozenset({"pread"})


class FileIO:
    """The ``os`` calls of a segment. Subclasses override `check` to fail chosen operations."""

    def check(self, op: str) -> None:
        """Raise ``OSError`` if ``op`` must fail (never, here)."""

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        self.check("open")
        return os.open(path, flags, mode)

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        self.check("write")
        return os.write(fd, data)

    def writev(self, fd: int, buffers: Sequence[bytes | memoryview]) -> int:
        self.check("writev")
        return os.writev(fd, buffers)

    def pread(self, fd: int, size: int, position: int) -> bytes:
        self.check("pread")
        return os.pread(fd, size, position)

    def fsync(self, fd: int) -> None:
        self.check("fsync")
        os.fsync(fd)

    def fdatasync(self, fd: int) -> None:
        self.check("fdatasync")
        os.fdatasync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        self.check("ftruncate")
        os.ftruncate(fd, size)


class FailingFileIO(FileIO):
    """A `FileIO` whose chosen operations raise ``OSError(error)`` while `fail` is set."""

    def __init__(self) -> None:
        self.fail: int | None = None
        self.ops: frozenset[str] = ENOSPC_OPS

    def check(self, op: str) -> None:
        if self.fail is not None and op in self.ops:
            raise OSError(self.fail, f"{os.strerror(self.fail)} (injected)")


class _FaultFileIO(FileIO):
    """The `TEST_FAULTS_ENV` injector of one log directory (see the module docstring)."""

    def __init__(self, faults_dir: Path, log_dir: Path) -> None:
        self._faults_dir = faults_dir
        self._log_dir = str(log_dir.resolve())
        self._seen_mtime_ns = -1
        self._loaded_at_ns = 0
        self._armed: dict[str, int] = {}  # op -> errno

    def check(self, op: str) -> None:
        try:
            mtime_ns = os.stat(self._faults_dir).st_mtime_ns
        except FileNotFoundError:
            mtime_ns = 0
        # NB: file times are coarse (a clock tick): a change in the same tick as our last load
        # keeps the mtime, so reload while the last load was that close to the change.
        if mtime_ns != self._seen_mtime_ns or self._loaded_at_ns - mtime_ns < _RECENT_NS:
            self._seen_mtime_ns = mtime_ns
            self._loaded_at_ns = time.time_ns()
            self._armed = _load_faults(self._faults_dir, self._log_dir)
        code = self._armed.get(op)
        if code is not None:
            raise OSError(code, f"{os.strerror(code)} (injected by {TEST_FAULTS_ENV})")


def _load_faults(faults_dir: Path, log_dir: str) -> dict[str, int]:
    armed: dict[str, int] = {}
    try:
        entries = sorted(faults_dir.glob(f"*{_FAULT_SUFFIX}"))
    except OSError:
        return armed
    for entry in entries:
        try:
            fault = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue  # being replaced: the next directory change reloads it
        if fault.get("path") == log_dir:
            code = getattr(errno_module, str(fault.get("errno")), errno_module.EIO)
            for op in fault.get("ops", ()):
                armed[str(op)] = code
    return armed


def storage_error(error: OSError, what: str, directory: Path) -> KafkaStorageError:
    """The one mapping of an ``OSError`` of the log's I/O to its typed error (Kafka error 56)."""
    reason = error.strerror or type(error).__name__
    return KafkaStorageError(f"{what} failed in {directory}: {reason}")


PROBE_FILE = ".kraft-probe"
PROBE_BYTES = 64 * 1024


def probe_log_directory(directory: Path) -> None:
    """Check that ``directory`` takes writes again (after a disk error took its log offline):
    create, write `PROBE_BYTES`, fsync and delete `PROBE_FILE`, through the same `FileIO` as
    its log would.

    Raises:
        KafkaStorageError: it does not.
    """
    io = file_io_for(directory)
    path = directory / PROBE_FILE
    try:
        fd = io.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            io.write(fd, bytes(PROBE_BYTES))
            io.fsync(fd)
        finally:
            os.close(fd)
        os.unlink(path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise storage_error(e, "probe", directory) from e


_PLAIN = FileIO()


def file_io_for(log_dir: Path) -> FileIO:
    """The `FileIO` for a log in ``log_dir``: plain, or fault-injecting under `TEST_FAULTS_ENV`."""
    faults = os.environ.get(TEST_FAULTS_ENV)
    if not faults:
        return _PLAIN
    return _FaultFileIO(Path(faults), log_dir)


def arm_fault(
    faults_dir: Path, log_dir: Path, *, error: str = "ENOSPC", ops: Iterable[str] = ENOSPC_OPS
) -> Path:
    """Make ``ops`` on the log in ``log_dir`` fail with errno ``error`` (a name, e.g. "EIO")
    in every process started with ``KRAFT_TEST_FAULTS=faults_dir``; returns the fault file."""
    faults_dir.mkdir(parents=True, exist_ok=True)
    name = str(log_dir.resolve()).strip("/").replace("/", "_")
    path = faults_dir / f"{name}{_FAULT_SUFFIX}"
    tmp = path.with_suffix(".tmp")
    fault = {"path": str(log_dir.resolve()), "errno": error, "ops": sorted(ops)}
    tmp.write_text(json.dumps(fault))
    os.replace(tmp, path)  # NB: a rename changes the directory's mtime: injectors reload
    return path


def clear_fault(fault_file: Path) -> None:
    """Disarm a fault `arm_fault` armed."""
    fault_file.unlink(missing_ok=True)


__all__ = [
    "ENOSPC_OPS",
    "PROBE_FILE",
    "READ_OPS",
    "TEST_FAULTS_ENV",
    "WRITE_OPS",
    "FailingFileIO",
    "FileIO",
    "arm_fault",
    "clear_fault",
    "file_io_for",
    "probe_log_directory",
    "storage_error",
]
