"""Shared by the security tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """``kraft.cli.main`` configures structlog to write to the stderr of the moment: an
    in-process call must not leave it writing to a stream pytest closes after the test (a
    producer's sender thread then died logging, and its record's future never resolved)."""
    configured, saved = structlog.is_configured(), structlog.get_config()
    yield
    if configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()
