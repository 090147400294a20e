"""``kraft bench produce --metrics``'s summary: the median of the rounds' on/off ratios (each
round's two runs saw nearly the same load) beside the ratio of the medians."""

from __future__ import annotations

from kraft.bench.metrics_overhead import TARGET_RATIO, summarize


def _run(rate: float) -> dict[str, float]:
    return {"records_per_s": rate, "p50_ms": 1.0, "brokers_cpu_us_per_record": 10.0}


def test_the_ratio_is_the_median_of_the_rounds_ratios() -> None:
    runs = {
        "off": [_run(100.0), _run(50.0), _run(100.0)],
        "on": [_run(99.0), _run(40.0), _run(101.0)],
    }
    summary = summarize(runs)
    assert summary["round_ratios"] == [0.99, 0.8, 1.01]
    assert summary["ratio_median"] == 0.99
    assert summary["ratio_of_medians"] == 0.99
    assert summary["target_met"] is (TARGET_RATIO <= 0.99)
