"""The 95% interval of a measured mean iteration time (batch means): no root, no processes."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from ddlperf.measure import mean_interval as mi
from ddlperf.measure import records as rec
from tests.measure.test_records import _context, _iteration


def _run(durations: dict[str, list[float]]) -> list[dict]:
    records = []
    for name, ds in durations.items():
        start = 0.0
        for t, d in enumerate(ds):
            records.append(_iteration(name, t, start, d))
            start += d
    return records


def _steady(durations: dict[str, list[float]]) -> dict[str, list[dict]]:
    return {name: [r for r in _run({name: ds})] for name, ds in durations.items()}


def test_steady_periods_give_an_interval_of_zero() -> None:
    got = mi.mean_interval(_steady({"w0": [1.0] * 10, "w1": [1.0] * 10}))
    assert got == {"half_width_s": 0.0, "batches": 5, "batch_s": [1.0] * 5}


def test_blocks_that_differ_give_the_student_t_interval_of_their_mean() -> None:
    # five blocks of 4 iterations: each block's median is its level, averaged over workers
    levels = [1.0, 1.2, 0.9, 1.1, 0.8]
    w0 = [x for level in levels for x in [level] * 4]
    w1 = [x + 0.2 for x in w0]
    got = mi.mean_interval(_steady({"w0": w0, "w1": w1}))
    blocks = [level + 0.1 for level in levels]
    assert got["batch_s"] == pytest.approx(blocks)
    sd = statistics.stdev(blocks)
    assert got["half_width_s"] == pytest.approx(2.7764451051977987 * sd / math.sqrt(5))
    # one outlier step inside a block moves its median, not its level
    w0[1] = 9.0
    assert mi.mean_interval(_steady({"w0": w0, "w1": w1}))["batch_s"] == pytest.approx(blocks)


def test_random_compute_blocks_are_summarized_by_their_mean() -> None:
    """Where the compute is drawn, a slow step is part of the figure: its block moves."""
    w0 = [1.0] * 20
    w0[1] = 9.0
    steady = _steady({"w0": w0, "w1": [1.0] * 20})
    assert mi.mean_interval(steady)["batch_s"][0] == pytest.approx(1.0)
    means = mi.mean_interval(steady, rec.step_statistic(True))["batch_s"]
    assert means[0] == pytest.approx((12.0 / 4 + 1.0) / 2)  # w0: 1, 9, 1, 1; w1: 1s
    records = _run({"w0": [1.0, *w0], "w1": [1.0] * 21})
    steady, _notes = rec.steady_state(rec.worker_iterations(records), 1)
    assert mi.interval_from_records(records, 1, "bsp", random_compute=True) == \
        mi.mean_interval(steady, rec.step_statistic(True))
    assert mi.interval_from_records(records, 1, "bsp") == mi.mean_interval(steady)


def test_the_t_quantile_is_the_95_percent_one_for_four_degrees_of_freedom() -> None:
    from scipy import stats

    assert pytest.approx(stats.t.ppf(0.975, mi.BATCHES - 1), rel=1e-12) == mi.T_975_4


def test_too_few_iterations_give_no_interval() -> None:
    assert mi.mean_interval(_steady({"w0": [1.0] * 9, "w1": [1.0] * 20})) is None
    assert mi.mean_interval({}) is None


def test_records_give_the_interval_of_the_steady_iterations_only() -> None:
    # a slow warm-up (5 iterations of 3 s) must not widen the interval of the steady ones
    ds = [3.0] * 5 + [1.0, 1.0, 1.1, 1.1, 1.0, 1.0, 1.2, 1.2, 1.0, 1.0]
    records = _run({"w0": ds, "w1": ds})
    got = mi.interval_from_records(records, warmup=5, sync="bsp")
    steady, _notes = rec.steady_state(rec.worker_iterations(records), 5)
    assert got == mi.mean_interval(steady)
    assert 0 < got["half_width_s"] < 0.2
    assert mi.interval_from_records(records, warmup=0, sync="bsp")["half_width_s"] > 0.5


def test_the_measurement_carries_it_and_reads_back(tmp_path: Path) -> None:
    ds = [1.0, 1.2] * 10
    m = rec.summarize(_run({"w0": ds, "w1": ds}), _context())
    half = m.uncertainty["iteration_time_s"]["half_width_s"]
    assert half == mi.interval_from_records(_run({"w0": ds, "w1": ds}), 1, "bsp")["half_width_s"]
    path = tmp_path / "measurement.json"
    rec.write_summary(path, m)
    assert rec.load_summary(path).uncertainty == json.loads(path.read_text())["uncertainty"]
    short = rec.summarize(_run({"w0": [1.0] * 4, "w1": [1.0] * 4}), _context())
    assert short.uncertainty is None and "uncertainty" not in short.to_dict()
