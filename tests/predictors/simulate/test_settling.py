"""Noise-free ASP phase draws are reported once they settle: a draw's warm-up doubles (plus the
window) until each class of workers has one mean period over both halves of its window, up to
a limit. Workers of two speeds on one saturated shard wander for hundreds of simulated
iterations and then lock at the link's bound, the arrangement the measured runs reached in a
few iterations (fresh14-acc2-asp-3w-slow: 2.018 s measured, 2.008 s the bound)."""

from __future__ import annotations

import numpy as np
import pytest

from ddlperf.api import predict
from ddlperf.api import scenario as api_scenario
from ddlperf.cluster import Cluster
from ddlperf.predictors.simulate.run import RunResult, UnitMeasure, simulate_once
from ddlperf.predictors.simulate.runner import _Job, phase_ranges
from ddlperf.predictors.simulate.settling import settle_limit, settled, settling_notes
from ddlperf.predictors.simulate.units import make_units
from tests.conftest import make_workload

WL = make_workload([(0.01, 0.02, [1_000_000])] * 8)  # 8 MB, 0.24 s a pass at speed 1
MIXED = {"workers": [{"name": "fast", "count": 2}, {"name": "slow", "count": 1, "speed": 0.5}],
         "ps": 1, "bandwidth": "100Mbps"}
# three workers push 8 MB each per iteration through the shard's 100 Mbit link
LOCK_S = 3 * 8e6 * 8 / (100e6 * 1448 / 1514)


def _mixed(**kw):
    return predict(workload=WL, cluster=Cluster.from_dict(MIXED, field="cluster"), sync="asp",
                   accumulation=2, method="simulate", warmup=2, **kw)


def test_two_speeds_on_one_saturated_shard_are_reported_locked_at_the_links_bound():
    p = _mixed()
    for worker in p.workers:
        assert worker.iteration_time_s == pytest.approx(LOCK_S, rel=0.002)
    note = next(n for n in p.notes if "had not settled after 2 warm-up" in n)
    assert "their warm-up doubled" in note


def test_the_unsettled_window_it_replaces_is_the_wander():
    # the same draw with the warm-up as given: the slow worker 10–30% behind, not yet locked
    sc = api_scenario(workload=WL, cluster=Cluster.from_dict(MIXED, field="cluster"),
                      sync="asp", accumulation=2)
    units = make_units(sc, individual=True)
    job = _Job(sc, units, 2, 20, None, 0, False, "coalesced", phase_ranges(sc, units))
    raw = simulate_once(sc, units, 2, 20, None, 0, 0, False, starts=job.starts(0))
    assert not settled(raw)
    assert max(m.period.mean() for m in raw.measures) > 1.05 * LOCK_S
    job.settle_limit = 2000
    grown = job.run(0)
    assert grown.warmup > 2 and settled(grown)
    assert all(m.period.mean() == pytest.approx(LOCK_S, rel=1e-3) for m in grown.measures)


def test_the_result_does_not_depend_on_the_processes():
    # the forked replications carry their own warm-up back
    one, two = _mixed(jobs=1), _mixed(jobs=2)
    assert one.iteration_time_s == two.iteration_time_s
    assert one.notes == two.notes


def test_a_settled_first_window_keeps_the_warmup_and_says_nothing():
    # two identical workers on one shard keep the offset they start with: settled at once
    p = predict(workload=WL, workers=2, ps=1, sync="asp", bandwidth="200Mbps",
                method="simulate")
    assert not any("phase draws had not settled" in n for n in p.notes)


def _run(periods: list[list[float]], groups: list[object], warmup: int | None = None
         ) -> RunResult:
    class U:  # what settled() reads of a unit: its group
        def __init__(self, group: object) -> None:
            self.group = group

    measures = [UnitMeasure(np.array(p), np.zeros(len(p)), np.zeros(len(p))) for p in periods]
    return RunResult([U(g) for g in groups], measures, [], 0, warmup)  # type: ignore[misc]


def test_settled_compares_each_classs_halves():
    fast, slow = object(), object()
    assert settled(_run([[1.0] * 20, [2.0] * 20], [fast, slow]))
    # one class drifts by 1% from the first half to the second
    assert not settled(_run([[1.0] * 20, [2.0] * 10 + [2.02] * 10], [fast, slow]))
    # within a class, anti-correlated members cancel: the class's mean is what is reported
    a = [1.0, 1.2] * 10
    b = [1.2, 1.0] * 5 + [1.0, 1.2] * 5
    assert settled(_run([a, b], [fast, fast]))
    # a window too short to halve counts as settled
    assert settled(_run([[1.0, 2.0, 3.0]], [fast]))


def test_the_note_counts_the_grown_and_the_unsettled_draws():
    g = object()
    steady = _run([[1.0] * 20], [g], warmup=3)
    grown = _run([[1.0] * 20], [g], warmup=48)
    wandering = _run([[1.0] * 10 + [1.1] * 10], [g], warmup=220)
    assert settling_notes([steady, steady], 3, 220) == []
    note = settling_notes([steady, grown, wandering], 3, 220)[0]
    assert "2 of 3 phase draws had not settled after 3 warm-up" in note
    assert "up to 220 iterations" in note
    assert "1 had not settled at the limit of 220" in note


def test_ssp_is_reported_once_settled_too():
    # fresh5-ssp-identical-4w's cluster: SSP(2), four identical workers on one shard, none
    # held. With the least jitter it settles at 0.669 s; its first 45 iterations after 15 of
    # warm-up said 0.72-0.78 s (the measured run: 0.675 s).
    wl = make_workload([(0.015, 0.03, [500_000])] * 8)
    kw = dict(workload=wl, workers=4, ps=1, sync="ssp", staleness=2, bandwidth="200Mbps",
              method="simulate", iterations=45)
    searched = predict(warmup=15, **kw)
    long_run = predict(warmup=1000, **kw)
    assert searched.iteration_time_s == pytest.approx(long_run.iteration_time_s, rel=0.002)
    assert any("and the workers' periods have settled" in n for n in searched.notes)


def test_the_limit_grows_with_fewer_workers():
    assert settle_limit(2, 20, 3) == 2000  # 6,000 worker-iterations
    assert settle_limit(2, 20, 64) == 220  # SSP's limit, 10 × (warm-up + window)
    assert settle_limit(3, 20, 1) == 6000


def test_noise_widens_what_counts_as_settled():
    g = object()
    rng = np.random.default_rng(0)
    periods = list(1.0 + 0.05 * rng.standard_normal(20))
    periods[10:] = [p + 0.01 for p in periods[10:]]  # halves 1% apart, within the noise
    run = _run([periods], [g])
    run.measures[0].compute[:] = periods  # the noise is the compute's
    assert not settled(run)
    assert settled(run, noisy=True)
