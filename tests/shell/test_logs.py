"""kraft's structlog setup writes to whatever ``sys.stderr`` is at each line."""

from __future__ import annotations

import io
import sys

import pytest
import structlog

from kraft.logs import configure_logging


def test_logs_configured_while_stderr_was_swapped_still_write_after_it_was_closed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI run in-process by a test configures logging while pytest's capture is
    sys.stderr; the capture is closed at the test's end, and every later log line (a broker's
    warning, a Raft servicer's) raised "I/O operation on closed file" in 43 later tests."""
    saved = structlog.get_config()
    stand_in = io.StringIO()
    try:
        monkeypatch.setattr(sys, "stderr", stand_in)
        configure_logging("warning", json=True)
        monkeypatch.undo()
        stand_in.close()
        structlog.get_logger("test").warning("written_after_the_swap")
        assert "written_after_the_swap" in capsys.readouterr().err
    finally:
        structlog.configure(**saved)
