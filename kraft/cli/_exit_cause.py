"""Why a node of a local cluster is gone, in words: ``kraft cluster status`` and the supervisor
name the cause, not whatever line the node logged last (a SIGKILLed broker's last line is an
ordinary info event, which reads like a reason and is not one)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

_TAIL_BYTES = 16384
_LIMIT = 300
_ERROR_LEVELS = frozenset({"error", "critical", "exception", "fatal"})


def last_error_line(path: Path) -> str | None:
    """The last line of the log at ``path`` that reports an error: a ``kraft: error:`` line,
    the exception line that ends a traceback, or a JSON event at level error or critical."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - _TAIL_BYTES))
            lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines()]
    except OSError:
        return None
    in_traceback = False
    found: str | None = None
    for line in lines:
        if not line:
            continue
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
            continue
        if in_traceback and not line.startswith(("File ", "^", "~")) and ":" in line:
            first = line.split(":", 1)[0]
            if first.replace(".", "").replace("_", "").isalnum() and " " not in first:
                found, in_traceback = line, False
            continue
        if line.startswith("kraft: error:"):
            found = line
        elif line.startswith("{"):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and str(event.get("level", "")).lower() in _ERROR_LEVELS:
                found = line
    if found is None:
        return None
    return found if len(found) <= _LIMIT else found[:_LIMIT] + "..."


def exit_cause(returncode: int | None, log_path: Path) -> str:
    """What ended a node whose exit code is known (the supervisor's view)."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name} (log: {log_path})"
    error = last_error_line(log_path)
    code = "?" if returncode is None else str(returncode)
    if error is None:
        return f"exited with code {code}, no error in its log (log: {log_path})"
    return f"exited with code {code}: {error}"


def gone_cause(log_path: Path) -> str:
    """What ended a node when nobody saw its exit code (its supervisor is gone too): the last
    error in its log, else that it logged none, which points at a signal."""
    error = last_error_line(log_path)
    if error is not None:
        return f"its last error: {error}"
    return (
        "no error in its log, so it was killed or stopped from outside (kill -9, the OOM "
        f"killer?) (log: {log_path})"
    )


__all__ = ["exit_cause", "gone_cause", "last_error_line"]
