"""The main job's output: event lines above one progress line, on a terminal or not.

On a terminal the progress line is rewritten in place (``\\r``) and every event line is printed
above it; without one (a pipe, CI, a test) the progress is a plain line now and then (the
caller says when) and events are plain lines. Only plain stdout: no dependency.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

_CLEAR = "\r\x1b[2K"
BAR_WIDTH = 30


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """``[#########-----------]`` for ``done`` of ``total``."""
    filled = width if total <= 0 else min(width, width * done // total)
    return "[" + "#" * filled + "-" * (width - filled) + "]"


class Console:
    """Thread-safe: the main thread, the progress thread and the cluster watcher all print.

    Args:
        out: where to write (default stdout).
        live: rewrite the progress line in place (default: when ``out`` is a terminal).
    """

    def __init__(self, out: TextIO | None = None, *, live: bool | None = None) -> None:
        self._out = out if out is not None else sys.stdout
        self.live = self._out.isatty() if live is None else live
        self._lock = threading.Lock()
        self._progress = ""
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def say(self, text: str = "") -> None:
        """One line above the progress line."""
        with self._lock:
            if self.live and self._progress:
                self._out.write(_CLEAR)
            self._out.write(text + "\n")
            if self.live and self._progress:
                self._out.write(self._progress)
            self._out.flush()

    def event(self, text: str) -> None:
        """A timestamped line: ``[ 12.3s] text`` (seconds since the demo started)."""
        self.say(f"  [{self.elapsed():6.2f}s] {text}")

    def progress(self, text: str, *, line: bool = False) -> None:
        """Show ``text`` as the progress line: in place when live; otherwise printed only when
        ``line`` (the caller's periodic tick)."""
        with self._lock:
            if self.live:
                self._progress = text
                self._out.write(_CLEAR + text)
                self._out.flush()
            elif line:
                self._out.write(text + "\n")
                self._out.flush()

    def end_progress(self, final: str) -> None:
        """Replace the progress line with ``final``, a plain line, and stop showing one."""
        with self._lock:
            if self.live:
                self._out.write(_CLEAR)
            self._progress = ""
            self._out.write(final + "\n")
            self._out.flush()


__all__ = ["Console", "bar"]
