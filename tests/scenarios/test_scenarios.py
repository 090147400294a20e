"""Runs every scenario script; ``python -m tests.scenarios.runner --rewrite`` updates them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenarios.runner import run_script, scripts


@pytest.mark.parametrize("path", scripts(), ids=lambda p: p.stem)
def test_scenario(path: Path) -> None:
    expected = path.read_text()
    assert run_script(expected) == expected
