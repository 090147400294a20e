"""kraft's processes run with `kraft.gc_tuning`'s collector settings; a library import does not."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from kraft.cli import main
from kraft.gc_tuning import THRESHOLDS


def test_importing_kraft_leaves_the_collector_as_the_application_set_it() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gc, kraft, replication.clients, kraft.raft_shell; print(gc.get_threshold())",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == str(gc.get_threshold())


def test_a_kraft_command_runs_with_kraft_thresholds() -> None:
    assert gc.get_threshold() != THRESHOLDS
    with pytest.raises(SystemExit):
        main(["bench", "storage", "--help"])
    assert gc.get_threshold() == THRESHOLDS
