"""The plots and report of ``kraft compare`` say what they measure (issue 30, class 8): drawn
from the documented run's results.json, no cluster needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraft.compare.report import render_report, summary_table

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "img" / "comparison" / "results.json"


def test_every_plot_is_written_readable_and_the_report_says_what_each_measures(
    tmp_path: Path,
) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib import image

    from kraft.compare.plots import plot_all

    results = json.loads(RESULTS.read_text())
    plots = plot_all(results, tmp_path)
    assert plots == [
        "latency-slow-follower.png",
        "throughput.png",
        "unavailability.png",
        "records-lost.png",
    ]
    # Small multiples: one panel per scenario and mode, tall enough to read (was 2 panels).
    height, width, _ = image.imread(tmp_path / "throughput.png").shape
    assert height > 1000 and width >= 900
    report = render_report(results, plots)
    assert "not a throughput measurement" in report
    assert "offer 150 records/s per mode" in report and "100 records/s" in report
    assert "load average was 18.17 on 2 CPUs" in report  # above the CPU count: said
    for plot in plots:
        assert f"`{plot}`:" in report
    assert "not a throughput figure (kraft bench produce --against kafka is)" in summary_table(
        results
    )
