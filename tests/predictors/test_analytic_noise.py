"""Compute noise in the analytic model: synchronous steps wait for the slowest draw."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlperf.api import predict
from ddlperf.api import scenario as api_scenario
from ddlperf.predictors.analytic_noise import Spread, applies, expected_max, slowest_draw_view
from ddlperf.sweep import sweep
from ddlperf.workload import Workload


def noisy_workload(cv: float, layers: int = 8, tensor_bytes: int = 250_000,
                   hiccup_cv: float | None = None) -> Workload:
    """``layers`` layers of 10 ms forward and 20 ms backward with coefficient of variation
    ``cv``; ``hiccup_cv``: one more layer (5 + 40 ms) with that, heavy-tailed, spread."""
    spec = [{"name": f"l{i}", "forward_s": 0.010, "backward_s": 0.020, "forward_cv": cv,
             "backward_cv": cv, "tensors": [{"name": f"l{i}.t", "bytes": tensor_bytes}]}
            for i in range(layers)]
    if hiccup_cv is not None:
        spec.insert(layers // 2, {"name": "hiccup", "forward_s": 0.005, "backward_s": 0.040,
                                  "forward_cv": hiccup_cv, "backward_cv": hiccup_cv,
                                  "tensors": [{"name": "hiccup.t", "bytes": tensor_bytes}]})
    return Workload.from_dict({"format": "ddlperf.workload/1", "name": "noisy",
                               "batch_size": 32, "layers": spec})


def _lognormal_draws(times: np.ndarray, cv: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(7)
    sigma = np.sqrt(np.log1p(cv * cv))
    return times * np.exp(-sigma * sigma / 2 + sigma * rng.standard_normal((*shape, len(times))))


def _spread(times: np.ndarray, cv: np.ndarray) -> Spread:
    sd = times * cv
    return Spread(np.array([times.sum()]), np.array([(sd * sd).sum()]),
                  np.array([((cv * cv + 3) * cv * sd**3).sum()]))


@pytest.mark.parametrize("cv,n", [(0.3, 4), (0.5, 2), (1.5, 3), (0.1, 64)])
def test_expected_max_of_one_lognormal_is_exact(cv, n):
    times = np.array([0.1])
    draws = _lognormal_draws(times, np.array([cv]), (200_000, n))[..., 0]
    want = draws.max(axis=1).mean()
    assert expected_max([_spread(times, np.array([cv]))], [n])[0] == pytest.approx(want, rel=0.01)


@pytest.mark.parametrize("hiccup", [False, True])
def test_expected_max_of_sums_follows_their_skew(hiccup):
    """Steady layers plus one heavy-tailed one: a shifted lognormal of the sum's three moments
    gives the expected slowest of three (the two-moment fit is 3% high here)."""
    times = np.array([0.01, 0.02] * 8 + ([0.005, 0.040] if hiccup else []))
    cv = np.array([0.1 if hiccup else 0.5] * 16 + ([1.5, 1.5] if hiccup else []))
    draws = _lognormal_draws(times, cv, (200_000, 3)).sum(axis=2)
    want = draws.max(axis=1).mean()
    assert expected_max([_spread(times, cv)], [3])[0] == pytest.approx(want, rel=0.003)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(1e-3, 1.0), st.floats(0.0, 2.0)), min_size=1, max_size=6))
def test_the_shifted_fit_keeps_mean_and_variance(ops):
    times, cv = (np.array(x) for x in zip(*ops))
    spread = _spread(times, cv)
    shift, mu, sigma = spread.shifted_lognormal()
    assert shift[0] >= 0
    mean = shift[0] + np.exp(mu[0] + sigma[0] ** 2 / 2)
    var = (np.exp(sigma[0] ** 2) - 1) * np.exp(2 * mu[0] + sigma[0] ** 2)
    assert mean == pytest.approx(spread.mean[0], rel=1e-9)
    assert var == pytest.approx(spread.var[0], rel=1e-6, abs=1e-15)


def test_a_group_far_slower_than_another_sets_the_slowest_alone():
    slow, fast = _spread(np.array([0.30]), np.array([0.1])), _spread(np.array([0.1]),
                                                                     np.array([0.1]))
    both = expected_max([slow, fast], [2, 6])[0]
    assert both == pytest.approx(expected_max([slow], [2])[0], rel=1e-6)


@pytest.mark.parametrize("kw", [
    dict(workers=4, ps=2, bandwidth="300Mbps"),  # PS BSP, partly link-bound
    dict(workers=3, ps=1, bandwidth="400Mbps", hiccup=True),
    dict(workers=4, arch="allreduce", bandwidth="200Mbps", bucket_size="2MB"),
    dict(workers=4, arch="allreduce", bandwidth="200Mbps", allreduce="hierarchical",
         gpus_per_node=2, intra="800Mbps", bucket_size="2MB"),
    dict(workers=8, ps=2, bandwidth="1Gbps"),  # compute-bound
    dict(workers=16, arch="allreduce", bandwidth="1Gbps"),
])
def test_analytic_waits_for_the_slowest_draw_as_the_simulator_does(kw):
    kw = dict(kw)
    wl = noisy_workload(0.1 if kw.pop("hiccup", False) else 0.5,
                        hiccup_cv=1.5 if "ps" in kw and kw["workers"] == 3 else None)
    analytic = predict(workload=wl, method="analytic", **kw)
    simulate = predict(workload=wl, method="simulate", iterations=200, warmup=5,
                       replications=3, **kw)
    steady = predict(workload=noisy_workload(0.0), method="analytic", **kw)
    assert analytic.iteration_time_s > steady.iteration_time_s * 1.02  # noise costs time
    assert analytic.iteration_time_s == pytest.approx(simulate.iteration_time_s, rel=0.035)


@pytest.mark.parametrize("kw", [dict(sync="asp", workers=3, ps=1),
                                dict(sync="ssp", staleness=2, workers=4, ps=2)])
def test_asynchronous_steps_run_on_the_mean(kw):
    wl, steady = noisy_workload(0.5), noisy_workload(0.0)
    sc = api_scenario(workload=wl, bandwidth="300Mbps", **kw)
    assert not applies(sc)
    noisy = predict(workload=wl, bandwidth="300Mbps", method="analytic", **kw)
    fixed = predict(workload=steady, bandwidth="300Mbps", method="analytic", **kw)
    assert noisy.iteration_time_s == pytest.approx(fixed.iteration_time_s, rel=1e-12)


def test_compute_stays_the_mean_and_the_slow_draws_are_waiting():
    wl = noisy_workload(0.5)
    noisy = predict(workload=wl, workers=4, ps=2, bandwidth="1Gbps", method="analytic")
    steady = predict(workload=noisy_workload(0.0), workers=4, ps=2, bandwidth="1Gbps",
                     method="analytic")
    assert [w.name for w in noisy.workers] == ["w0", "w1", "w2", "w3"]
    for w, s in zip(noisy.workers, steady.workers):
        assert w.compute_s == pytest.approx(s.compute_s, rel=1e-12)
        assert w.wait_s > s.wait_s + 0.02
        assert w.compute_s + w.communication_s + w.wait_s == pytest.approx(
            w.iteration_time_s, rel=1e-9)
    assert len({round(w.wait_s, 12) for w in noisy.workers}) == 1  # identical workers alike
    assert any("compute noise" in note for note in noisy.notes)


def test_the_view_splits_a_ps_group_by_rank_and_keeps_names():
    sc = api_scenario(workload=noisy_workload(0.5), workers=40, ps=2, bandwidth="1Gbps")
    view, parts = slowest_draw_view(sc)
    assert sum(count for _, count in parts[0]) == 40
    assert len(parts[0]) == 16 and parts[0][-1][1] == 1  # the slowest alone
    firsts = [view.groups[i].first for i, _ in parts[0]]
    assert firsts == sorted(firsts) and firsts[0] == 0
    ends = [view.groups[i].compute_s for i, _ in parts[0]]
    assert ends == sorted(ends)  # faster draws first


def test_one_worker_has_nobody_to_wait_for():
    wl = noisy_workload(0.5)
    assert not applies(api_scenario(workload=wl, workers=1, ps=1))


def test_sweep_rows_equal_single_predictions_with_noise():
    wl = noisy_workload(0.5)
    rows = sweep({"workers": [2, 4, 8]}, workload=wl, ps=1, bandwidth="1Gbps")
    for row in rows:
        single = predict(workload=wl, workers=row["workers"], ps=1, bandwidth="1Gbps",
                         method="analytic")
        assert row["iteration_time_s"] == pytest.approx(single.iteration_time_s, rel=1e-12)
