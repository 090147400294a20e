"""structlog, configured once for the whole project.

Every component takes or makes a bound logger (``structlog.get_logger().bind(node_id=...,
role=...)``) and logs past-tense snake_case events. The composition root (the CLI, a server
process, a test) calls `configure_logging` once: key-value lines when stderr is a terminal,
JSON lines otherwise (log files of `LocalCluster` processes, CI).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO, cast

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
"""The levels `configure_logging` takes (``--log-level``), by name."""


def configure_logging(level: str = "info", *, json: bool | None = None, stream: Any = None) -> None:
    """Configure structlog for this process.

    Args:
        level: minimum level: debug, info, warning, error or critical.
        json: force JSON (True) or key-value (False); by default JSON unless on a terminal.
        stream: where to write (default: whatever ``sys.stderr`` is when a line is written,
            so a program or a test that swaps ``sys.stderr`` later, and closes its stand-in,
            does not leave the logs writing to a closed file).

    Raises:
        ValueError: ``level`` is none of those.
    """
    import structlog  # here, not at the top: the CLI reads LEVELS before anything is slow

    threshold = LEVELS.get(level.lower())
    if threshold is None:
        raise ValueError(f"unknown log level {level[:40]!r}: expected one of {', '.join(LEVELS)}")
    out = stream if stream is not None else _CurrentStderr()
    as_json = (not out.isatty()) if json is None else json
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=structlog.PrintLoggerFactory(cast(TextIO, out)),
        cache_logger_on_first_use=False,
    )


class _CurrentStderr:
    """A file that is ``sys.stderr`` at each write (structlog keeps the file it is given)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def quiet() -> None:
    """Drop everything below warning: for library users and tests that want silence."""
    configure_logging("warning")


def ensure_configured() -> None:
    """Configure warning-level logs to stderr unless the application configured structlog
    itself: structlog's own default prints everything to stdout, which an embedding program
    may be using."""
    import structlog

    if not structlog.is_configured():
        configure_logging("warning")
