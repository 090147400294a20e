"""Child server processes that never outlive their parent: the base of `LocalCluster`.

Each child is a real Python process (usually ``python -m kraft.cli ...``) with its own log
file. Three things keep them from leaking:

- ``PR_SET_PDEATHSIG`` (Linux): the kernel sends SIGKILL to the child when its parent dies,
  also when the parent is itself SIGKILLed. The *child* asks for it, in `die_with_parent`
  (``kraft.cli.main`` calls it first thing), because the parent passes its pid in
  ``KRAFT_PARENT_PID`` and must not use a ``preexec_fn``: that makes CPython run the
  ``os.register_at_fork`` handlers in the child, and gRPC's abort it (SIGABRT, "epoll_wait
  error: Bad file descriptor") whenever the parent holds live gRPC channels;
- an ``atexit`` hook kills whatever is still running at interpreter exit;
- the owning context manager kills everything on ``__exit__`` (so also on Ctrl-C or a failing
  test). Children run in their own session, so Ctrl-C in a terminal reaches the parent only.

NB: the death signal follows the *thread* that started the child, so start processes from a
thread that lives as long as they should (the main thread, normally).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

_PR_SET_PDEATHSIG = 1
_live: weakref.WeakSet[ManagedProcess] = weakref.WeakSet()
_live_lock = threading.Lock()


PARENT_PID_ENV = "KRAFT_PARENT_PID"
"""Set for every `ManagedProcess` child: the pid it must not outlive (see `die_with_parent`)."""


def die_with_parent() -> None:
    """In a child started by `ManagedProcess`: ask the kernel for SIGKILL when the parent dies
    (``PR_SET_PDEATHSIG``) and exit at once if it already has. A no-op elsewhere."""
    expected = os.environ.get(PARENT_PID_ENV)
    if not expected:
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        return  # not Linux: the parent's atexit hook and context manager still apply
    if os.getppid() != int(expected):
        os._exit(1)  # the parent died before we asked


@dataclass
class ManagedProcess:
    """One child process: started, stopped, killed, paused and restarted with the same args.

    ``args`` follow the Python interpreter: ``["-m", "kraft.cli", "controller", ...]`` or
    ``["examples/replicated_kv.py", "--node", "1"]``. ``prefix`` comes before the interpreter:
    ``["ip", "netns", "exec", NS]`` runs it in a network namespace (``ip`` execs the
    interpreter, so the pid is still the Python process's).
    """

    name: str
    args: Sequence[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    pipe_stdin: bool = False
    prefix: Sequence[str] = ()
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _log: IO[bytes] | None = field(default=None, init=False, repr=False)
    _ended_on_purpose: bool = field(default=False, init=False, repr=False)
    """Set by `kill` and `stop`, cleared by `start`: an exit without it is a death."""

    def __hash__(self) -> int:
        return id(self)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def stdin(self) -> IO[bytes] | None:
        return self._proc.stdin if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def started(self) -> bool:
        """Whether it was ever started (it may have ended since)."""
        return self._proc is not None

    def died(self) -> bool:
        """Whether it was started and exited without being stopped or killed."""
        return (
            self._proc is not None and self._proc.poll() is not None and not self._ended_on_purpose
        )

    def exit_summary(self) -> str:
        """``exited with code N: <the last line of its log>`` (for a node that died)."""
        code = self._proc.returncode if self._proc is not None else None
        return f"exited with code {code}: {last_log_line(self.log_path)}"

    def start(self) -> None:
        if self.is_running():
            return
        self._ended_on_purpose = False
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            PARENT_PID_ENV: str(os.getpid()),
            **self.env,
        }
        self._proc = subprocess.Popen(
            [*self.prefix, sys.executable, *self.args],
            stdin=subprocess.PIPE if self.pipe_stdin else subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        with _live_lock:
            _live.add(self)

    def _signal(self, sig: signal.Signals) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL, and wait until it is gone."""
        if self._proc is None:
            return
        self._ended_on_purpose = True
        self._signal(signal.SIGCONT)  # a stopped process is killed all the same; be explicit
        self._signal(signal.SIGKILL)
        self._proc.wait()
        self._close_log()

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (a graceful shutdown), then SIGKILL after ``timeout`` seconds."""
        if self._proc is None:
            return None
        self._ended_on_purpose = True
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGTERM)
        try:
            code = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self._proc.returncode
        self._close_log()
        return code

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing (a GC pause, a VM stall)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def wait_exit(self, timeout: float) -> int | None:
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


_EXIT_WARNING: Final = re.compile(r"^\S+:\d+: \w*Warning: ")
"""A warning's line as Python prints it (``sys:1: RuntimeWarning: coroutine ...``)."""


def last_log_line(path: Path, limit: int = 300) -> str:
    """The last non-empty line of the log at ``path`` (at most ``limit`` characters)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
            lines = [line for line in f.read().decode(errors="replace").splitlines() if line]
    except OSError as e:
        return f"(no log: {e.strerror})"
    # NB: the interpreter's exit may add a warning (an unawaited coroutine, an unclosed
    # resource) after the error that ended the process; the error is the line to show.
    meaningful = [line for line in lines if not _EXIT_WARNING.match(line)] or lines
    if not meaningful:
        return "(empty log)"
    line = meaningful[-1].strip()
    return line if len(line) <= limit else line[:limit] + "..."


def wait_for(predicate: object, timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll ``predicate()`` until it is true or ``timeout`` seconds pass (then TimeoutError)."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception as e:  # the thing we wait for may not answer yet
            last_error = e
        time.sleep(interval)
    detail = f" (last error: {last_error})" if last_error else ""
    raise TimeoutError(f"timed out after {timeout:.1f}s waiting for {what}{detail}")


@atexit.register
def _kill_leftovers() -> None:
    with _live_lock:
        procs = list(_live)
    for p in procs:
        p.kill()
