"""``kraft bench trees``: the ABBA order, the figures compared, and one real run of the storage
bench on a commit exported from git and on this tree."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from kraft.bench.trees import abba, compare, main, numeric_leaves

ROOT = Path(__file__).resolve().parents[2]


def test_rounds_alternate_abba_so_a_drift_weighs_on_both_trees() -> None:
    assert abba(1) == ["base", "head"]
    assert abba(3) == ["base", "head", "head", "base", "base", "head"]


def test_every_number_is_a_figure_by_its_path_and_only_common_matching_ones_compare() -> None:
    run = {"a": {"records_per_s": 10, "ok": True, "p": [1, 2]}, "ratio": 0.5, "name": "x"}
    assert numeric_leaves(run) == {"a.records_per_s": 10.0, "ratio": 0.5}
    runs = {
        "base": [{"records_per_s": 100, "x": 1}, {"records_per_s": 300, "x": 1}],
        "head": [{"records_per_s": 400, "x": 2, "p99_ms": 3}, {"records_per_s": 200, "x": 2}],
    }
    (row,) = compare(runs, re.compile("per_s|p99"))  # p99_ms: not in every run
    assert (row.key, row.base, row.head, row.ratio) == ("records_per_s", 200.0, 300.0, 1.5)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="git")
def test_a_storage_bench_on_head_exported_and_on_this_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = ["storage", "--total-mb", "4", "--synced-mb", "1"]
    argv = ["--base", "HEAD", "--rounds", "1", "--cache", str(tmp_path), "--json", "--", *bench]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bench"] == bench and len(out["runs"]["base"]) == len(out["runs"]["head"]) == 1
    assert "append.ratio" in out["figures"]
    (tree,) = tmp_path.iterdir()
    assert out["base_commit"].startswith(tree.name) and (tree / "kraft" / "cli").is_dir()


def test_no_bench_named_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--base", "HEAD"]) == 2
    assert "name the bench after --" in capsys.readouterr().out
