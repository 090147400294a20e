"""Tests on separate network hosts (`kraft.cluster.netns`): they need root, which CI has."""

from __future__ import annotations

import pytest

from kraft.cluster.netns import NetnsUnavailableError, check_available


def require_namespaces() -> None:
    """Fail (never skip) in one line where network namespaces cannot be made, so a CI that
    lost the privilege shows it."""
    try:
        check_available()
    except NetnsUnavailableError as e:
        pytest.fail(f"the network-namespace tests need namespaces: {e}", pytrace=False)
