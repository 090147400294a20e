"""structlog, configured once for the whole project.

Every component takes or makes a bound logger (``structlog.get_logger().bind(node_id=...,
role=...)``) and logs past-tense snake_case events. The composition root (the CLI, a server
process, a test) calls `configure_logging` once: key-value lines when stderr is a terminal,
JSON lines otherwise (log files of `LocalCluster` processes, CI).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
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


def configure_cli_logging(level: str = "warning") -> None:
    """Configure structlog for a client command of the CLI (``kraft produce``, ``kraft
    topics``, ...): each event is one line on stderr in the CLI's own voice, ``kraft: warning:
    MESSAGE`` (an event's ``message`` when it has one, else its name and fields), beside the
    ``kraft: error:`` line a failure ends with.

    Raises:
        ValueError: ``level`` is none of `LEVELS`.
    """
    import structlog

    threshold = LEVELS.get(level.lower())
    if threshold is None:
        raise ValueError(f"unknown log level {level[:40]!r}: expected one of {', '.join(LEVELS)}")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            _cli_line,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=structlog.PrintLoggerFactory(cast(TextIO, _CurrentStderr())),
        cache_logger_on_first_use=False,
    )


def _cli_line(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> str:
    level = event.pop("level", "info")
    name = event.pop("event", "")
    message = event.pop("message", None)
    if message is None:
        fields = " ".join(f"{key}={value}" for key, value in event.items())
        message = f"{name} {fields}".strip()
    return f"kraft: {level}: {message}"


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


LIBRARY_LOGGER = "kraft"
"""The standard `logging` logger (and parent of ``kraft.<name>``) a library user's events go
to (`configure_library_logging`)."""


def configure_library_logging() -> None:
    """Python's convention for a library: every event goes to the standard `logging` logger
    ``kraft`` (``kraft.producer``, ``kraft.consumer``, ... for named structlog loggers), which
    has a `logging.NullHandler`, so nothing is written unless the application configures
    logging (``logging.basicConfig(level=logging.INFO)`` shows the client's retries and
    refreshes, as a Kafka client's log4j lines would). The CLI and the servers call
    `configure_logging` instead, which keeps their own lines on stderr."""
    import structlog

    library = logging.getLogger(LIBRARY_LOGGER)
    if not any(isinstance(h, logging.NullHandler) for h in library.handlers):
        library.addHandler(logging.NullHandler())
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,  # the application's level, checked first
            structlog.contextvars.merge_contextvars,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
        logger_factory=_library_logger,
        cache_logger_on_first_use=False,
    )


def _library_logger(*args: Any) -> logging.Logger:
    """structlog's logger factory in library mode: ``get_logger("kraft.producer")`` is
    `logging`'s ``kraft.producer``; an unnamed or foreign name goes under ``kraft``."""
    name = args[0] if args and isinstance(args[0], str) else LIBRARY_LOGGER
    if name != LIBRARY_LOGGER and not name.startswith(LIBRARY_LOGGER + "."):
        name = f"{LIBRARY_LOGGER}.{name}"
    return logging.getLogger(name)


def ensure_configured() -> None:
    """What a client constructor calls: `configure_library_logging` unless the application
    (or the CLI, a server, a test) configured structlog itself; structlog's own default
    prints every event to stdout, which an embedding program may be using."""
    import structlog

    if not structlog.is_configured():
        configure_library_logging()
